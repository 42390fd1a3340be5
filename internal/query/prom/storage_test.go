package prom

import (
	"context"
	"database/sql"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestRowsOfTheSameLabelsAreOneSeries: resources whose attributes the
// table holds in another order are two rows but one series; so are
// metrics whose names escape alike.
func TestRowsOfTheSameLabelsAreOneSeries(t *testing.T) {
	md := pmetric.NewMetrics()
	addGaugePoint(md, [][2]string{{"a", "v"}, {"b", "v"}}, "queue.depth", 0, 0)
	addGaugePoint(md, [][2]string{{"b", "v"}, {"a", "v"}}, "queue_depth", 1, 1)
	c := clientOf(t, md)
	for q, want := range map[string]model.SampleValue{"count(queue_depth)": 1, "count_over_time(queue_depth[1m])": 2} {
		v, _, _, err := c.Query(context.Background(), q, t0.Add(step15))
		if err != nil {
			t.Fatal(err)
		}
		if vec := v.(model.Vector); len(vec) != 1 || vec[0].Value != want {
			t.Errorf("%s: %v, want %v", q, vec, want)
		}
	}
}

// TestServiceNamePushdownKeepsPointAttributes: a service_name matcher is
// pushed down to the service_name column, which holds the resource's
// service.name; a series whose label comes from a point attribute, which
// wins over the resource's, must still be found, with or without
// service.name on its resource; one of another service must not.
func TestServiceNamePushdownKeepsPointAttributes(t *testing.T) {
	md := pmetric.NewMetrics()
	addGaugePoint(md, nil, "queue.depth", 0, 5).Attributes().PutStr("service.name", "worker")
	addGaugePoint(md, [][2]string{{"service.name", "other"}}, "queue.depth", 0, 5).Attributes().PutStr("service.name", "worker")
	addGaugePoint(md, [][2]string{{"service.name", "third"}}, "queue.depth", 0, 5)
	v, _, _, err := clientOf(t, md).Query(context.Background(), `queue_depth{service_name="worker"}`, t0)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, s := range v.(model.Vector) {
		jobs = append(jobs, string(s.Metric["job"]))
	}
	slices.Sort(jobs)
	if !slices.Equal(jobs, []string{"", "other"}) {
		t.Fatalf("got %v, want the series of the resource without service.name and of other's", v)
	}
}

// TestSubMillisecondPointAtTheQueryTime: a point stored at t0 + 0.5 ms is
// a sample at t0's millisecond (Prometheus's OTLP receiver truncates
// nanoseconds to milliseconds, as this package's epoch_ms does), so an
// instant query at t0 sees it; the SQL's time bound compared the
// microsecond column with t0's microsecond and lost it.
func TestSubMillisecondPointAtTheQueryTime(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := addGaugePoint(md, [][2]string{{"service.name", "s"}}, "queue.depth", 0, 5)
	dp.SetTimestamp(dp.Timestamp() + 500_000) // t0 + 0.5 ms
	v, _, _, err := clientOf(t, md).Query(context.Background(), `queue_depth`, t0)
	if err != nil {
		t.Fatal(err)
	}
	if vec := v.(model.Vector); len(vec) != 1 || vec[0].Value != 5 {
		t.Fatalf("queue_depth at t0: %v, want the sample of t0+0.5ms (at t0's millisecond)", v)
	}
}

// TestNoRecordedValueIsAStaleMarker: a point flagged as having no
// recorded value ends its series as a stale marker does in Prometheus
// (the instant after it sees nothing, a range over it skips it), and
// only that point: the flags are read as a list of their own.
func TestNoRecordedValueIsAStaleMarker(t *testing.T) {
	md := pmetric.NewMetrics()
	for i := range 4 {
		dp := addGaugePoint(md, nil, "queue.depth", i, int64(i+1))
		if i == 2 {
			dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
		}
	}
	c := clientOf(t, md)
	for _, tc := range []struct {
		q    string
		at   time.Time
		want []model.SampleValue
	}{
		{"queue_depth", ts(1).AsTime().Add(time.Second), []model.SampleValue{2}},
		{"queue_depth", ts(2).AsTime().Add(time.Second), nil},
		{"queue_depth", ts(3).AsTime().Add(time.Second), []model.SampleValue{4}},
		{"count_over_time(queue_depth[1m])", ts(3).AsTime(), []model.SampleValue{3}},
	} {
		v, _, _, err := c.Query(context.Background(), tc.q, tc.at)
		if err != nil {
			t.Fatal(err)
		}
		var got []model.SampleValue
		for _, s := range v.(model.Vector) {
			got = append(got, s.Value)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s at %s: %v, want %v", tc.q, tc.at, got, tc.want)
		}
	}
}

// TestRateOverDuckDBsRuns: DuckDB's parallel aggregation hands each
// series's points over as several sorted runs (2 on 2 threads for the
// benchmark's table); read out of order, a counter would seem to reset
// and its rate jump. Every series of the benchmark's table rises by
// s%7+1 every 15s: its rate is that over 15 at every step.
func TestRateOverDuckDBsRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the benchmark's million points")
	}
	f := serve(t, benchTable(t))
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: defaultMaxSamples, Timeout: time.Minute, LookbackDelta: defaultLookback})
	q := queryable{reader: f.reader, table: "otel_metrics", scope: tenancy.One("team-a")}
	ctx := context.Background()
	qry, err := engine.NewRangeQuery(ctx, q, nil, "rate(bench_requests_total[5m])", benchStart.Add(time.Hour), benchStart.Add(6*time.Hour), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	m := res.Value.(promql.Matrix)
	if len(m) != benchSeries/2 {
		t.Fatalf("%d series, want %d", len(m), benchSeries/2)
	}
	for _, s := range m {
		n, err := strconv.Atoi(strings.TrimPrefix(s.Metric.Get("http_route"), "/r"))
		if err != nil {
			t.Fatal(err)
		}
		want := float64(n%7+1) / 15
		if len(s.Floats) != 301 {
			t.Errorf("%s: %d steps, want 301", s.Metric, len(s.Floats))
		}
		for _, p := range s.Floats {
			if math.Abs(p.F-want) > 1e-9 {
				t.Fatalf("%s at %d: rate %v, want %v", s.Metric, p.T, p.F, want)
			}
		}
	}
}

