package prom

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The series served, checked against prometheus/prometheus
// storage/remote/otlptranslator/prometheusremotewrite (what Prometheus's
// OTLP receiver stores for the same OTLP data), config/config.go
// (DefaultOTLPConfig) and storage/remote/write_otlp_handler.go (how the
// config becomes the translator's Settings).

// instantSamples loads md for team-a, runs q at at and returns its vector's samples as strings,
// sorted.
func instantSamples(t *testing.T, md pmetric.Metrics, q string, at time.Time) []string {
	t.Helper()
	v, _, _, err := clientOf(t, md).Query(context.Background(), q, at)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var got []string
	for _, s := range v.(model.Vector) {
		got = append(got, s.String())
	}
	slices.Sort(got)
	return got
}

// TestLabelNamesKeepUnderscoresAsPrometheusDefaults: Prometheus's default OTLP
// config (config/config.go DefaultOTLPConfig) sets
// LabelNameUnderscoreSanitization and LabelNamePreserveMultipleUnderscores,
// which write_otlp_handler.go ConsumeMetrics passes to the translator
// (metrics_to_prw.go setResourceContext builds its LabelNamer with
// them): an attribute "a__b" stays label a__b (otlptranslator
// strconv.go sanitizeLabelName keeps the underscores), "k8s..pod" is
// k8s__pod, and "_tag" is key_tag (label_namer.go Build). names.go's
// labelNamer sets both.
func TestLabelNamesKeepUnderscoresAsPrometheusDefaults(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := addGaugePoint(md, nil, "queue.depth", 0, 5)
	dp.Attributes().PutStr("a__b", "1")
	dp.Attributes().PutStr("k8s..pod", "2")
	dp.Attributes().PutStr("_tag", "3")
	want := []string{`queue_depth{a__b="1", k8s__pod="2", key_tag="3"} => 5 @[1772359200]`}
	wantInstant(t, md, t0, "queue_depth", want)
}

// TestScopeAttributesAreLabels: with scope metadata promoted (as
// seriesLabels says it is: otel_scope_name, otel_scope_version),
// Prometheus also labels each series with the scope's attributes as
// otel_scope_<key> (metrics_to_prw.go setScopeContext, helper.go
// createAttributes "Merge cached scope labels"), so two scopes of one
// name and version but other attributes are two series. seriesSQL groups
// the rows by scope_attributes too, and seriesLabels labels them.
func TestScopeAttributesAreLabels(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	for i, region := range []string{"eu", "us"} {
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("meter")
		sm.Scope().SetVersion("1.0")
		sm.Scope().Attributes().PutStr("region", region)
		m := sm.Metrics().AppendEmpty()
		m.SetName("queue.depth")
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts(0))
		dp.SetIntValue(int64(10 + i))
	}
	want := []string{
		`queue_depth{job="svc", otel_scope_name="meter", otel_scope_region="eu", otel_scope_version="1.0", service_name="svc"} => 10 @[1772359200]`,
		`queue_depth{job="svc", otel_scope_name="meter", otel_scope_region="us", otel_scope_version="1.0", service_name="svc"} => 11 @[1772359200]`,
	}
	wantInstant(t, md, t0, "queue_depth", want)
}

// TestNoScopeLabelsWithoutScopeName: Prometheus promotes scope
// metadata only for a scope with a name (metrics_to_prw.go
// setScopeContext: `!settings.PromoteScopeMetadata || scope.name == ""`
// leaves scopeLabels nil, and createAttributes then sets neither
// otel_scope_name nor otel_scope_version), so a nameless scope's version
// is no label, and a point attribute otel.scope.name is not overwritten.
func TestNoScopeLabelsWithoutScopeName(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetVersion("1.0") // no name
	m := sm.Metrics().AppendEmpty()
	m.SetName("queue.depth")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(0))
	dp.SetIntValue(5)
	dp.Attributes().PutStr("otel.scope.name", "x")
	want := []string{`queue_depth{otel_scope_name="x"} => 5 @[1772359200]`}
	wantInstant(t, md, t0, "queue_depth", want)
}

// TestCollidingResourceAttributesLastWins: Prometheus joins with ";"
// only the point's attributes that escape alike (helper.go
// createAttributes); promoted resource attributes are set one after the
// other in the resource's order (metrics_to_prw.go
// PromoteResourceAttributes.addPromotedAttributes: builder.Set), so the
// last of deployment.env and deployment_env wins. seriesLabels takes
// them in the resource's order (otel.AttributesFromJSON keeps it).
func TestCollidingResourceAttributesLastWins(t *testing.T) {
	md := pmetric.NewMetrics()
	addGaugePoint(md, [][2]string{{"deployment.env", "a"}, {"deployment_env", "b"}}, "queue.depth", 0, 5)
	want := []string{`queue_depth{deployment_env="b"} => 5 @[1772359200]`}
	wantInstant(t, md, t0, "queue_depth", want)
}

