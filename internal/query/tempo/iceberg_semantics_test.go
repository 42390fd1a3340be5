package tempo

import (
	"io/fs"
	"net/http"
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