// insertPoints inserts team-a's points as rows of the table, one a value
// list of (metric_name, metric_unit, metric_type, is_monotonic,
// metric_description, scope_version, resource_attributes, attributes,
// step, value), for rows no loader writes (null columns).
func insertPoints(t *testing.T, db *sql.DB, rows ...string) {
	t.Helper()
	q := `INSERT INTO otel_metrics (tenant_id, metric_name, metric_unit, metric_type, is_monotonic, metric_description,
			scope_name, scope_version, resource_attributes, attributes, time, value, temporality, flags)
		SELECT 'team-a', n, u, ty, m, d, 'meter', sv, r, a, make_timestamp(` + strconv.FormatInt(t0.UnixMicro(), 10) + ` + i * 15000000), v,
			CASE WHEN ty = 'sum' THEN 'cumulative' END, 0
		FROM (VALUES ` + strings.Join(rows, ", ") + `) p(n, u, ty, m, d, sv, r, a, i, v)`
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// TestNullAndEmptyColumnsAreOneSeries: the families and the series are
// grouped by the table's columns as they are (coalescing every point's
// was a third of a range query), so a null unit, monotonicity, scope
// version or attributes and an empty one come as two rows of the same
// family and labels: they must be one family and one series, with the
// points of both and the greater description.
func TestNullAndEmptyColumnsAreOneSeries(t *testing.T) {
	db := newTable(t)
	insertPoints(t, db,
		`('queue.depth', NULL, 'gauge', NULL, NULL, NULL, NULL, NULL, 0, 1)`,
		`('queue.depth', '', 'gauge', false, 'Queued jobs.', '', '{}', '{}', 1, 2)`,
		`('queue.depth', '', 'gauge', NULL, 'Jobs.', NULL, '{}', NULL, 2, 3)`)
	f := serve(t, db)
	c := f.client(t, "ta", "")
	v, _, _, err := c.QueryRange(context.Background(), "count_over_time(queue_depth[1m])",
		v1.Range{Start: ts(2).AsTime(), End: ts(2).AsTime(), Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if m := v.(model.Matrix); len(m) != 1 || len(m[0].Values) != 1 || m[0].Values[0].Value != 3 {
		t.Fatalf("count_over_time: %v, want one series of 3 points", v)
	}
	md, err := c.Metadata(context.Background(), "queue_depth", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]v1.Metadata{"queue_depth": {{Type: "gauge", Help: "Queued jobs.", Unit: ""}}}
	if !reflect.DeepEqual(md, want) {
		t.Fatalf("metadata: %v, want %v", md, want)
	}
}

// TestFamiliesOfOneNameAreTold: a gauge and a non-monotonic sum of one
// OpenTelemetry name and unit are both queue_depth; read together, the
// rows say which family they are of (one family's rows do not). A
// monotonic sum of that name (queue_depth_total) and a gauge of another
// unit (queue_depth_bytes) are not read.
func TestFamiliesOfOneNameAreTold(t *testing.T) {
	db := newTable(t)
	insertPoints(t, db,
		`('queue.depth', '', 'gauge', NULL, '', '', '{}', '{"q":"gauge"}', 0, 1)`,
		`('queue.depth', '', 'gauge', NULL, '', '', '{}', '{"q":"gauge"}', 1, 2)`,
		`('queue.depth', '', 'sum', false, '', '', '{}', '{"q":"sum"}', 1, 5)`,
		`('queue.depth', '', 'sum', true, '', '', '{}', '{"q":"sum"}', 1, 7)`,
		`('queue.depth', 'By', 'gauge', false, '', '', '{}', '{"q":"sum"}', 1, 9)`)
	c := serve(t, db).client(t, "ta", "")
	for q, want := range map[string]string{
		"sum by (q) (count_over_time(queue_depth[1m]))": `{q="gauge"} => 2 @[1772359215], {q="sum"} => 1 @[1772359215]`,
		"sum by (q) (queue_depth)":                      `{q="gauge"} => 2 @[1772359215], {q="sum"} => 5 @[1772359215]`,
		"queue_depth_total":                             `queue_depth_total{otel_scope_name="meter", q="sum"} => 7 @[1772359215]`,
	} {
		v, _, _, err := c.Query(context.Background(), q, ts(1).AsTime())
		if err != nil {
			t.Fatal(err)
		}
		vec := v.(model.Vector)
		slices.SortFunc(vec, func(a, b *model.Sample) int { return strings.Compare(a.Metric.String(), b.Metric.String()) })
		var got []string
		for _, s := range vec {
			got = append(got, s.String())
		}
		if strings.Join(got, ", ") != want {
			t.Errorf("%s: %s, want %s", q, strings.Join(got, ", "), want)
		}
	}
}
