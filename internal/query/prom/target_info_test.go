package prom

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestTargetInfoListedWhenOnlyDeltaSums: Prometheus's OTLP receiver
// writes target_info for every resource with any metric point, refused
// ones included (metrics_to_prw.go FromMetrics: findMinAndMaxTimestamps
// runs before the temporality check, and addResourceTargetInfo is called
// when earliestTimestamp < MaxUint64). tracelake serves that series
// (targetInfoSQL reads every metric's rows), yet the metric names
// (/api/v1/label/__name__/values) and /api/v1/metadata list target_info
// only when some served family exists (`len(fams) > 0` in
// storage.go LabelValues and lookups.go metadata): a resource sending
// only delta sums has a target_info one can query but not find.
func TestTargetInfoListedWhenOnlyDeltaSums(t *testing.T) {
	md := pmetric.NewMetrics()
	addDeltaCounter(resource(md, "checkout")) // one point at ts(1)
	at := ts(1).AsTime()
	oracle := prometheusStores(t, md, at, targetInfoName)
	if len(oracle) != 1 {
		t.Fatalf("BAD TEST: Prometheus's converter stores %v", oracle)
	}
	if got := instantSamples(t, md, targetInfoName, at); !slices.Equal(got, oracle) {
		t.Fatalf("BAD TEST: target_info served %v, Prometheus stores %v", got, oracle)
	}
	c := clientOf(t, md)
	ctx := context.Background()
	vals, _, _, err := c.LabelValues(ctx, model.MetricNameLabel, nil, t0.Add(-time.Minute), end)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(vals, targetInfoName) {
		t.Errorf("__name__ values %v lack target_info, which the same API serves: %v", vals, oracle)
	}
	meta, err := c.Metadata(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := meta[targetInfoName]; !ok {
		t.Errorf("metadata %v lacks target_info", meta)
	}
}
