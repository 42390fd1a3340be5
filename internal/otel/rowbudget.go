package otel

import (
	"fmt"
	"math"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Bounds of the bytes of rows that rowsBound does not measure: a row's
// own fields' names and fixed-size values (ids, times, counts, enums),
// each element of a span's events and links or a point's exemplars and
// quantiles (its field names and fixed-size values, written for an
// element that takes two bytes in protobuf), and the JSON text of a
// protobuf byte of a value (a control character is six: \u0001; a
// number, a base64 digit or a field name of an attribute, fewer).
// Generous on purpose: past the bound, the rows are measured.
const (
	rowFixedBytes     = 2048
	elementFixedBytes = 256
	textPerProtoByte  = 8
)

// RowsOver reports whether the rows of data, an export request's
// ptrace.Traces, plog.Logs or pmetric.Metrics taking protoBytes in
// protobuf, forwarded to topic under tenant, take more than limit bytes:
// the loaders of that topic, whose decoder (WithMaxRowBytes, limit being
// their max_inflight_bytes) measures the same rows, dead-letter it whole.
// Each row repeats its resource's and scope's attributes (and a point
// its metric's name, description and unit), so a small request can
// decode to any multiple of its size. The rows are measured with the
// largest coordinates (partition and offset unknown before the brokers
// answer), one row at a time, only when a bound taken from the shared
// fragments and the request's size passes limit: everyday requests are
// far below it and cost no second decode.
func RowsOver(data any, protoBytes int, topic, tenant string, limit int) (bool, error) {
	src := source{topic: topic, partition: math.MaxInt32, offset: math.MaxInt64, tenant: tenant}
	frags := newFragments()
	defer frags.release()
	src.coordinates = frags.coordinates(src)
	bound, err := rowsBound(data, protoBytes, src, frags)
	if err != nil || bound <= limit {
		return false, err
	}
	w := row{limit: limit, measuring: true}
	measureRows(&w, data, src, frags)
	return w.full(), nil
}

// measureRows writes the rows of data (RowsOver's) into w.
func measureRows(w *row, data any, src source, frags *fragments) {
	switch d := data.(type) {
	case ptrace.Traces:
		appendSpans(w, d, src, frags, &operations{})
	case plog.Logs:
		appendLogs(w, d, src, frags)
	case pmetric.Metrics:
		appendMetrics(w, d, src, frags)
	}
}

// rowsBound is at least the bytes of the rows of data (RowsOver's),
// taking protoBytes in protobuf, from src: the fragments its rows share,
// written once each, times their rows, and bounds of the rest.
func rowsBound(data any, protoBytes int, src source, frags *fragments) (int, error) {
	perRow := rowFixedBytes + len(src.coordinates) + len("2147483647") // and the row's index
	bound := textPerProtoByte * protoBytes
	switch d := data.(type) {
	case ptrace.Traces:
		for _, rs := range d.ResourceSpans().All() {
			mark := frags.mark()
			res := rs.Resource().Attributes()
			resJSON, head := frags.attributes(res), frags.head(src.tenant, serviceName(res))
			for _, ss := range rs.ScopeSpans().All() {
				shared := len(head) + frags.scopeLen(resJSON, ss.Scope()) + perRow
				for _, s := range ss.Spans().All() {
					bound += shared + elementFixedBytes*(s.Events().Len()+s.Links().Len())
				}
			}
			frags.drop(mark)
		}
	case plog.Logs:
		for _, rl := range d.ResourceLogs().All() {
			mark := frags.mark()
			res := rl.Resource().Attributes()
			resJSON, head := frags.attributes(res), frags.head(src.tenant, serviceName(res))
			for _, sl := range rl.ScopeLogs().All() {
				bound += sl.LogRecords().Len() * (len(head) + frags.scopeLen(resJSON, sl.Scope()) + perRow)
			}
			frags.drop(mark)
		}
	case pmetric.Metrics:
		for _, rm := range d.ResourceMetrics().All() {
			mark := frags.mark()
			res := rm.Resource().Attributes()
			resJSON, head := frags.attributes(res), frags.head(src.tenant, serviceName(res))
			for _, sm := range rm.ScopeMetrics().All() {
				shared := len(head) + frags.scopeLen(resJSON, sm.Scope()) + perRow
				for _, m := range sm.Metrics().All() {
					// Each point's row repeats its metric's texts.
					metric := shared + textPerProtoByte*(len(m.Name())+len(m.Description())+len(m.Unit()))
					bound += metricPointsBound(m, metric)
				}
			}
			frags.drop(mark)
		}
	default:
		return 0, fmt.Errorf("BUG: rows of a %T", data)
	}
	return bound, nil
}

// metricPointsBound is the bound of the rows of m's points beyond the
// text of their own values: perPoint each, and each exemplar's and
// quantile's fixed bytes.
func metricPointsBound(m pmetric.Metric, perPoint int) int {
	n := 0
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		for _, dp := range m.Gauge().DataPoints().All() {
			n += perPoint + elementFixedBytes*dp.Exemplars().Len()
		}
	case pmetric.MetricTypeSum:
		for _, dp := range m.Sum().DataPoints().All() {
			n += perPoint + elementFixedBytes*dp.Exemplars().Len()
		}
	case pmetric.MetricTypeHistogram:
		for _, dp := range m.Histogram().DataPoints().All() {
			n += perPoint + elementFixedBytes*dp.Exemplars().Len()
		}
	case pmetric.MetricTypeExponentialHistogram:
		for _, dp := range m.ExponentialHistogram().DataPoints().All() {
			n += perPoint + elementFixedBytes*dp.Exemplars().Len()
		}
	case pmetric.MetricTypeSummary:
		for _, dp := range m.Summary().DataPoints().All() {
			n += perPoint + elementFixedBytes*dp.QuantileValues().Len()
		}
	}
	return n
}
