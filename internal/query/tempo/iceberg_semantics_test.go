package tempo

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestIcebergTempoSemantics: the SQL of array attributes (lambdas over
// JSON lists), nil comparisons, regular expressions and by(rootName)
// runs on the Iceberg reader as on DuckDB.
func TestIcebergTempoSemantics(t *testing.T) {
	db, dir := openDB(t)
	spans := append([]span{{traceCheckout, spanRoot, "", "frontend", "GET /api", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second,
		map[string]any{"tags": []any{"blue", "green"}, "msg": "first\nsecond"}}}, tenantA[1:]...)
	loadSpans(t, db, dir, map[string][]ptrace.Traces{"a": {traces(spans)}})
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, len(spans), len(spans), 1, openBenchSink(t, lake))
	f := &fixture{t: t, db: db, mux: http.NewServeMux()}
	if _, err := register(f.mux, Options{Reader: openBenchReader(t, lake, nil), Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, maxTraceSpans); err != nil {
		t.Fatal(err)
	}
	for q, n := range map[string]int{`{ span.tags = "green" }`: 1, `{ span.tags != "red" && span.msg =~ "first.*" }`: 1,
		`{ span.db.system = nil && kind = server && name != nil }`: 2} {
		code, got, body := f.searchStatus(q)
		if code != 200 || len(got) != n {
			t.Errorf("%s: %d %s %q, want %d traces", q, code, body, got, n)
		}
	}
	if code, got := f.v2Values("span.tags", ""); code != 200 || !slices.Equal(got, []string{"string:blue", "string:green"}) {
		t.Errorf("values of span.tags: %d %q", code, got)
	}
	if got := f.rangeOf("a", `{} | count_over_time() by (rootServiceName)`); len(got) == 0 {
		t.Errorf("by (rootServiceName): no series")
	}
}

// TestIcebergReadFailureHidesWarehousePaths: a search whose scan fails
// (the warehouse's data files gone) is the server's failure, 500, and
// its answer does not name the warehouse's files: it was a 400 "query
// refused" quoting the data file's path.
func TestIcebergReadFailureHidesWarehousePaths(t *testing.T) {
	db, dir := openDB(t)
	loadSpans(t, db, dir, map[string][]ptrace.Traces{"a": {traces(tenantA)}})
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, len(tenantA), len(tenantA), 1, openBenchSink(t, lake))
	f := &fixture{t: t, db: db, mux: http.NewServeMux()}
	if _, err := register(f.mux, Options{Reader: openBenchReader(t, lake, nil), Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, maxTraceSpans); err != nil {
		t.Fatal(err)
	}
	removed := 0
	err := filepath.WalkDir(filepath.Join(lake, "warehouse"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			removed++
			return os.Remove(p)
		}
		return err
	})
	if err != nil || removed == 0 {
		t.Fatalf("remove the data files: %v (%d removed)", err, removed)
	}
	code, _, body := f.searchStatus(`{}`)
	if code != http.StatusInternalServerError || strings.Contains(body, lake) || strings.Contains(body, "warehouse") {
		t.Fatalf("a search over removed data files answered %d %q, want a 500 naming no file of the warehouse", code, body)
	}
}

// TestIcebergDayBoundaryAnswers: traces around midnight (one starting a
// nanosecond before it and ending at it, one at it, one 500 ns past it,
// one a microsecond before it), each in its day's Iceberg partition, are
// answered by the Iceberg reader as by DuckDB and as Tempo would: a
// search's traces start by end×1e9 ns and end at start×1e9 or after
// (vparquet4 createTraceIterator), a metrics query counts the spans of
// (start, end] (engine_metrics.go checkTime).
func TestIcebergDayBoundaryAnswers(t *testing.T) {
	midnight := time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Duration { return midnight.Add(d).Sub(base) }
	const (
		beforeNs = "000000000000000000000000000000a1"
		atZero   = "000000000000000000000000000000a2"
		after500 = "000000000000000000000000000000a3"
		beforeUs = "000000000000000000000000000000a4"
	)
	spans := []span{
		{beforeNs, "00000000000000b1", "", "edge", "before-ns", ptrace.SpanKindServer, ptrace.StatusCodeOk, at(-time.Nanosecond), time.Nanosecond, nil},
		{atZero, "00000000000000b2", "", "edge", "at-midnight", ptrace.SpanKindServer, ptrace.StatusCodeOk, at(0), time.Microsecond, nil},
		{after500, "00000000000000b3", "", "edge", "after-500ns", ptrace.SpanKindServer, ptrace.StatusCodeOk, at(500), time.Millisecond, nil},
		{beforeUs, "00000000000000b4", "", "edge", "before-us", ptrace.SpanKindServer, ptrace.StatusCodeOk, at(-time.Microsecond), 2, nil},
	}
	db, dir := openDB(t)
	loadSpans(t, db, dir, map[string][]ptrace.Traces{"a": {traces(spans)}})
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, len(spans), len(spans), 1, openBenchSink(t, lake))
	onIceberg := &fixture{t: t, db: db, mux: http.NewServeMux()}
	if _, err := register(onIceberg.mux, Options{Reader: openBenchReader(t, lake, nil), Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, maxTraceSpans); err != nil {
		t.Fatal(err)
	}
	onDuckDB := newFixtureOf(t, map[string][]ptrace.Traces{"a": {traces(spans)}}, maxTraceSpans)
	s := midnight.Unix()
	searches := []struct {
		start, end int64
		want       []string // span names of the traces answered, sorted
	}{
		{s - 10, s, []string{"at-midnight", "before-ns", "before-us"}},
		{s, s + 10, []string{"after-500ns", "at-midnight", "before-ns"}},
		{s - 10, s - 1, nil},
	}
	counts := []struct {
		start, end time.Time
		want       float64
	}{
		{midnight.Add(-time.Microsecond), midnight, 2},                  // before-ns, at-midnight
		{midnight, midnight.Add(time.Millisecond), 1},                   // after-500ns
		{midnight.Add(-time.Second), midnight.Add(-time.Nanosecond), 2}, // before-us, before-ns
	}
	for name, f := range map[string]*fixture{"iceberg": onIceberg, "duckdb": onDuckDB} {
		for _, c := range searches {
			out := f.search("a", url.Values{"q": {"{}"}, "start": {fmt.Sprint(c.start)}, "end": {fmt.Sprint(c.end)}})
			var got []string
			for _, tr := range out.Traces {
				got = append(got, tr.RootTraceName)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: search over [midnight%+ds, midnight%+ds]: %v, want %v", name, c.start-s, c.end-s, got, c.want)
			}
		}
		for _, c := range counts {
			params := url.Values{"q": {`{ resource.service.name = "edge" } | count_over_time()`},
				"start": {fmt.Sprint(c.start.UnixNano())}, "end": {fmt.Sprint(c.end.UnixNano())}}
			var out struct {
				Series []struct {
					Value float64 `json:"value"`
				} `json:"series"`
			}
			if code := f.json("a", "/api/metrics/query?"+params.Encode(), &out); code != 200 {
				t.Fatalf("%s: %d", name, code)
			}
			var got float64
			for _, s := range out.Series {
				got += s.Value
			}
			if got != c.want {
				t.Errorf("%s: count over (midnight%+v, midnight%+v]: %g, want %g", name, c.start.Sub(midnight), c.end.Sub(midnight), got, c.want)
			}
		}
	}
}
