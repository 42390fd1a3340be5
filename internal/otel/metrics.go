package otel

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// appendMetrics writes one row of Metrics per data point; it returns the
// rows and the longest line.
func appendMetrics(w *row, md pmetric.Metrics, src source, frags *fragments) (rows, longest int) {
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		rm := rms.At(i)
		resMark := frags.mark()
		res := rm.Resource().Attributes()
		service := serviceName(res)
		resJSON, rowHead := frags.attributes(res), frags.head(src.tenant, service)
		sms := rm.ScopeMetrics()
		for j := range sms.Len() {
			sm := sms.At(j)
			// Written at the scope's first point: a scope of no point
			// (of no metric, or metrics of none) copies no fragment
			// (fragments.drop).
			scopeMark := frags.mark()
			var scope []byte
			ms := sm.Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				// point writes one data point's row: the columns every
				// type shares around the type's own (fill).
				point := func(start, ts pcommon.Timestamp, attrs pcommon.Map, exemplars pmetric.ExemplarSlice, flags pmetric.DataPointFlags, fill func()) {
					if w.full() {
						return // the message is refused (AppendRows)
					}
					if scope == nil {
						scope = frags.scope(resJSON, sm.Scope())
					}
					begin := len(w.b)
					w.beginWith(rowHead)
					w.str("metric_name", m.Name())
					w.str("metric_description", m.Description())
					w.str("metric_unit", m.Unit())
					w.str("metric_type", metricType(m.Type()))
					w.time("time", ts)
					w.time("start_time", start)
					fill()
					w.key("exemplars")
					w.b = appendExemplars(w.b, exemplars)
					w.int("flags", int64(flags))
					w.fragment(scope)
					w.attrs("attributes", attrs)
					w.coordinates(src, rows)
					w.end()
					rows++
					longest = max(longest, len(w.b)-begin)
				}
				switch m.Type() {
				case pmetric.MetricTypeGauge, pmetric.MetricTypeSum:
					var dps pmetric.NumberDataPointSlice
					if m.Type() == pmetric.MetricTypeSum {
						dps = m.Sum().DataPoints()
					} else {
						dps = m.Gauge().DataPoints()
					}
					for p := range dps.Len() {
						dp := dps.At(p)
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Attributes(), dp.Exemplars(), dp.Flags(), func() {
							if m.Type() == pmetric.MetricTypeSum {
								w.str("temporality", temporality(m.Sum().AggregationTemporality()))
								w.key("is_monotonic")
								w.b = strconv.AppendBool(w.b, m.Sum().IsMonotonic())
							}
							if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
								w.float("value", float64(dp.IntValue()))
								w.int("value_int", dp.IntValue())
							} else {
								w.float("value", dp.DoubleValue())
							}
						})
					}
				case pmetric.MetricTypeHistogram:
					h := m.Histogram()
					dps := h.DataPoints()
					for p := range dps.Len() {
						dp := dps.At(p)
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Attributes(), dp.Exemplars(), dp.Flags(), func() {
							w.distribution(h.AggregationTemporality(), dp)
							w.key("bucket_counts")
							w.b = appendUints(w.b, dp.BucketCounts())
							w.key("explicit_bounds")
							w.b = appendFloats(w.b, dp.ExplicitBounds())
						})
					}
				case pmetric.MetricTypeExponentialHistogram:
					h := m.ExponentialHistogram()
					dps := h.DataPoints()
					for p := range dps.Len() {
						dp := dps.At(p)
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Attributes(), dp.Exemplars(), dp.Flags(), func() {
							w.distribution(h.AggregationTemporality(), dp)
							w.int("scale", int64(dp.Scale()))
							w.uint("zero_count", dp.ZeroCount())
							w.float("zero_threshold", dp.ZeroThreshold())
							w.key("positive")
							w.b = appendBuckets(w.b, dp.Positive())
							w.key("negative")
							w.b = appendBuckets(w.b, dp.Negative())
						})
					}
				case pmetric.MetricTypeSummary:
					dps := m.Summary().DataPoints()
					for p := range dps.Len() {
						dp := dps.At(p)
						point(dp.StartTimestamp(), dp.Timestamp(), dp.Attributes(), pmetric.NewExemplarSlice(), dp.Flags(), func() {
							w.uint("count", dp.Count())
							w.float("sum", dp.Sum())
							w.key("quantiles")
							w.b = appendQuantiles(w.b, dp.QuantileValues())
						})
					}
				}
			}
			frags.drop(scopeMark)
		}
		frags.drop(resMark)
	}
	return rows, longest
}

