package prom

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestBoundsWithoutBucketCountsMakeNoSeries: Prometheus's OTLP receiver
// makes a bucket series of a bound only when the point has its count
// (prometheusremotewrite/helper.go addHistogramDataPoints: `i <
// ExplicitBounds().Len() && i < BucketCounts().Len()`), so a point of
// fewer bucket counts than bounds (or none, a count and sum alone, as a
// sender that keeps its bounds configured may send) has no series of the
// bounds left over: the series and le's label values endpoints list
// none, as the query answers none.
func TestBoundsWithoutBucketCountsMakeNoSeries(t *testing.T) {
	md := pmetric.NewMetrics()
	h := newMetric(resource(md, "checkout"), "job.duration", "s").SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i, counts := range [][]uint64{{1, 2}, nil} {
		dp := h.DataPoints().AppendEmpty()
		dp.Attributes().PutInt("shard", int64(i))
		dp.SetTimestamp(ts(0))
		dp.ExplicitBounds().FromRaw([]float64{1, 2, 3})
		dp.BucketCounts().FromRaw(counts)
		dp.SetCount(4)
		dp.SetSum(5)
	}
	const match = `{__name__=~"job_duration.*"}`
	diffSeries(t, []pmetric.Metrics{md}, t0.Add(-time.Minute), end, match)
	diffRange(t, []pmetric.Metrics{md}, t0, t0.Add(time.Minute), 15*time.Second, match)
	vals, _, _, err := clientOf(t, md).LabelValues(context.Background(), "le", []string{match}, t0.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vals {
		got = append(got, string(v))
	}
	if want := []string{"+Inf", "1", "2"}; !slices.Equal(got, want) {
		t.Errorf("le values %q, want %q (Prometheus holds no le=\"3\" series)", got, want)
	}
}
