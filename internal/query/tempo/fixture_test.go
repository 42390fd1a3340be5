package tempo

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	sinkduckdb "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// base is the fixture's first start: not a whole microsecond, so that an
// answer rounding to microseconds shows.
var base = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// Ids of the fixture's traces and spans.
const (
	traceCheckout = "0af7651916cd43dd8448eb211c80319c" // tenant a; tenant b has a span of this id too
	tracePay      = "00000000000000004bf92f3577b34da6" // tenant a, loaded twice (a client's retry)
	traceSecret   = "11111111111111111111111111111111" // tenant b only
	spanRoot      = "00f067aa0ba902b7"
	spanDB        = "00f067aa0ba902b8"
	spanParse     = "00f067aa0ba902b9"
	spanPay       = "10f067aa0ba902b7"
	spanPayDB     = "10f067aa0ba902b8"
)

// span is a span of the fixture.
type span struct {
	trace, id, parent string
	service           string
	name              string
	kind              ptrace.SpanKind
	status            ptrace.StatusCode
	start, dur        time.Duration // after base
	attrs             map[string]any
}

// tenantA's spans: checkout (frontend GET /api → db query → sql parse),
// pay (payments POST /pay, an error, → its db call).
var tenantA = []span{
	{traceCheckout, spanRoot, "", "frontend", "GET /api", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, 2 * time.Second,
		map[string]any{"http.status_code": 200, "http.method": "GET", "sampled": true}},
	{traceCheckout, spanDB, spanRoot, "db", "db query", ptrace.SpanKindClient, ptrace.StatusCodeError, 100 * time.Millisecond, 500 * time.Millisecond,
		map[string]any{"db.system": "postgres", "weight": 1.5}},
	{traceCheckout, spanParse, spanDB, "db", "sql parse", ptrace.SpanKindInternal, ptrace.StatusCodeUnset, 150 * time.Millisecond, 10 * time.Millisecond,
		map[string]any{"db.system": "postgres"}},
	{tracePay, spanPay, "", "payments", "POST /pay", ptrace.SpanKindServer, ptrace.StatusCodeError, time.Minute, 1500 * time.Millisecond,
		map[string]any{"http.status_code": 500, "http.method": "POST"}},
	{tracePay, spanPayDB, spanPay, "db", "db query", ptrace.SpanKindClient, ptrace.StatusCodeOk, time.Minute + time.Millisecond, 20 * time.Millisecond,
		map[string]any{"db.system": "mysql"}},
}

// tenantB's spans: one in a trace of tenant a's id, and its own trace.
var tenantB = []span{
	{traceCheckout, "20f067aa0ba902b7", "", "secret-svc", "b-span", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second,
		map[string]any{"secret.key": "b-value", "http.method": "DELETE"}},
	{traceSecret, "30f067aa0ba902b7", "", "secret-svc", "secret-op", ptrace.SpanKindServer, ptrace.StatusCodeError, 30 * time.Second, 3 * time.Second,
		map[string]any{"secret.key": "b-value-2"}},
}

// traces is spans as OTLP: one resource per service (with a host
// attribute), in one scope each.
func traces(spans []span) ptrace.Traces {
	td := ptrace.NewTraces()
	byService := map[string]ptrace.SpanSlice{}
	for _, s := range spans {
		ss, ok := byService[s.service]
		if !ok {
			rs := td.ResourceSpans().AppendEmpty()
			rs.Resource().Attributes().PutStr("service.name", s.service)
			rs.Resource().Attributes().PutStr("host", "h-"+s.service)
			sc := rs.ScopeSpans().AppendEmpty()
			sc.Scope().SetName("tracelake-test")
			sc.Scope().SetVersion("1.0")
			ss = sc.Spans()
			byService[s.service] = ss
		}
		sp := ss.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(traceID(s.trace)))
		sp.SetSpanID(pcommon.SpanID(spanID(s.id)))
		if s.parent != "" {
			sp.SetParentSpanID(pcommon.SpanID(spanID(s.parent)))
		}
		sp.SetName(s.name)
		sp.SetKind(s.kind)
		sp.Status().SetCode(s.status)
		if s.status == ptrace.StatusCodeError {
			sp.Status().SetMessage("failed")
		}
		start := base.Add(s.start)
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(s.dur)))
		if err := sp.Attributes().FromRaw(s.attrs); err != nil {
			panic(err)
		}
		if s.id == spanDB {
			ev := sp.Events().AppendEmpty()
			ev.SetName("retry")
			ev.SetTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
			ev.Attributes().PutInt("attempt", 2)
			l := sp.Links().AppendEmpty()
			l.SetTraceID(pcommon.TraceID(traceID(tracePay)))
			l.SetSpanID(pcommon.SpanID(spanID(spanPay)))
		}
	}
	return td
}

