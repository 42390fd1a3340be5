package prom

import (
	"math"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Double attributes are labels as Prometheus's OTLP receiver writes them
// (pdata's AsString: -0.0 as -0, 2.0 as 2, 1e21 as 1e+21), on a
// point's series and on target_info; a double point's value is its
// sample. Checked against Prometheus's own converter.
func TestDoubleAttributesAreLabelsAsPrometheusWritesThem(t *testing.T) {
	md := pmetric.NewMetrics()
	ms := resource(md, "calc")
	res := md.ResourceMetrics().At(0).Resource().Attributes()
	res.PutDouble("cpu.neg", math.Copysign(0, -1))
	res.PutDouble("cpu.whole", 4)
	res.PutDouble("cpu.huge", 1e21)
	res.PutEmptySlice("cpu.list").FromRaw([]any{2.0, 3.0})
	g := newMetric(ms, "calc.ratio", "").SetEmptyGauge()
	dp := g.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts(1))
	dp.SetDoubleValue(2)
	dp.Attributes().PutDouble("offset", math.Copysign(0, -1))
	dp.Attributes().PutDouble("whole", 2)
	dp.Attributes().PutInt("count", 2)
	at := ts(1).AsTime()
	for _, name := range []string{"calc_ratio", targetInfoName} {
		oracle := prometheusStores(t, md, at, name)
		if len(oracle) != 1 {
			t.Fatalf("BAD TEST: Prometheus's converter stores %v", oracle)
		}
		if got := instantSamples(t, md, name, at); !slices.Equal(got, oracle) {
			t.Errorf("%s served\n %v\nPrometheus stores\n %v", name, got, oracle)
		}
	}
}
