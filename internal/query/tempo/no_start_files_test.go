package tempo

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// A trace by id in Grafana's window reads the window's files, not the
// table's, also where spans sent without a start (a NULL start_time; here
// one in 500, in every file) lie about: the branch reading the trace's
// spans without a start read every file holding one (trace_id = … AND
// start_time IS NULL prunes nothing on a trace id), so each request read
// what one without a window reads (at 10M spans in DuckDB: 86 CPU ms
// against 20, 74 without a window). Bounded by the spans' end (at or
// after the first start read: a span without a start may have started
// among them however late it ended), it reads the files from the
// window's on: for traces late in the day, a few. In two scans: those
// without an end either are read by the same condition as those ending
// in reach (a third branch cost DuckDB's planning of a third scan: ~2.5
// of a trace's ~19 CPU ms at 2M spans where no span lacks a start).
func TestTraceByIDInAWindowReadsTheWindowsFilesBesideSpansWithoutAStart(t *testing.T) {
	const n, batch = 40_000, 1_000
	db, dir := openDB(t)
	insertBenchSpans(t, db, n)
	if _, err := db.Exec(`UPDATE otel_spans SET start_time = NULL, start_time_unix_nano = 0 WHERE rowid % 500 = 7`); err != nil {
		t.Fatal(err)
	}
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, n, batch, 1, openBenchSink(t, lake))
	var mu sync.Mutex
	opened, scans := 0, 0 // files the scans opened, both branches', and the scans
	r := openBenchReader(t, lake, func(st query.ScanStats) {
		mu.Lock()
		opened += st.Files
		scans++
		mu.Unlock()
	})
	mux := readerMux(t, r)
	usPerSpan := int64(24*time.Hour/time.Microsecond) / n
	get := func(path string) {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-Scope-OrgID", "a")
		req.Header.Set("Accept", "application/protobuf")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != 200 || rec.Body.Len() < 500 {
			t.Fatalf("%s: %d, %d bytes", path, rec.Code, rec.Body.Len())
		}
	}
	const traces = 10
	for i := range traces {
		tr := n/10 - 1 - (i*37)%(n/40) // in the day's last quarter
		tr -= tr % 2                   // tenant a's
		at := benchStart.Add(time.Duration(int64(tr*10)*usPerSpan) * time.Microsecond)
		get(fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", traceIDOf(tr), at.Add(-30*time.Minute).Unix(), at.Add(30*time.Minute).Unix()))
	}
	// Tenant a's files: one per batch of the day's spans, each ~36 minutes
	// of them. The window and its reach span hours, not the day.
	filesOfA := n / batch
	mu.Lock()
	defer mu.Unlock()
	t.Logf("files opened per trace: %d of tenant a's %d", opened/traces, filesOfA)
	if scans != 2*traces {
		t.Errorf("%d traces by id in a window scanned the table %d times, want twice each: the window's spans and those without a start", traces, scans)
	}
	if opened/traces > filesOfA/4 {
		t.Errorf("a trace by id in an hour's window opened %d files, of tenant a's %d: want the window's few", opened/traces, filesOfA)
	}
}
