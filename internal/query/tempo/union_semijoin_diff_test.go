package tempo

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// The window's spans (traceql's win) and a trace by id in a window read
// the branches of their spans (with a start in the window, without a
// start by their end, without either) under one condition on the union
// since b53c0d6; 65d3179 wrote the condition and the columns in each
// branch. oldSQLReader runs 65d3179's text of both: each query the
// server writes is rewritten back to it (the patterns below are the new
// text, its branches selecting * or their columns, the templates
// 65d3179's; a trace by id is 65d3179's text again), and a query of the
// new text not
// rewritten fails the test, so that the reference cannot silently be the
// new text itself.
var (
	newWinCTE = regexp.MustCompile(`(?s)win AS \(SELECT (?:\* FROM \(SELECT )?(.+?) FROM (?:\(SELECT \* FROM )?(\S+) WHERE (.+?)\n\t\tUNION ALL SELECT .+? FROM \S+ WHERE (.+?)\n\t\tUNION ALL SELECT .+? FROM \S+ WHERE (.+?)\) AS spans\n\t\tWHERE trace_id IN \(SELECT trace_id FROM win_traces\)\)`)
	// 65d3179's win: %[1] the columns, %[2] the table, %[3] the window,
	// %[4] the spans without a start, %[5] those without either time.
	oldWinCTE      = "win AS (SELECT %[1]s FROM %[2]s WHERE %[3]s\n\t\tAND trace_id IN (SELECT trace_id FROM win_traces)\n\t\tUNION ALL SELECT %[1]s FROM %[2]s WHERE %[4]s AND trace_id IN (SELECT trace_id FROM win_traces)\n\t\tUNION ALL SELECT %[1]s FROM %[2]s WHERE %[5]s AND trace_id IN (SELECT trace_id FROM win_traces))"
	newTraceBranch = regexp.MustCompile(`(?s)SELECT DISTINCT ON \(tenant_id, span_id\) (.+?) FROM \(SELECT \* FROM (.+?) UNION ALL SELECT \* FROM (.+?) UNION ALL SELECT \* FROM (.+?)\) AS spans ORDER BY `)
	// 65d3179's trace by id in a window: %[1] the columns, %[2], %[3],
	// %[4] the branches' FROM … WHERE ….
	oldTraceBranch = "SELECT DISTINCT ON (tenant_id, span_id) * EXCLUDE (tenant_id) FROM (SELECT tenant_id, %[1]s FROM %[2]s UNION ALL SELECT tenant_id, %[1]s FROM %[3]s " +
		"UNION ALL SELECT tenant_id, %[1]s FROM %[4]s) AS spans ORDER BY "
)

// newStartless is a branch of the spans without a start, those without
// an end too (one condition, as since small-costs), and oldStartless
// the two branches it was before: %[1] the branch's columns and table,
// %[2] the other conditions, %[3] the bounds of the end, %[4] the text
// between branches.
var (
	newStartless = regexp.MustCompile(`(?s)(\s+)UNION ALL SELECT (.+? FROM \S+) WHERE ([^()]*?)start_time IS NULL AND \(end_time IS NULL OR end_time BETWEEN (make_timestamp\(\$\d+\) AND make_timestamp\(\$\d+\))\)`)
	oldStartless = "%[4]sUNION ALL SELECT %[1]s WHERE %[2]sstart_time IS NULL AND end_time BETWEEN %[3]s%[4]sUNION ALL SELECT %[1]s WHERE %[2]sstart_time IS NULL AND end_time IS NULL"
)