func metricType(t pmetric.MetricType) string {
	switch t {
	case pmetric.MetricTypeGauge:
		return "gauge"
	case pmetric.MetricTypeSum:
		return "sum"
	case pmetric.MetricTypeHistogram:
		return "histogram"
	case pmetric.MetricTypeExponentialHistogram:
		return "exponential_histogram"
	case pmetric.MetricTypeSummary:
		return "summary"
	default:
		return "empty"
	}
}

func temporality(t pmetric.AggregationTemporality) string {
	switch t {
	case pmetric.AggregationTemporalityCumulative:
		return "cumulative"
	case pmetric.AggregationTemporalityDelta:
		return "delta"
	default:
		return "unspecified"
	}
}

// distribution is what both kinds of histogram point share: a pdata
// HistogramDataPoint or ExponentialHistogramDataPoint.
type distribution interface {
	Count() uint64
	Sum() float64
	HasSum() bool
	Min() float64
	HasMin() bool
	Max() float64
	HasMax() bool
}

// distribution writes a histogram point's temporality, count, sum, min
// and max (null when the point has none).
func (w *row) distribution(t pmetric.AggregationTemporality, dp distribution) {
	w.str("temporality", temporality(t))
	w.uint("count", dp.Count())
	w.optFloat("sum", dp.Sum(), dp.HasSum())
	w.optFloat("min", dp.Min(), dp.HasMin())
	w.optFloat("max", dp.Max(), dp.HasMax())
}

func (w *row) float(name string, f float64) { w.key(name); w.b = appendDouble(w.b, f) }

// optFloat writes f, or null when the point does not have it.
func (w *row) optFloat(name string, f float64, ok bool) {
	if !ok {
		w.key(name)
		w.b = append(w.b, "null"...)
		return
	}
	w.float(name, f)
}

// uint writes a count; counts past int64 (never seen in practice) are
// capped so the BIGINT column takes them.
func (w *row) uint(name string, v uint64) { w.int(name, int64(min(v, math.MaxInt64))) }

func appendUints(dst []byte, s pcommon.UInt64Slice) []byte {
	dst = append(dst, '[')
	for i := range s.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, s.At(i), 10)
	}
	return append(dst, ']')
}

func appendFloats(dst []byte, s pcommon.Float64Slice) []byte {
	dst = append(dst, '[')
	for i := range s.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendDouble(dst, s.At(i))
	}
	return append(dst, ']')
}

// appendBuckets writes exponential histogram buckets as
// {offset, bucket_counts}.
func appendBuckets(dst []byte, b pmetric.ExponentialHistogramDataPointBuckets) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, int64(b.Offset()), 10)
	dst = append(dst, `,"bucket_counts":`...)
	dst = appendUints(dst, b.BucketCounts())
	return append(dst, '}')
}

// appendQuantiles writes summary quantiles as [{quantile, value}].
func appendQuantiles(dst []byte, qs pmetric.SummaryDataPointValueAtQuantileSlice) []byte {
	dst = append(dst, '[')
	for i := range qs.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"quantile":`...)
		dst = appendDouble(dst, qs.At(i).Quantile())
		dst = append(dst, `,"value":`...)
		dst = appendDouble(dst, qs.At(i).Value())
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendExemplars writes exemplars as [{time, value, trace_id, span_id,
// filtered_attributes}], an int value exact.
func appendExemplars(dst []byte, es pmetric.ExemplarSlice) []byte {
	dst = append(dst, '[')
	for i := range es.Len() {
		e := es.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		w := row{b: dst}
		w.begin()
		w.key("time")
		w.b = appendTime(w.b, e.Timestamp())
		if e.ValueType() == pmetric.ExemplarValueTypeInt {
			w.int("value", e.IntValue())
		} else {
			w.float("value", e.DoubleValue())
		}
		tid, sid := e.TraceID(), e.SpanID()
		w.id("trace_id", tid[:])
		w.id("span_id", sid[:])
		w.attrs("filtered_attributes", e.FilteredAttributes())
		dst = append(w.b, '}')
	}
	return append(dst, ']')
}
