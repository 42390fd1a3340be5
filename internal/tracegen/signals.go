package tracegen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// LogsOf returns the log records an agent writes along the spans of td,
// as an SDK's log bridge exports them: one record per span at its end,
// in the span's trace and span, INFO (ERROR for a failed span) with the
// span's operation and model as attributes, under the spans' resource.
func LogsOf(td ptrace.Traces) plog.Logs {
	ld := plog.NewLogs()
	for _, rs := range td.ResourceSpans().All() {
		rl := ld.ResourceLogs().AppendEmpty()
		rs.Resource().CopyTo(rl.Resource())
		for _, ss := range rs.ScopeSpans().All() {
			sl := rl.ScopeLogs().AppendEmpty()
			ss.Scope().CopyTo(sl.Scope())
			for _, s := range ss.Spans().All() {
				l := sl.LogRecords().AppendEmpty()
				l.SetTimestamp(s.EndTimestamp())
				l.SetObservedTimestamp(s.EndTimestamp())
				l.SetTraceID(s.TraceID())
				l.SetSpanID(s.SpanID())
				took := s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime())
				l.SetSeverityNumber(plog.SeverityNumberInfo)
				l.SetSeverityText("INFO")
				msg := fmt.Sprintf("%s finished in %dms", s.Name(), took.Milliseconds())
				if s.Status().Code() == ptrace.StatusCodeError {
					l.SetSeverityNumber(plog.SeverityNumberError)
					l.SetSeverityText("ERROR")
					msg = fmt.Sprintf("%s failed after %dms: %s", s.Name(), took.Milliseconds(), s.Status().Message())
				}
				l.Body().SetStr(msg)
				for _, k := range []string{"gen_ai.operation.name", "gen_ai.request.model", "gen_ai.tool.name"} {
					if v, ok := s.Attributes().Get(k); ok {
						v.CopyTo(l.Attributes().PutEmpty(k))
					}
				}
			}
		}
	}
	return ld
}

// Meter keeps an agent's metrics over the spans it is shown, as an SDK's
// meter does between exports: cumulative, from the first span's start.
type Meter struct {
	start, last pcommon.Timestamp
	exported    pcommon.Timestamp        // the last export's time
	tokens      map[[2]string]int64      // {model, token type} → tokens
	durations   map[string]*durationHist // operation → seconds
}

// durationBounds are the explicit bounds (seconds) of
// gen_ai.client.operation.duration, as the GenAI semantic conventions
// advise them.
var durationBounds = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

type durationHist struct {
	counts   []uint64
	count    uint64
	sum      float64
	min, max float64
}

// NewMeter returns a Meter that has seen no span.
func NewMeter() *Meter {
	return &Meter{tokens: map[[2]string]int64{}, durations: map[string]*durationHist{}}
}

// Record adds the spans of td and returns the meter's state as one
// export at the latest span end seen, a second after the previous export
// at least (each export is a new point of every series, as an SDK's
// periodic reader makes them): gen_ai.client.token.usage (a
// monotonic cumulative sum of tokens, by model and gen_ai.token.type) and
// gen_ai.client.operation.duration (a cumulative histogram in seconds, by
// operation).
func (m *Meter) Record(td ptrace.Traces) pmetric.Metrics {
	var resource pcommon.Resource
	for _, rs := range td.ResourceSpans().All() {
		resource = rs.Resource()
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				m.add(s)
			}
		}
	}
	m.exported = max(m.last, m.exported+pcommon.Timestamp(time.Second))
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	if td.ResourceSpans().Len() > 0 {
		resource.CopyTo(rm.Resource())
	}
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("tracelake.tracegen")

	usage := sm.Metrics().AppendEmpty()
	usage.SetName("gen_ai.client.token.usage")
	usage.SetUnit("{token}")
	usage.SetDescription("Tokens used by the model calls")
	sum := usage.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, k := range slices.SortedFunc(maps.Keys(m.tokens), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		p := sum.DataPoints().AppendEmpty()
		p.SetStartTimestamp(m.start)
		p.SetTimestamp(m.exported)
		p.SetIntValue(m.tokens[k])
		p.Attributes().PutStr("gen_ai.request.model", k[0])
		p.Attributes().PutStr("gen_ai.token.type", k[1])
	}

	dur := sm.Metrics().AppendEmpty()
	dur.SetName("gen_ai.client.operation.duration")
	dur.SetUnit("s")
	dur.SetDescription("Duration of the agent's operations")
	hist := dur.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, op := range slices.Sorted(maps.Keys(m.durations)) {
		h := m.durations[op]
		p := hist.DataPoints().AppendEmpty()
		p.SetStartTimestamp(m.start)
		p.SetTimestamp(m.exported)
		p.SetCount(h.count)
		p.SetSum(h.sum)
		p.SetMin(h.min)
		p.SetMax(h.max)
		p.ExplicitBounds().FromRaw(durationBounds)
		p.BucketCounts().FromRaw(h.counts)
		p.Attributes().PutStr("gen_ai.operation.name", op)
	}
	return md
}

func (m *Meter) add(s ptrace.Span) {
	if m.start == 0 || s.StartTimestamp() < m.start {
		m.start = s.StartTimestamp()
	}
	m.last = max(m.last, s.EndTimestamp())
	op := "unknown"
	if v, ok := s.Attributes().Get("gen_ai.operation.name"); ok {
		op = v.Str()
	}
	if model, ok := s.Attributes().Get("gen_ai.request.model"); ok {
		for attr, typ := range map[string]string{"gen_ai.usage.input_tokens": "input", "gen_ai.usage.output_tokens": "output"} {
			if v, ok := s.Attributes().Get(attr); ok {
				m.tokens[[2]string{model.Str(), typ}] += v.Int()
			}
		}
	}
	h := m.durations[op]
	if h == nil {
		h = &durationHist{counts: make([]uint64, len(durationBounds)+1)}
		m.durations[op] = h
	}
	secs := s.EndTimestamp().AsTime().Sub(s.StartTimestamp().AsTime()).Seconds()
	i, _ := slices.BinarySearch(durationBounds, secs) // bucket i holds (bounds[i-1], bounds[i]]
	h.counts[i]++
	if h.count == 0 || secs < h.min {
		h.min = secs
	}
	h.max = max(h.max, secs)
	h.count++
	h.sum += secs
}
