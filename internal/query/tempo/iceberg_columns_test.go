package tempo

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// TestIcebergWindowReadsTheColumnsItUses: the scans of a search in a
// window and of a trace by id in a window read the columns 65d3179's
// read, the columns the query uses: the branches selecting * had the
// Iceberg reader read every column of every span of the window (events,
// links, scope attributes: most of a span's bytes) for a search that
// reads none of them.
func TestIcebergWindowReadsTheColumnsItUses(t *testing.T) {
	db, dir := openDB(t)
	loadSpans(t, db, dir, map[string][]ptrace.Traces{"a": {traces(tenantA)}})
	ice, scans := icebergOf(t, db, dir, len(tenantA), len(tenantA))
	// columns are the columns the scans read, as "col,col,…" per scan,
	// each set once: the spans without a start are read by one scan,
	// where 65d3179 read them by two (its without an end too).
	columns := func() []string {
		var out []string
		for _, s := range scans() {
			out = append(out, strings.Join(slices.Sorted(slices.Values(s.Columns)), ","))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	var rewritten, missed atomic.Int64
	newMux, oldMux := diffMux(t, ice), diffMux(t, oldSQLReader{ice, &rewritten, &missed})
	s := base.Unix()
	for _, p := range []string{
		fmt.Sprintf("/api/search?q=%s&start=%d&end=%d", url.QueryEscape(`{ span.http.method = "GET" }`), s-10, s+10),
		fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", traceCheckout, s-10, s+10),
	} {
		columns()
		if rec := serve(newMux, "a", p); rec.Code != 200 || rec.Body.Len() < 100 {
			t.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
		got := columns()
		if rec := serve(oldMux, "a", p); rec.Code != 200 {
			t.Fatalf("%s (65d3179): %d %s", p, rec.Code, rec.Body)
		}
		want := columns()
		if !slices.Equal(got, want) {
			t.Errorf("%s: the scans read the columns\n%q\nwant (65d3179's)\n%q", p, got, want)
		}
	}
	if rewritten.Load() == 0 || missed.Load() > 0 {
		t.Fatalf("%d queries rewritten to 65d3179's text, %d with its new text left", rewritten.Load(), missed.Load())
	}
}
