package prom

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"github.com/prometheus/prometheus/util/annotations"
	"go.opentelemetry.io/collector/pdata/pmetric"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// A differential oracle: the samples Prometheus's own OTLP receiver
// stores for md (prometheusremotewrite.PrometheusConverter, settings as
// prometheusStores makes them), held as its TSDB holds them (one sample
// per timestamp, the first appended: tsdb/head_append.go refuses a
// duplicate timestamp of another value), queried by the same PromQL
// engine as the API's. What the API answers for the same OTLP must be
// what this answers.

// oracleSeries are the series Prometheus stores of each request in mds
// (each one FromMetrics call: one OTLP export).
func oracleSeries(t *testing.T, mds ...pmetric.Metrics) []*floatSeries {
	t.Helper()
	cfg := config.DefaultOTLPConfig
	cfg.PromoteAllResourceAttributes = true
	cfg.PromoteScopeMetadata = true
	byLabels := map[string]*floatSeries{}
	for _, md := range mds {
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
			t.Logf("Prometheus's converter: %v", err)
		}
		for _, s := range app.samples {
			k := s.lset.String()
			fs, ok := byLabels[k]
			if !ok {
				fs = &floatSeries{lset: s.lset}
				byLabels[k] = fs
			}
			fs.merge(&floatSeries{lset: s.lset, pts: points{{T: s.T, F: s.F}}})
		}
	}
	var out []*floatSeries
	for _, s := range byLabels {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *floatSeries) int { return labels.Compare(a.lset, b.lset) })
	return out
}

// memQueryable serves series held in memory.
type memQueryable []*floatSeries

func (m memQueryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return memQuerier{m, mint, maxt}, nil
}

type memQuerier struct {
	series     memQueryable
	mint, maxt int64
}

func (q memQuerier) Select(_ context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	var out []*floatSeries
	for _, s := range q.series {
		if !matchesAll(ms, s.lset) {
			continue
		}
		c := &floatSeries{lset: s.lset}
		for _, p := range s.pts {
			if p.T >= mint && p.T <= maxt {
				c.pts = append(c.pts, p)
			}
		}
		if len(c.pts) > 0 {
			out = append(out, c)
		}
	}
	return newSeriesSet(out)
}

func (q memQuerier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}

func (q memQuerier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, nil
}
func (q memQuerier) Close() error { return nil }

// oracleEngine is the API's engine, as Register makes it.
func oracleEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{MaxSamples: defaultMaxSamples, Timeout: time.Minute,
		LookbackDelta: defaultLookback, EnableAtModifier: true, EnableNegativeOffset: true})
}

// oracleRange is what Prometheus answers q over [start, end] by step for
// the series stored, as model.SampleStream strings, sorted.
func oracleRange(t *testing.T, series []*floatSeries, q string, start, end time.Time, step time.Duration) []string {
	t.Helper()
	e := oracleEngine()
	qry, err := e.NewRangeQuery(context.Background(), memQueryable(series), nil, q, start, end, step)
	if err != nil {
		t.Fatal(err)
	}
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("oracle %s: %v", q, res.Err)
	}
	var out []string
	for _, s := range res.Value.(promql.Matrix) {
		out = append(out, streamString(s.Metric, s.Floats))
	}
	slices.Sort(out)
	return out
}

func streamString(lset labels.Labels, pts []promql.FPoint) string {
	var b strings.Builder
	b.WriteString(lset.String())
	for _, p := range pts {
		fmt.Fprintf(&b, " %d:%s", p.T, fmtF(p.F))
	}
	return b.String()
}

func fmtF(f float64) string {
	if math.IsNaN(f) {
		if value.IsStaleNaN(f) {
			return "StaleNaN"
		}
		return "NaN"
	}
	return fmt.Sprint(f)
}

// apiRange is what the API answers q over [start, end] by step, strings
// as oracleRange's.
func apiRange(t *testing.T, c v1.API, q string, start, end time.Time, step time.Duration) []string {
	t.Helper()
	v, _, _, err := c.QueryRange(context.Background(), q, v1.Range{Start: start, End: end, Step: step})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var out []string
	for _, s := range v.(model.Matrix) {
		b := labels.NewScratchBuilder(len(s.Metric))
		for k, v := range s.Metric {
			b.Add(string(k), string(v))
		}
		b.Sort()
		var pts []promql.FPoint
		for _, p := range s.Values {
			pts = append(pts, promql.FPoint{T: int64(p.Timestamp), F: float64(p.Value)})
		}
		out = append(out, streamString(b.Labels(), pts))
	}
	slices.Sort(out)
	return out
}

// diffRange loads each of mds as a request for team-a and checks that
// the API answers each query as Prometheus would over [start, end].
func diffRange(t *testing.T, mds []pmetric.Metrics, start, end time.Time, step time.Duration, queries ...string) {
	t.Helper()
	db := newTable(t)
	for _, md := range mds {
		load(t, db, "team-a", md)
	}
	c := serve(t, db).client(t, "ta", "")
	series := oracleSeries(t, mds...)
	for _, q := range queries {
		want := oracleRange(t, series, q, start, end, step)
		got := apiRange(t, c, q, start, end, step)
		if !slices.Equal(got, want) {
			var only, missing []string
			for _, g := range got {
				if !slices.Contains(want, g) {
					only = append(only, g)
				}
			}
			for _, w := range want {
				if !slices.Contains(got, w) {
					missing = append(missing, w)
				}
			}
			t.Errorf("%s:\n got only  %s\n want only %s", q, strings.Join(only, "\n      "), strings.Join(missing, "\n      "))
		}
	}
}

// oracleSeriesIn are the labels of the stored series matching ms with a
// sample in [start, end], as strings, sorted: what Prometheus's series
// endpoint answers (web/api/v1/api.go series).
func oracleSeriesIn(t *testing.T, series []*floatSeries, match string, start, end time.Time) []string {
	t.Helper()
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(match)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range series {
		if !matchesAll(ms, s.lset) {
			continue
		}
		if slices.ContainsFunc(s.pts, func(p promql.FPoint) bool {
			return p.T >= start.UnixMilli() && p.T <= end.UnixMilli()
		}) {
			out = append(out, s.lset.String())
		}
	}
	slices.Sort(out)
	return out
}

// apiSeriesIn is what the API's series endpoint answers, strings as
// oracleSeriesIn's.
func apiSeriesIn(t *testing.T, c v1.API, match string, start, end time.Time) []string {
	t.Helper()
	got, _, _, err := c.Series(context.Background(), []string{match}, start, end)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range got {
		b := labels.NewScratchBuilder(len(m))
		for k, v := range m {
			b.Add(string(k), string(v))
		}
		b.Sort()
		out = append(out, b.Labels().String())
	}
	slices.Sort(out)
	return out
}

// diffSeries loads mds as diffRange does and checks the series endpoint
// against the stored series for each match over [start, end].
func diffSeries(t *testing.T, mds []pmetric.Metrics, start, end time.Time, matches ...string) {
	t.Helper()
	db := newTable(t)
	for _, md := range mds {
		load(t, db, "team-a", md)
	}
	c := serve(t, db).client(t, "ta", "")
	series := oracleSeries(t, mds...)
	for _, m := range matches {
		want := oracleSeriesIn(t, series, m, start, end)
		got := apiSeriesIn(t, c, m, start, end)
		if !slices.Equal(got, want) {
			t.Errorf("series %s:\n got  %s\n want %s", m, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		}
	}
}
