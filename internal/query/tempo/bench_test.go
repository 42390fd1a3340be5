package tempo

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cputime"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// benchSpans is the size of the benchmarks' table: TEMPO_BENCH_SPANS
// spans (default 1M; the target is stated for 10M), in traces of 10
// spans over a day, two tenants' traces interleaved, loaded in time
// order as the pipeline loads them.
func benchSpans() int {
	if n, err := strconv.Atoi(os.Getenv("TEMPO_BENCH_SPANS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// benchStart is the first span's start; spans follow each other evenly
// over a day.
var benchStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func benchMux(b *testing.B, n int) *http.ServeMux {
	b.Helper()
	db, _ := openDB(b)
	insertBenchSpans(b, db, n)
	r, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return readerMux(b, r)
}

// insertBenchSpans creates otel_spans in db with the benchmarks' n spans,
// in load order.
func insertBenchSpans(b testing.TB, db *sql.DB, n int) {
	b.Helper()
	createSpansTable(b, db)
	usPerSpan := int64(24*time.Hour/time.Microsecond) / int64(n)
	// Trace t holds spans 10t … 10t+9: the first its root, each later one
	// the child of the first; services cycle over 20, one in 50 spans lasts
	// 2s (the others 5ms).
	q := fmt.Sprintf(`INSERT INTO otel_spans (tenant_id, service_name, trace_id, span_id, parent_span_id, name, kind, status_code,
			start_time, end_time, duration_ns, resource_attributes, span_attributes, start_time_unix_nano)
		SELECT CASE WHEN (i // 10) %% 2 = 0 THEN 'a' ELSE 'b' END, 'svc-' || ((i // 10) %% 20),
			md5(CAST(i // 10 AS VARCHAR)), substr(md5(CAST(i AS VARCHAR)), 1, 16),
			CASE WHEN i %% 10 = 0 THEN NULL ELSE substr(md5(CAST(i - i %% 10 AS VARCHAR)), 1, 16) END,
			'op-' || (i %% 7), CASE WHEN i %% 10 = 0 THEN 'server' ELSE 'client' END, 'unset',
			make_timestamp(%[1]d + i * %[2]d), make_timestamp(%[1]d + i * %[2]d + dur // 1000), dur,
			json_object('service.name', 'svc-' || ((i // 10) %% 20), 'host', 'h' || (i %% 50)),
			json_object('http.status_code', 200 + (i %% 3) * 100, 'i', i),
			(%[1]d + i * %[2]d) * 1000 + 789
		FROM (SELECT range AS i, CASE WHEN range %% 50 = 7 THEN 2000000000 ELSE 5000000 END AS dur FROM range(%[3]d))`,
		benchStart.UnixMicro(), usPerSpan, n)
	if _, err := db.Exec(q); err != nil {
		b.Fatal(err)
	}
}

// readerMux is the Tempo API over r, tenants required.
func readerMux(b testing.TB, r query.Reader) *http.ServeMux {
	b.Helper()
	mux := http.NewServeMux()
	if err := Register(mux, Options{Reader: r, Tenants: tenancy.Resolver{Required: true}}); err != nil {
		b.Fatal(err)
	}
	return mux
}

// traceIDOf is the id of bench trace t: md5 of its number, as the
// table's rows have it.
func traceIDOf(t int) string { return md5hex(strconv.Itoa(t)) }

// BenchmarkTraceByID: trace by id (v2, protobuf) with Grafana's window
// (the dashboard's range: the hour around the trace), over
// TEMPO_BENCH_SPANS spans of two tenants; reports p50 and p99.
func BenchmarkTraceByID(b *testing.B) { benchTraceByID(b, true) }

// BenchmarkTraceByIDNoWindow: the same without a window (a scan of the
// tenant's every span).
func BenchmarkTraceByIDNoWindow(b *testing.B) { benchTraceByID(b, false) }

func benchTraceByID(b *testing.B, window bool) {
	n := benchSpans()
	traceByIDLoop(b, benchMux(b, n), n, window)
}

// traceByIDLoop asks mux for tenant a's bench traces, spread over the
// day, each once, with Grafana's window or without, and reports p50 and
// p99.
func traceByIDLoop(b *testing.B, mux *http.ServeMux, n int, window bool) {
	traces := n / 10
	usPerSpan := int64(24*time.Hour/time.Microsecond) / int64(n)
	var took []time.Duration
	b.ResetTimer()
	cpu := cputime.Process()
	for i := 0; b.Loop(); i++ {
		t := (i * 7919) % traces
		t -= t % 2 // tenant a's traces
		at := benchStart.Add(time.Duration(int64(t*10)*usPerSpan) * time.Microsecond)
		path := "/api/v2/traces/" + traceIDOf(t)
		if window {
			path += fmt.Sprintf("?start=%d&end=%d", at.Add(-30*time.Minute).Unix(), at.Add(30*time.Minute).Unix())
		}
		took = append(took, timed(b, mux, path, "application/protobuf", 500))
	}
	reportPercentiles(b, took)
	reportCPU(b, cpu)
}

// BenchmarkSearchServiceDuration: { resource.service.name = "x" &&
// duration > 1s } over one hour, the stated target's query.
func BenchmarkSearchServiceDuration(b *testing.B) {
	mux := benchMux(b, benchSpans())
	from := benchStart.Add(6 * time.Hour)
	params := url.Values{"q": {`{ resource.service.name = "svc-0" && duration > 1s }`},
		"start": {fmt.Sprint(from.Unix())}, "end": {fmt.Sprint(from.Add(time.Hour).Unix())}, "limit": {"20"}}
	var took []time.Duration
	b.ResetTimer()
	cpu := cputime.Process()
	for b.Loop() {
		took = append(took, timed(b, mux, "/api/search?"+params.Encode(), "", 100))
	}
	reportPercentiles(b, took)
	reportCPU(b, cpu)
}

// timed serves path for tenant a and returns how long it took; the
// answer must be 200 and at least least bytes long.
func timed(b *testing.B, mux *http.ServeMux, path, accept string, least int) time.Duration {
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("X-Scope-OrgID", "a")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	began := time.Now()
	mux.ServeHTTP(rec, req)
	took := time.Since(began)
	if rec.Code != 200 || rec.Body.Len() < least {
		b.Fatalf("%s: %d, %d bytes", path, rec.Code, rec.Body.Len())
	}
	return took
}

func reportPercentiles(b *testing.B, took []time.Duration) {
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// reportCPU reports the process's CPU time per request since start
// (every thread's, DuckDB's included), which the shared machine's load
// swells less than wall time.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cputime.Process()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
