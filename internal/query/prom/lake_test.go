package prom

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/query/httpapi"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	sinkduckdb "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// t0 is when the test metrics start; they have a point every 15s for 10
// minutes (41 points, t0 to t0+10m).
var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

const (
	step15  = 15 * time.Second
	nPoints = 41
)

// newTable makes a DuckDB database with an empty otel_metrics table, as
// the DuckDB sink makes it.
func newTable(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var defs []string
	for _, c := range sinkduckdb.TypedColumns(&otel.Metrics) {
		defs = append(defs, sqltext.Ident(c.Name)+" "+c.Type)
	}
	if _, err := db.Exec("CREATE TABLE otel_metrics (" + strings.Join(defs, ", ") + ")"); err != nil {
		t.Fatal(err)
	}
	return db
}

// load decodes md with the otel package's decoder, for tenant, and
// inserts its rows as the DuckDB sink does (timestamps from
// microseconds).
func load(t testing.TB, db *sql.DB, tenant string, md pmetric.Metrics) {
	t.Helper()
	dec, err := otel.NewDecoder(otel.SignalMetrics, otel.EncodingProto, otel.Tenancy{Default: tenant})
	if err != nil {
		t.Fatal(err)
	}
	v, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{}
	if _, err := dec.AppendRows(b, &kgo.Record{Topic: "m", Value: v}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rows.ndjson")
	if err := os.WriteFile(file, b.Rows, 0o600); err != nil {
		t.Fatal(err)
	}
	var read, sel []string
	for _, c := range otel.Metrics.AllColumns() {
		typ, col := sinkduckdb.TypedColumns(&schema.Table{Columns: []schema.Column{c}})[0].Type, sqltext.Ident(c.Name)
		if c.Type == schema.Timestamp {
			typ, col = "BIGINT", "make_timestamp("+col+")"
		}
		read = append(read, sqltext.Ident(c.Name)+": "+sqltext.String(typ))
		sel = append(sel, col)
	}
	q := "INSERT INTO otel_metrics SELECT " + strings.Join(sel, ", ") + " FROM read_ndjson(" + sqltext.String(file) +
		", columns = {" + strings.Join(read, ", ") + "}, format = 'newline_delimited')"
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// resource starts a ResourceMetrics of service (namespace shop, instance
// i-1) with one scope.
func resource(md pmetric.Metrics, service string) pmetric.MetricSlice {
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", service)
	rm.Resource().Attributes().PutStr("service.namespace", "shop")
	rm.Resource().Attributes().PutStr("service.instance.id", "i-1")
	rm.Resource().Attributes().PutStr("host.name", "h1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("meter")
	sm.Scope().SetVersion("1.0")
	return sm.Metrics()
}

func ts(i int) pcommon.Timestamp {
	return pcommon.NewTimestampFromTime(t0.Add(time.Duration(i) * step15))
}

// newMetric adds a metric of name and unit to ms.
func newMetric(ms pmetric.MetricSlice, name, unit string) pmetric.Metric {
	m := ms.AppendEmpty()
	m.SetName(name)
	m.SetUnit(unit)
	return m
}

// addCounter adds a cumulative monotonic sum of route, rising by perStep
// every 15s.
func addCounter(ms pmetric.MetricSlice, name, route string, perStep int64) {
	m := newMetric(ms, name, "1")
	m.SetDescription("Requests served.")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range nPoints {
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(ts(0))
		dp.SetTimestamp(ts(i))
		dp.SetIntValue(perStep * int64(i))
		dp.Attributes().PutStr("http.route", route)
		dp.Attributes().PutInt("http.status_code", 200)
	}
}

// addGauge adds a gauge in bytes.
func addGauge(ms pmetric.MetricSlice) {
	m := newMetric(ms, "process.memory.usage", "By")
	g := m.SetEmptyGauge()
	for i := range nPoints {
		dp := g.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(i))
		dp.SetDoubleValue(1000 + float64(i))
	}
}

// addHistogram adds a cumulative histogram in seconds, bounds 0.1, 0.5
// and 1: each step adds 1 observation to the first bucket, 2 to the
// second, 1 to the third and 1 past the last (5 observations, sum 3).
func addHistogram(ms pmetric.MetricSlice) {
	m := newMetric(ms, "http.server.duration", "s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range nPoints {
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(ts(0))
		dp.SetTimestamp(ts(i))
		dp.ExplicitBounds().FromRaw([]float64{0.1, 0.5, 1})
		n := uint64(i)
		dp.BucketCounts().FromRaw([]uint64{n, 2 * n, n, n})
		dp.SetCount(5 * n)
		dp.SetSum(3 * float64(i))
		dp.Attributes().PutStr("http.route", "/cart")
	}
}

// addSummary adds a summary in milliseconds: quantiles 0.5 and 0.99 at
// 10 and 99, count i, sum 20i.
func addSummary(ms pmetric.MetricSlice) {
	m := newMetric(ms, "rpc.latency", "ms")
	s := m.SetEmptySummary()
	for i := range nPoints {
		dp := s.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(ts(0))
		dp.SetTimestamp(ts(i))
		dp.SetCount(uint64(i))
		dp.SetSum(20 * float64(i))
		for q, v := range map[float64]float64{0.5: 10, 0.99: 99} {
			qv := dp.QuantileValues().AppendEmpty()
			qv.SetQuantile(q)
			qv.SetValue(v)
		}
	}
}

// addGaugePoint adds a resource of the attributes res, in order, with one
// point of gauge name at step i, and returns the point.
func addGaugePoint(md pmetric.Metrics, res [][2]string, name string, i int, v int64) pmetric.NumberDataPoint {
	rm := md.ResourceMetrics().AppendEmpty()
	for _, kv := range res {
		rm.Resource().Attributes().PutStr(kv[0], kv[1])
	}
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(name)
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(i))
	dp.SetIntValue(v)
	return dp
}

// addDeltaCounter adds a delta sum, which is not served.
func addDeltaCounter(ms pmetric.MetricSlice) {
	m := newMetric(ms, "delta.requests", "")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := s.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(1))
	dp.SetIntValue(3)
}