func traceID(h string) (out [16]byte) {
	if copy(out[:], idBytes(h)) != 16 {
		panic("bad trace id " + h)
	}
	return out
}

func spanID(h string) (out [8]byte) {
	if copy(out[:], idBytes(h)) != 8 {
		panic("bad span id " + h)
	}
	return out
}

// loadSpans decodes each message of td for its tenant as the pipeline
// does (otel's decoder over OTLP protobuf) and loads the rows into the
// spans table as the DuckDB sink does (its columns, timestamps from
// microseconds).
func loadSpans(t testing.TB, db *sql.DB, dir string, msgs map[string][]ptrace.Traces) {
	t.Helper()
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var b sink.Batch
	for tenant, tds := range msgs {
		for _, td := range tds {
			body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
			if err != nil {
				t.Fatal(err)
			}
			rec := &kgo.Record{Topic: "otlp", Value: body, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(tenant)}}}
			if _, err := dec.AppendRows(&b, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := filepath.Join(dir, fmt.Sprintf("rows-%d.ndjson", time.Now().UnixNano()))
	if err := os.WriteFile(file, b.Rows, 0o644); err != nil {
		t.Fatal(err)
	}
	createSpansTable(t, db)
	var read, sel []string
	for _, c := range otel.Spans.AllColumns() {
		typ := map[schema.Type]string{schema.String: "VARCHAR", schema.Int32: "INTEGER", schema.Int64: "BIGINT",
			schema.JSON: "JSON", schema.Timestamp: "BIGINT"}[c.Type]
		read = append(read, sqltext.Ident(c.Name)+": "+sqltext.String(typ))
		if c.Type == schema.Timestamp {
			sel = append(sel, "make_timestamp("+sqltext.Ident(c.Name)+")")
		} else {
			sel = append(sel, sqltext.Ident(c.Name))
		}
	}
	q := fmt.Sprintf("INSERT INTO otel_spans SELECT %s FROM read_ndjson(%s, columns = {%s})",
		strings.Join(sel, ", "), sqltext.String(file), strings.Join(read, ", "))
	if _, err := db.Exec(q); err != nil {
		t.Fatal(err)
	}
}

// openDB opens a DuckDB file in a temporary directory, closed after the
// test; it returns the directory too.
func openDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("duckdb", filepath.Join(dir, "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dir
}

// createSpansTable creates the spans table with the sink's columns.
func createSpansTable(t testing.TB, db *sql.DB) {
	t.Helper()
	var cols []string
	for _, c := range sinkduckdb.TypedColumns(&otel.Spans) {
		cols = append(cols, sqltext.Ident(c.Name)+" "+c.Type)
	}
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS otel_spans (" + strings.Join(cols, ", ") + ")"); err != nil {
		t.Fatal(err)
	}
}

// fixture is the Tempo API over a DuckDB holding the fixture's spans of
// tenants a and b, tenant a's pay trace loaded twice.
type fixture struct {
	t   *testing.T
	mux *http.ServeMux
	db  *sql.DB
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureCap(t, maxTraceSpans)
}

func newFixtureCap(t *testing.T, maxSpans int) *fixture {
	t.Helper()
	pay := traces(tenantA[3:])
	return newFixtureOf(t, map[string][]ptrace.Traces{"a": {traces(tenantA), pay}, "b": {traces(tenantB)}}, maxSpans)
}

// newFixtureOf is the Tempo API over a DuckDB holding msgs, each
// tenant's messages loaded as the pipeline loads them.
func newFixtureOf(t *testing.T, msgs map[string][]ptrace.Traces, maxSpans int) *fixture {
	t.Helper()
	return newFixtureFor(t, msgs, maxSpans, func(string) tenancy.Resolver { return tenancy.Resolver{Required: true} })
}

// newFixtureFor is newFixtureOf whose requests' tenants are decided by
// the resolver tenants makes, given the database's directory.
func newFixtureFor(t *testing.T, msgs map[string][]ptrace.Traces, maxSpans int, tenants func(dir string) tenancy.Resolver) *fixture {
	t.Helper()
	db, dir := openDB(t)
	loadSpans(t, db, dir, msgs)
	r, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if _, err := register(mux, Options{Reader: r, Tenants: tenants(dir), Version: "v-test"}, maxSpans); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, mux: mux, db: db}
}

// get requests path for tenant ("" for none) with Accept accept ("" for
// none).
func (f *fixture) get(tenant, path, accept string) *httptest.ResponseRecorder {
	f.t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if tenant != "" {
		req.Header.Set("X-Scope-OrgID", tenant)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	return rec
}
