package prom

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"net/url"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// The yardstick: rate(x[5m]) over 6 hours in at most 300 ms, over
// a table of 1 million series-points of two tenants. benchSeries series
// of one counter, a point every 15s for 6 hours (1440 each), half each
// tenant's, loaded in time order as the sinks load them.
const (
	benchSeries = 694
	benchPoints = 1440
)

var benchStart = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func benchTable(b testing.TB) *sql.DB {
	b.Helper()
	db := newTable(b)
	q := fmt.Sprintf(`INSERT INTO otel_metrics (tenant_id, service_name, metric_name, metric_description, metric_unit, metric_type,
			temporality, is_monotonic, time, start_time, value, resource_attributes, scope_name, scope_version, attributes, flags)
		SELECT CASE WHEN s %% 2 = 0 THEN 'team-a' ELSE 'team-b' END, 'svc', 'bench.requests', 'Requests.', '1', 'sum',
			'cumulative', true, make_timestamp(%d + i * 15000000), make_timestamp(%d), (i * (s %% 7 + 1))::DOUBLE,
			'{"service.name":"svc","host.name":"h' || (s %% 10) || '"}', 'meter', '1.0', '{"http.route":"/r' || s || '"}', 0
		FROM range(%d) r(s), range(%d) p(i) ORDER BY i, s`,
		benchStart.UnixMicro(), benchStart.UnixMicro(), benchSeries, benchPoints)
	if _, err := db.Exec(q); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkRate6h runs rate(x[5m]) over the 6 hours at Grafana's step for
// them (15s), for one tenant, through the engine and the table's reads.
func BenchmarkRate6h(b *testing.B) {
	f := serve(b, benchTable(b))
	benchRate6h(b, queryable{reader: f.reader, table: "otel_metrics", scope: tenancy.One("team-a")})
}

// benchRate6h runs BenchmarkRate6h's query over q.
func benchRate6h(b *testing.B, q storage.Queryable) {
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: defaultMaxSamples, Timeout: time.Minute, LookbackDelta: defaultLookback})
	ctx := context.Background()
	var series int
	var walls []time.Duration
	cpu := cpuTime()
	for b.Loop() {
		start := time.Now()
		qry, err := engine.NewRangeQuery(ctx, q, nil, "rate(bench_requests_total[5m])", benchStart, benchStart.Add(6*time.Hour), 15*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		res := qry.Exec(ctx)
		if res.Err != nil {
			b.Fatal(res.Err)
		}
		series = len(res.Value.(promql.Matrix))
		qry.Close()
		walls = append(walls, time.Since(start))
	}
	reportCPU(b, cpu)
	reportMedian(b, walls)
	if series != benchSeries/2 {
		b.Fatalf("%d series, want %d", series, benchSeries/2)
	}
	b.ReportMetric(float64(benchSeries*benchPoints/2)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkRate6hYardstick is BenchmarkRate6h's query, same engine and
// range, over the same series and samples held elsewhere, for what is
// ours in its time: "tsdb", Prometheus's own storage (teststorage: the
// head of a TSDB, in memory); "slices", the series as Select served them,
// read once before (what the engine alone costs over our iterator).
func BenchmarkRate6hYardstick(b *testing.B) {
	f := serve(b, benchTable(b))
	q := queryable{reader: f.reader, table: "otel_metrics", scope: tenancy.One("team-a")}
	ctx := context.Background()
	read, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		b.Fatal(err)
	}
	var series []storage.Series
	set := read.Select(ctx, true, nil, labels.MustNewMatcher(labels.MatchEqual, labels.MetricName, "bench_requests_total"))
	for set.Next() {
		series = append(series, set.At())
	}
	if err := set.Err(); err != nil {
		b.Fatal(err)
	}
	db := teststorage.New(b)
	app := db.Appender(ctx)
	var it chunkenc.Iterator
	for _, s := range series {
		it = s.Iterator(it)
		for it.Next() == chunkenc.ValFloat {
			t, v := it.At()
			if _, err := app.Append(0, s.Labels(), t, v); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := app.Commit(); err != nil {
		b.Fatal(err)
	}
	for _, y := range []struct {
		name string
		q    storage.Queryable
	}{
		{"tsdb", db},
		{"slices", storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return sliceQuerier(series), nil })},
	} {
		b.Run(y.name, func(b *testing.B) { benchRate6h(b, y.q) })
	}
}

// sliceQuerier serves series already read, whatever the matchers.
type sliceQuerier []storage.Series

func (s sliceQuerier) Select(context.Context, bool, *storage.SelectHints, ...*labels.Matcher) storage.SeriesSet {
	return &sliceSet{series: s, i: -1}
}

func (sliceQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (sliceQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (sliceQuerier) Close() error { return nil }

type sliceSet struct {
	series []storage.Series
	i      int
}

func (s *sliceSet) Next() bool                        { s.i++; return s.i < len(s.series) }
func (s *sliceSet) At() storage.Series                { return s.series[s.i] }
func (s *sliceSet) Err() error                        { return nil }
func (s *sliceSet) Warnings() annotations.Annotations { return nil }

// BenchmarkRate6hHTTP is BenchmarkRate6h as Grafana asks it: over HTTP,
// answered in JSON.
func BenchmarkRate6hHTTP(b *testing.B) {
	f := serve(b, benchTable(b))
	form := url.Values{"query": {"rate(bench_requests_total[5m])"}, "start": {rfc3339(benchStart)},
		"end": {rfc3339(benchStart.Add(6 * time.Hour))}, "step": {"15"}}
	var walls []time.Duration
	cpu := cpuTime()
	for b.Loop() {
		start := time.Now()
		if status, body := f.do(b, "POST", "/api/v1/query_range", form, "ta", ""); status != 200 {
			b.Fatalf("%d %s", status, body)
		}
		walls = append(walls, time.Since(start))
	}
	reportCPU(b, cpu)
	reportMedian(b, walls)
	b.ReportMetric(float64(benchSeries*benchPoints/2)*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// cpuTime is the process's CPU time so far (every thread's, DuckDB's
// included): on a machine shared with other work, wall time per
// operation swells with the load, CPU time much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
}

// reportMedian reports the median of the operations' wall times: the
// mean (ns/op) follows the slowest, which a shared machine's load makes.
func reportMedian(b *testing.B, walls []time.Duration) {
	slices.Sort(walls)
	b.ReportMetric(float64(walls[len(walls)/2].Microseconds())/1000, "p50-ms")
}
