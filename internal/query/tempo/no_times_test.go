package tempo

import (
	"fmt"
	"net/url"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A span sent without a start or an end (both OTLP's 0: NULL start_time
// and end_time) is a span of its trace all the same: the trace asked for
// in a window it runs in is answered as without a window, by id and by a
// search, with that span too, as it was when such spans were read by
// trace id alone. Read by their end, they were in no window.
func TestWindowKeepsASpanWithoutAStartOrAnEnd(t *testing.T) {
	td := longTrace()
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID(traceID(longTraceID)))
	sp.SetSpanID(pcommon.SpanID(spanID("f200000000000003")))
	sp.SetParentSpanID(pcommon.SpanID(spanID("f200000000000001")))
	sp.SetName("span f200000000000003")
	f := newFixtureOf(t, map[string][]ptrace.Traces{"a": {td}}, maxTraceSpans)
	s := base.Unix()
	if n := f.spanCount("/api/v2/traces/" + longTraceID); n != 3 {
		t.Fatalf("trace %s without a window: %d spans, want 3", longTraceID, n)
	}
	path := fmt.Sprintf("/api/v2/traces/%s?start=%d&end=%d", longTraceID, s-10, s+10)
	if n := f.spanCount(path); n != 3 {
		t.Errorf("%s: %d spans, want the whole trace's 3", path, n)
	}
	whole := matchedSpans(f.search("a", url.Values{"q": {"{}"}, "spss": {"10"}}))
	if want := []string{trimID(longTraceID) + ": span f200000000000001,span f200000000000002,span f200000000000003 (3)"}; !slices.Equal(whole, want) {
		t.Fatalf("search without a window: %q, want %q", whole, want)
	}
	params := url.Values{"q": {"{}"}, "spss": {"10"}, "start": {fmt.Sprint(s - 10)}, "end": {fmt.Sprint(s + 10)}}
	if got := matchedSpans(f.search("a", params)); !slices.Equal(got, whole) {
		t.Errorf("search %v: %q, want the trace's spans as without a window %q", params, got, whole)
	}
}

// spanCount is the count of spans tenant a's trace by id at path (v2,
// protobuf) answers; any status but 200 fails the test.
func (f *fixture) spanCount(path string) int {
	f.t.Helper()
	rec := f.get("a", path, "application/protobuf")
	if rec.Code != 200 {
		f.t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
	return decodeTraceV2(f.t, rec.Body.Bytes()).trace.SpanCount()
}
