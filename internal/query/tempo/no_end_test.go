package tempo

import (
	"net/url"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A trace with a span sent without an end (OTLP's 0: no duration) lasts
// from its first start to its last end: the span's end was int64's end
// (DuckDB's least skipping the NULL end), and { traceDuration <= 2s }
// missed a trace of two seconds, { traceDuration > 1h } found it.
func TestTraceDurationWithASpanWithoutAnEnd(t *testing.T) {
	const trace = "000000000000000000000000000000f2"
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "no-end")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	b := uint64(base.UnixNano())
	for i, se := range [][2]uint64{{b, b + 2e9}, {b + 1e9, 0}} {
		sp := ss.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(traceID(trace)))
		sp.SetSpanID(pcommon.SpanID(spanID("f20000000000000" + string(rune('1'+i)))))
		if i > 0 {
			sp.SetParentSpanID(pcommon.SpanID(spanID("f200000000000001")))
		}
		sp.SetName("no-end span")
		sp.SetStartTimestamp(pcommon.Timestamp(se[0]))
		sp.SetEndTimestamp(pcommon.Timestamp(se[1]))
	}
	f := newFixtureOf(t, map[string][]ptrace.Traces{"a": {td}}, maxTraceSpans)
	for q, want := range map[string][]string{
		"{ traceDuration <= 2s }": {trimID(trace) + ": no-end span,no-end span (2)"},
		"{ traceDuration > 1h }":  nil,
	} {
		if got := matchedSpans(f.search("a", url.Values{"q": {q}, "spss": {"10"}})); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}
