package tempo

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// longTraceID is the trace of longTrace.
const longTraceID = "000000000000000000000000000000f2"

// longTrace is tenant a's trace of a root span starting at base and
// running three hours, and a child sent without a start (OTLP's 0) that
// ended with it: it may have started any time after the root did.
func longTrace() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "long")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	b := uint64(base.UnixNano())
	for _, sp := range []struct {
		id, parent string
		start, end uint64
	}{{"f200000000000001", "", b, b + 3*3600e9}, {"f200000000000002", "f200000000000001", 0, b + 3*3600e9}} {
		s := ss.AppendEmpty()
		s.SetTraceID(pcommon.TraceID(traceID(longTraceID)))
		s.SetSpanID(pcommon.SpanID(spanID(sp.id)))
		if sp.parent != "" {
			s.SetParentSpanID(pcommon.SpanID(spanID(sp.parent)))
		}
		s.SetName("span " + sp.id)
		s.SetStartTimestamp(pcommon.Timestamp(sp.start))
		s.SetEndTimestamp(pcommon.Timestamp(sp.end))
	}
	return td
}

// A span sent without a start whose end lies past the window's reach is
// a span of a trace running in the window all the same: its start, which
// nobody knows, may be anywhere before its end, within the starts read as
// well as not (here the root starts in the window and the child ends with
// it, three hours later). Asked for in a window, the trace is answered as
// without one, by id and by a search: the end bounds the span's start
// from above, not from below, so only an end before the starts read
// leaves it out.
func TestWindowKeepsASpanWithoutAStartEndingPastTheReach(t *testing.T) {
	f := newFixtureOf(t, map[string][]ptrace.Traces{"a": {longTrace()}}, maxTraceSpans)
	s := base.Unix()
	if n := f.spanCount("/api/v2/traces/" + longTraceID); n != 2 {
		t.Fatalf("trace %s without a window: %d spans, want 2", longTraceID, n)
	}
	path := fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", longTraceID, s-10, s+10)
	if n := f.spanCount(path); n != 2 {
		t.Errorf("%s: %d spans, want the whole trace's 2", path, n)
	}
	whole := matchedSpans(f.search("a", url.Values{"q": {"{}"}, "spss": {"10"}}))
	if len(whole) != 1 {
		t.Fatalf("search without a window: %q, want the trace", whole)
	}
	params := url.Values{"q": {"{}"}, "spss": {"10"}, "start": {fmt.Sprint(s - 10)}, "end": {fmt.Sprint(s + 10)}}
	if got := matchedSpans(f.search("a", params)); !slices.Equal(got, whole) {
		t.Errorf("search %v: %q, want the trace's spans as without a window %q", params, got, whole)
	}
}