// fixture is a table holding two tenants' metrics, served.
type fixture struct {
	db     *sql.DB
	reader query.Reader
	srv    *httptest.Server
	tokens string // the tokens file
}

// Tenants and tokens of the fixture: "ta" reads team-a, "tb" team-b,
// "ops" every tenant.
const tokensFile = "ta read=team-a\ntb read=team-b\nops read=*\n"

// newFixture loads team-a's counter, gauge, histogram, summary and a
// delta sum (twice, as a client's retry would), and team-b's counter of another
// service and route, and serves them.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	db := newTable(t)
	a := pmetric.NewMetrics()
	ms := resource(a, "checkout")
	addCounter(ms, "http.server.requests", "/cart", 10)
	addGauge(ms)
	addHistogram(ms)
	addSummary(ms)
	addDeltaCounter(ms)
	load(t, db, "team-a", a)
	load(t, db, "team-a", a)
	b := pmetric.NewMetrics()
	addCounter(resource(b, "secret-b"), "http.server.requests", "/admin-b", 7)
	load(t, db, "team-b", b)
	return serve(t, db)
}

// clientOf serves md, team-a's, and is team-a's client.
func clientOf(t *testing.T, md pmetric.Metrics) v1.API {
	t.Helper()
	db := newTable(t)
	load(t, db, "team-a", md)
	return serve(t, db).client(t, "ta", "")
}

// serve serves db's otel_metrics with the fixture's tokens.
func serve(t testing.TB, db *sql.DB) *fixture {
	t.Helper()
	r, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(tokensFile), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := tenancy.LoadTokens(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	closeFn, err := Register(mux, Options{Options: httpapi.Options{Reader: r, Tenants: tenancy.Resolver{Tokens: tokens}, Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); closeFn() })
	return &fixture{db: db, reader: r, srv: srv, tokens: path}
}