// TestCollisionJoinsOnlyOntoAValue: point attributes a.b="" and a_b="x" escape
// alike; Prometheus joins only onto a non-empty value (helper.go
// createAttributes: `if existingValue := c.builder.Get(finalKey);
// existingValue != ""`, and setting "" is no label), so the label is
// a_b="x".
func TestCollisionJoinsOnlyOntoAValue(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := addGaugePoint(md, nil, "queue.depth", 0, 5)
	dp.Attributes().PutStr("a.b", "")
	dp.Attributes().PutStr("a_b", "x")
	want := []string{`queue_depth{a_b="x"} => 5 @[1772359200]`}
	wantInstant(t, md, t0, "queue_depth", want)
}

// TestTargetInfoPerResource: for each resource with points and attributes
// besides service.namespace/name/instance.id, Prometheus writes a
// target_info gauge of 1 labelled with those other attributes, job and
// instance (helper.go addResourceTargetInfo; on by default:
// DisableTargetInfo is false in write_otlp_handler.go), with the metadata
// gauge "Target metadata". It is what Grafana joins resource attributes
// from. Served per resource, with a sample at each time of its points
// (targetInfoSQL), listed among the metric names and in the metadata.
func TestTargetInfoPerResource(t *testing.T) {
	md := pmetric.NewMetrics()
	ms := resource(md, "checkout")
	addGauge(ms)
	want := []string{`target_info{host_name="h1", instance="i-1", job="shop/checkout"} => 1 @[1772359800]`}
	wantInstant(t, md, end, "target_info", want)
	c := clientOf(t, md)
	ctx := context.Background()
	vals, _, _, err := c.LabelValues(ctx, model.MetricNameLabel, nil, t0.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(vals, targetInfoName) {
		t.Errorf("__name__ values %v lack target_info", vals)
	}
	meta, err := c.Metadata(ctx, targetInfoName, "")
	if err != nil {
		t.Fatal(err)
	}
	if m := meta[targetInfoName]; len(m) != 1 || m[0].Type != "gauge" || m[0].Help != "Target metadata" {
		t.Errorf("target_info metadata %+v", m)
	}
}

// TestHistogramWithoutSumHasNoSumSeries: a histogram point without a sum makes no
// _sum series in Prometheus (helper.go addHistogramDataPoints: "If the
// sum is unset, it indicates the _sum metric point should be omitted"),
// so the series and label values endpoints (web/api/v1/api.go series,
// labelValues, over the stored series) list none. The families query and
// the series listing say whether a point has a sum.
func TestHistogramWithoutSumHasNoSumSeries(t *testing.T) {
	md := pmetric.NewMetrics()
	ms := resource(md, "checkout")
	h := newMetric(ms, "job.duration", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(0))
	dp.ExplicitBounds().FromRaw([]float64{1})
	dp.BucketCounts().FromRaw([]uint64{1, 1})
	dp.SetCount(2)      // no sum
	var stored []string // Prometheus's series, as name{le=...}
	for _, s := range prometheusStores(t, md, ts(0).AsTime(), "job_duration") {
		name, rest, _ := strings.Cut(s, "{")
		le := ""
		if _, v, ok := strings.Cut(rest, `le="`); ok {
			le, _, _ = strings.Cut(v, `"`)
		}
		stored = append(stored, name+"{le="+le+"}")
	}
	slices.Sort(stored)
	c := clientOf(t, md)
	ctx := context.Background()
	series, _, _, err := c.Series(ctx, []string{`{__name__=~"job_duration.*"}`}, t0.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range series {
		names = append(names, string(s[model.MetricNameLabel])+"{le="+string(s["le"])+"}")
	}
	slices.Sort(names)
	if want := []string{"job_duration_seconds_bucket{le=+Inf}", "job_duration_seconds_bucket{le=1}", "job_duration_seconds_count{le=}"}; !slices.Equal(stored, want) {
		t.Fatalf("BAD TEST: Prometheus's converter stores %v", stored)
	} else if !slices.Equal(names, want) {
		t.Errorf("series: %v, want %v", names, want)
	}
	vals, _, _, err := c.LabelValues(ctx, model.MetricNameLabel, []string{`{__name__=~"job_duration.*"}`}, t0.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vals {
		got = append(got, string(v))
	}
	if want := []string{"job_duration_seconds_bucket", "job_duration_seconds_count"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("__name__ values: %v, want %v", got, want)
	}
}

// prometheusStores is what Prometheus's own OTLP receiver stores of md
// (prometheusremotewrite.PrometheusConverter.FromMetrics, with the
// settings write_otlp_handler.go ConsumeMetrics makes of
// config.DefaultOTLPConfig plus promote_all_resource_attributes and
// promote_scope_metadata, which seriesLabels says it follows): the
// samples at time at, as model.Sample strings, sorted; the tests' oracle.
func prometheusStores(t *testing.T, md pmetric.Metrics, at time.Time, name string) []string {
	t.Helper()
	cfg := config.DefaultOTLPConfig
	cfg.PromoteAllResourceAttributes = true
	cfg.PromoteScopeMetadata = true
	app := &oracleAppender{}
	conv := prometheusremotewrite.NewPrometheusConverter(app)
	if _, err := conv.FromMetrics(context.Background(), md, prometheusremotewrite.Settings{
		AddMetricSuffixes:                    cfg.TranslationStrategy.ShouldAddSuffixes(),
		AllowUTF8:                            !cfg.TranslationStrategy.ShouldEscape(),
		PromoteResourceAttributes:            prometheusremotewrite.NewPromoteResourceAttributes(cfg),
		PromoteScopeMetadata:                 cfg.PromoteScopeMetadata,
		LookbackDelta:                        5 * time.Minute,
		LabelNameUnderscoreSanitization:      cfg.LabelNameUnderscoreSanitization,
		LabelNamePreserveMultipleUnderscores: cfg.LabelNamePreserveMultipleUnderscores,
	}); err != nil {
		// A metric refused (the others are stored): logged.
		t.Logf("Prometheus's converter: %v", err)
	}
	var out []string
	for _, s := range app.samples {
		if s.T != at.UnixMilli() || !strings.HasPrefix(s.lset.Get(model.MetricNameLabel), name) {
			continue
		}
		m := model.Metric{}
		s.lset.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
		out = append(out, (&model.Sample{Metric: m, Value: model.SampleValue(s.F), Timestamp: model.Time(s.T)}).String())
	}
	slices.Sort(out)
	return out
}

type oracleSample struct {
	lset labels.Labels
	T    int64
	F    float64
}

type oracleAppender struct{ samples []oracleSample }

func (a *oracleAppender) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, _ *histogram.Histogram, _ *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	a.samples = append(a.samples, oracleSample{ls, t, v})
	return 1, nil
}
func (a *oracleAppender) Commit() error   { return nil }
func (a *oracleAppender) Rollback() error { return nil }

// checkOracle fails the test when Prometheus's converter does not store
// want: the test's expectation would be wrong, not the package.
func checkOracle(t *testing.T, md pmetric.Metrics, at time.Time, name string, want []string) {
	t.Helper()
	if got := prometheusStores(t, md, at, name); !slices.Equal(got, want) {
		t.Fatalf("BAD TEST: Prometheus's converter stores %v\nthe test expects %v", got, want)
	}
}

// TestEmptyServiceAttributesKeepPointLabels: Prometheus sets job and
// instance only when they are not empty (metrics_to_prw.go
// setResourceContext caches service.name and service.instance.id;
// helper.go createAttributes: `if c.resourceLabels.jobLabel != ""`,
// `if c.resourceLabels.instanceLabel != ""`), so a resource whose
// service.name and service.instance.id are "" leaves the point's own job
// and instance attributes as they are. seriesLabels sets job and
// instance only when not empty.
func TestEmptyServiceAttributesKeepPointLabels(t *testing.T) {
	md := pmetric.NewMetrics()
	dp := addGaugePoint(md, [][2]string{{"service.name", ""}, {"service.instance.id", ""}}, "queue.depth", 0, 5)
	dp.Attributes().PutStr("job", "batch")
	dp.Attributes().PutStr("instance", "p-1")
	want := []string{`queue_depth{instance="p-1", job="batch"} => 5 @[1772359200]`}
	wantInstant(t, md, t0, "queue_depth", want)
}

// TestServiceNameMatcherOnPromotedAttribute: a resource holding
// service.name=a then service_name=b has the label service_name="b" in
// Prometheus (promoted resource attributes set in the resource's order,
// the last winning: metrics_to_prw.go addPromotedAttributes), so
// queue_depth{service_name="b"} finds the series. seriesSQL's
// service_name pushdown reads the rows whose resource attributes hold
// another key escaping to service_name (service-name, service"name,
// serviceéname...) whatever their service_name column says.
func TestServiceNameMatcherOnPromotedAttribute(t *testing.T) {
	for _, key := range []string{"service_name", "service-name", "service\"name", "service\u00e9name"} {
		md := pmetric.NewMetrics()
		addGaugePoint(md, [][2]string{{"service.name", "a"}, {key, "b"}}, "queue.depth", 0, 5)
		want := []string{`queue_depth{job="a", service_name="b"} => 5 @[1772359200]`}
		checkOracle(t, md, t0, "queue_depth", want)
		got := instantSamples(t, md, `queue_depth{service_name="b"}`, t0)
		if !slices.Equal(got, want) {
			t.Fatalf("%q: got %v\nwant %v", key, got, want)
		}
	}
}

// TestSummaryWithoutQuantilesHasNoBaseSeries: a summary point without quantiles
// makes only _sum and _count series in Prometheus (helper.go
// addSummaryDataPoints appends one series per quantile), so the values
// of __name__ (web/api/v1/api.go labelValues, over the stored series)
// do not hold the family's bare name. The families query says whether
// a point has quantiles.
func TestSummaryWithoutQuantilesHasNoBaseSeries(t *testing.T) {
	md := pmetric.NewMetrics()
	ms := resource(md, "checkout")
	dp := newMetric(ms, "rpc.wait", "").SetEmptySummary().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(0))
	dp.SetCount(2)
	dp.SetSum(3)
	var stored []string
	for _, s := range prometheusStores(t, md, ts(0).AsTime(), "rpc_wait") {
		name, _, _ := strings.Cut(s, "{")
		stored = append(stored, name)
	}
	slices.Sort(stored)
	want := []string{"rpc_wait_count", "rpc_wait_sum"}
	if !slices.Equal(stored, want) {
		t.Fatalf("BAD TEST: Prometheus's converter stores %v", stored)
	}
	vals, _, _, err := clientOf(t, md).LabelValues(context.Background(), model.MetricNameLabel, []string{`{__name__=~"rpc_wait.*"}`}, t0.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vals {
		got = append(got, string(v))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("__name__ values: %v, want %v", got, want)
	}
}

// TestUnspecifiedTemporalityRefused: Prometheus's OTLP receiver
// stores a sum or histogram only of cumulative temporality (or delta,
// when allowed); any other, AGGREGATION_TEMPORALITY_UNSPECIFIED
// included, is refused: "invalid temporality and type combination"
// (metrics_to_prw.go FromMetrics). servedWhere serves sums and
// histograms only of cumulative temporality.
func TestUnspecifiedTemporalityRefused(t *testing.T) {
	md := pmetric.NewMetrics()
	ms := resource(md, "checkout")
	s := newMetric(ms, "jobs.done", "").SetEmptySum()
	s.SetIsMonotonic(true) // temporality left unspecified
	dp := s.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(0))
	dp.SetIntValue(3)
	h := newMetric(ms, "jobs.wait", "s").SetEmptyHistogram()
	hp := h.DataPoints().AppendEmpty()
	hp.SetTimestamp(ts(0))
	hp.SetCount(1)
	hp.SetSum(1)
	checkOracle(t, md, t0, "jobs", nil)
	if got := instantSamples(t, md, `{__name__=~"jobs.*"}`, t0); len(got) != 0 {
		t.Fatalf("got %v, want nothing (refused by Prometheus)", got)
	}
}

// TestUnderscoreOnlyAttributeLeftOut: an attribute whose name is
// underscores alone makes no label name (otlptranslator label_namer.go
// Build errs). Prometheus then refuses the point and the rest of its
// metric (helper.go createAttributes returns the error;
// number_data_points.go addGaugeNumberDataPoints returns it), and a
// resource attribute's error skips the whole resource (metrics_to_prw.go
// setResourceContext). We serve the point without that attribute, on
// purpose: the rows are stored already, and one odd attribute name from
// one SDK should not hide a whole metric, or every metric of a resource,
// from Grafana (README, Prometheus API). The converter's refusal is
// checked, so that this difference stays known.
func TestUnderscoreOnlyAttributeLeftOut(t *testing.T) {
	md := pmetric.NewMetrics()
	addGaugePoint(md, nil, "queue.depth", 0, 5).Attributes().PutStr("__", "x")
	addGaugePoint(md, [][2]string{{"___", "y"}}, "queue.size", 0, 6)
	checkOracle(t, md, t0, "queue", nil)
	want := []string{`queue_depth => 5 @[1772359200]`, `queue_size => 6 @[1772359200]`}
	if got := instantSamples(t, md, `{__name__=~"queue.*"}`, t0); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// wantInstant checks want against Prometheus's own conversion of md
// (checkOracle), then against what this API answers for name at at.
func wantInstant(t *testing.T, md pmetric.Metrics, at time.Time, name string, want []string) {
	t.Helper()
	checkOracle(t, md, at, name, want)
	if got := instantSamples(t, md, name, at); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}
