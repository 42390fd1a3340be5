package prom

import (
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestAttributeValuesOfEveryTypeAsPrometheusLabelsThem: point, resource
// and scope attributes of every AnyValue type (doubles whole, huge, tiny
// and not finite, bools, bytes, maps and arrays, nested, empty, int64's
// end) label their series as Prometheus's OTLP receiver labels them
// (pdata's AsString), and -Inf, 2^53+1 and 0 values are answered as it
// stores them: the table keeps each value's type (appendValue) and
// seriesLabels reads it back (otel.AttributesFromJSON).
func TestAttributeValuesOfEveryTypeAsPrometheusLabelsThem(t *testing.T) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	rm.Resource().Attributes().PutDouble("res.d", 2.5)
	rm.Resource().Attributes().PutBool("res.b", true)
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("sc")
	sm.Scope().Attributes().PutDouble("sd", 3)
	m := sm.Metrics().AppendEmpty()
	m.SetName("g")
	dps := m.SetEmptyGauge().DataPoints()
	add := func(f func(dp pmetric.NumberDataPoint)) {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(ts(dps.Len()))
		dp.SetDoubleValue(float64(dps.Len()))
		f(dp)
	}
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutDouble("k", 2.0) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutDouble("k", math.Inf(1)) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutDouble("k", math.Inf(-1)) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutDouble("k", math.NaN()) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutDouble("k", 1e21) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutDouble("k", 1e-7) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutEmptyBytes("k").FromRaw([]byte{1, 2, 3}) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutEmptyMap("k").PutDouble("x", 1.5) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutEmptySlice("k").AppendEmpty().SetInt(1 << 60) })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutEmpty("k") })
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutBool("k", false) })
	add(func(dp pmetric.NumberDataPoint) {
		dp.Attributes().PutEmptyMap("k").PutEmptySlice("y").AppendEmpty().SetDouble(2)
	})
	add(func(dp pmetric.NumberDataPoint) { dp.Attributes().PutInt("k", math.MaxInt64) })
	add(func(dp pmetric.NumberDataPoint) {
		dp.Attributes().PutEmptySlice("k").AppendEmpty().SetEmptyBytes().FromRaw([]byte{9})
	})
	add(func(dp pmetric.NumberDataPoint) { dp.SetDoubleValue(math.Inf(-1)) })
	add(func(dp pmetric.NumberDataPoint) { dp.SetIntValue(1<<53 + 1) })
	add(func(dp pmetric.NumberDataPoint) { dp.SetDoubleValue(0) })
	diffRange(t, []pmetric.Metrics{md}, t0, t0.Add(10*time.Minute), 15*time.Second, `{__name__=~".+", __name__!="target_info"}`)
}