// toOldSQL is q in 65d3179's text, and how many parts it rewrote.
func toOldSQL(q string) (string, int) {
	n := 0
	// The spans without a start in two branches, as the patterns below
	// and a trace by id's 65d3179 text have them.
	q = newStartless.ReplaceAllStringFunc(q, func(m string) string {
		n++
		g := newStartless.FindStringSubmatch(m)
		return fmt.Sprintf(oldStartless, g[2], g[3], g[4], g[1])
	})
	q = newWinCTE.ReplaceAllStringFunc(q, func(m string) string {
		n++
		g := newWinCTE.FindStringSubmatch(m)
		return fmt.Sprintf(oldWinCTE, g[1], g[2], g[3], g[4], g[5])
	})
	q = newTraceBranch.ReplaceAllStringFunc(q, func(m string) string {
		n++
		g := newTraceBranch.FindStringSubmatch(m)
		return fmt.Sprintf(oldTraceBranch, g[1], g[2], g[3], g[4])
	})
	return q, n
}

// oldSQLReader runs each query in 65d3179's text; missed counts the
// queries with a union of `SELECT *` branches it did not rewrite.
type oldSQLReader struct {
	query.Reader
	rewritten, missed *atomic.Int64
}

func (r oldSQLReader) old(q string) string {
	o, n := toOldSQL(q)
	r.rewritten.Add(int64(n))
	if strings.Contains(o, "UNION ALL SELECT * FROM") {
		r.missed.Add(1)
	}
	return o
}

func (r oldSQLReader) Query(ctx context.Context, s tenancy.Scope, q string, params ...any) (array.RecordReader, error) {
	return r.Reader.Query(ctx, s, r.old(q), params...)
}

func (r oldSQLReader) Schema(ctx context.Context, s tenancy.Scope, q string) (*arrow.Schema, error) {
	return r.Reader.Schema(ctx, s, r.old(q))
}

// diffSpans is a random load: tenants a and b sharing trace ids, a
// trace's spans hours apart (in several days, files), spans without a
// start, without an end, without either, at whole seconds and a
// nanosecond off them (a window's edges), retries of a span (a copy in a
// later message, its events' text different), attributes of the span and
// of its resource. It returns the messages and the seconds searches take
// their windows' edges from.
func diffSpans(rng *rand.Rand) (map[string][]ptrace.Traces, []int64) {
	day0 := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	msgs := map[string][]ptrace.Traces{}
	var edges []int64
	type retry struct {
		tenant string
		sp     ptrace.Span
		res    pcommon.Resource
	}
	var retries []retry
	for tr := range 40 {
		trace := fmt.Sprintf("%032x", 0xd1f000+tr)
		tenants := []string{"a"}
		switch tr % 4 {
		case 1:
			tenants = []string{"b"}
		case 2:
			tenants = []string{"a", "b"} // one id, two tenants' traces
		}
		for _, tenant := range tenants {
			td := ptrace.NewTraces()
			start := day0.Add(time.Duration(rng.IntN(30*3600)) * time.Second)
			edges = append(edges, start.Unix())
			var root pcommon.SpanID
			for i := range 1 + rng.IntN(5) {
				svc := []string{"front", "db", "pay"}[rng.IntN(3)]
				rs := td.ResourceSpans().AppendEmpty()
				rs.Resource().Attributes().PutStr("service.name", svc)
				rs.Resource().Attributes().PutStr("env", []string{"prod", "dev"}[rng.IntN(2)])
				sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
				sp.SetTraceID(pcommon.TraceID(traceID(trace)))
				id := pcommon.SpanID(spanID(fmt.Sprintf("%016x", 0x5000+tr*16+i)))
				sp.SetSpanID(id)
				if i == 0 {
					root = id
				} else {
					sp.SetParentSpanID(root)
				}
				sp.SetName([]string{"GET /", "query", "POST /pay"}[rng.IntN(3)])
				sp.SetKind(ptrace.SpanKind(1 + rng.IntN(3)))
				at := start
				if i > 0 {
					// Minutes, or hours (past the reach, the next day) later.
					at = at.Add(time.Duration(rng.IntN(4)) * []time.Duration{time.Minute, 50 * time.Minute, 3 * time.Hour}[rng.IntN(3)])
				}
				at = at.Add([]time.Duration{0, 0, time.Nanosecond, -time.Nanosecond, time.Millisecond}[rng.IntN(5)])
				dur := time.Duration(rng.IntN(3000)) * time.Millisecond
				switch rng.IntN(8) {
				case 0: // no start
					sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(dur)))
				case 1: // no end
					sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
				case 2: // neither
				default:
					sp.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
					sp.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(dur)))
				}
				sp.Attributes().PutStr("k", []string{"x", "y", "z"}[rng.IntN(3)])
				if rng.IntN(3) == 0 {
					sp.Attributes().PutInt("n", int64(rng.IntN(10)))
				}
				ev := sp.Events().AppendEmpty()
				ev.SetName("first")
				ev.SetTimestamp(pcommon.NewTimestampFromTime(at))
				if rng.IntN(5) == 0 {
					retries = append(retries, retry{tenant, sp, rs.Resource()})
				}
			}
			msgs[tenant] = append(msgs[tenant], td)
		}
	}
	// The retries: a copy of the span whose events' text differs (longer,
	// shorter), in a message of its own.
	for _, r := range retries {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		r.res.CopyTo(rs.Resource()) // a retry's resource is the span's
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		r.sp.CopyTo(sp)
		if rng.IntN(2) == 0 {
			sp.Events().AppendEmpty().SetName("retried")
		} else {
			sp.Events().At(0).SetName("r")
		}
		msgs[r.tenant] = append(msgs[r.tenant], td)
	}
	return msgs, edges
}

// diffRequests are random requests of the Tempo API over the load: searches
// (TraceQL on span and resource attributes, intrinsics, limit, spss,
// minDuration, maxDuration) in windows with edges at the spans' seconds,
// metrics in windows, and each trace by id with and without a window.
func diffRequests(rng *rand.Rand, edges []int64) []string {
	queries := []string{`{}`, `{ span.k = "x" }`, `{ resource.service.name = "db" }`, `{ resource.env = "prod" && span.k != "y" }`,
		`{ name = "query" } && { span.k = "z" }`, `{ duration > 1s }`, `{ rootServiceName = "pay" }`, `{ span.n >= 5 } || { kind = server }`,
		`{ traceDuration > 2h }`, `{ resource.service.name = "front" } >> { span.k = "x" }`}
	edge := func() int64 { return edges[rng.IntN(len(edges))] + int64(rng.IntN(3)-1) }
	var paths []string
	for range 70 {
		v := url.Values{"q": {queries[rng.IntN(len(queries))]}}
		if rng.IntN(6) > 0 {
			lo, hi := edge(), edge()
			if lo > hi {
				lo, hi = hi, lo
			}
			v.Set("start", fmt.Sprint(lo))
			v.Set("end", fmt.Sprint(hi+int64(rng.IntN(2))))
		}
		if rng.IntN(2) == 0 {
			v.Set("limit", fmt.Sprint(1+rng.IntN(6)))
		}
		if rng.IntN(2) == 0 {
			v.Set("spss", fmt.Sprint(1+rng.IntN(4)))
		}
		if rng.IntN(4) == 0 {
			v.Set("minDuration", []string{"500ms", "1s", "1h"}[rng.IntN(3)])
		}
		if rng.IntN(4) == 0 {
			v.Set("maxDuration", []string{"1s", "3s", "5h"}[rng.IntN(3)])
		}
		paths = append(paths, "/api/search?"+v.Encode())
	}
	for range 8 {
		lo := edge()
		v := url.Values{"q": {queries[rng.IntN(len(queries))] + " | count_over_time()"},
			"start": {fmt.Sprint(lo * 1e9)}, "end": {fmt.Sprint((lo + 1 + int64(rng.IntN(7200))) * 1e9)}, "step": {"600s"}}
		paths = append(paths, "/api/metrics/query_range?"+v.Encode())
	}
	for tr := range 40 {
		if tr%2 == 1 {
			continue
		}
		id := fmt.Sprintf("%032x", 0xd1f000+tr)
		paths = append(paths, "/api/v2/traces/"+id, "/api/traces/"+id)
		for range 2 {
			lo := edge()
			paths = append(paths, fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", id, lo, lo+1+int64(rng.IntN(3*3600))))
		}
	}
	return paths
}

// TestUnionSemiJoinAnswersAsEachBranchJoined: over random loads, every
// search, metrics query and trace by id is answered byte for byte as
// 65d3179's SQL answers it, by DuckDB and by the Iceberg reader, whose
// scans open the same files.
func TestLongUnionSemiJoinAnswersAsEachBranchJoined(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("~1,300 queries through DuckDB and the Iceberg reader; long: run with -run '^TestLong' without -race")
	}
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 29))
			msgs, edges := diffSpans(rng)
			paths := diffRequests(rng, edges)
			db, dir := openDB(t)
			loadSpans(t, db, dir, msgs)
			var rows int
			if err := db.QueryRow("SELECT count(*) FROM otel_spans").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			duck, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ice, scans := icebergOf(t, db, dir, rows, 40)
			take := func() (files int) {
				for _, s := range scans() {
					files += s.Files
				}
				return files
			}
			for name, r := range map[string]query.Reader{"duckdb": duck, "iceberg": ice} {
				var rewritten, missed atomic.Int64
				newMux, oldMux := diffMux(t, r), diffMux(t, oldSQLReader{r, &rewritten, &missed})
				nonEmpty := 0
				for i, p := range paths {
					tenant := []string{"a", "b"}[i%2] // b's traces share a's ids
					take()
					got := serve(newMux, tenant, p)
					newFiles := take()
					want := serve(oldMux, tenant, p)
					oldFiles := take()
					if got.Code != want.Code || got.Body.String() != want.Body.String() {
						t.Errorf("%s: %s for %s: answered %d %s\nwant (65d3179) %d %s", name, p, tenant, got.Code, got.Body, want.Code, want.Body)
					}
					// Fewer where a file holds spans without a start of
					// both kinds: one scan of both opens it once, where
					// a branch of each opened it twice.
					if newFiles > oldFiles {
						t.Errorf("%s: %s for %s: the scans opened %d files, 65d3179's %d", name, p, tenant, newFiles, oldFiles)
					}
					if got.Code == 200 && (strings.Contains(got.Body.String(), `"spanID"`) || strings.Contains(got.Body.String(), `"spanId"`) || got.Body.Len() > 200) {
						nonEmpty++
					}
				}
				if rewritten.Load() == 0 || missed.Load() > 0 {
					t.Fatalf("%s: %d queries rewritten to 65d3179's text, %d with its new text left", name, rewritten.Load(), missed.Load())
				}
				if nonEmpty < len(paths)/4 {
					t.Errorf("%s: %d of %d answers with spans: the load does not exercise the queries", name, nonEmpty, len(paths))
				}
				t.Logf("%s: %d requests, %d answering spans, %d queries rewritten", name, len(paths), nonEmpty, rewritten.Load())
			}
		})
	}
}

// diffMux is the Tempo API over r.
func diffMux(t *testing.T, r query.Reader) *http.ServeMux {
	t.Helper()
	mux := http.NewServeMux()
	if _, err := register(mux, Options{Reader: r, Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, 7); err != nil {
		t.Fatal(err)
	}
	return mux
}

// serve asks mux for path as tenant, in JSON.
func serve(mux *http.ServeMux, tenant, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("X-Scope-OrgID", tenant)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

// icebergOf loads the first rows spans of db's table into an Iceberg
// table in dir, batch rows a file, and opens its reader; scans takes the
// stats of the scans run since its last call.
func icebergOf(t *testing.T, db *sql.DB, dir string, rows, batch int) (ice *query.Iceberg, scans func() []query.ScanStats) {
	t.Helper()
	lake := filepath.Join(dir, "lake")
	icebergtest.LoadTable(t, db, "otel_spans", &otel.Spans, rows, batch, 1, openBenchSink(t, lake))
	var mu sync.Mutex
	var seen []query.ScanStats
	ice = openBenchReader(t, lake, func(st query.ScanStats) {
		mu.Lock()
		seen = append(seen, st)
		mu.Unlock()
	})
	return ice, func() []query.ScanStats {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}
