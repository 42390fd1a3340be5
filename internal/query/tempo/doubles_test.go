package tempo

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// wholeDoubles is the Tempo API over one trace whose span, resource and
// event carry whole doubles beside an int of the same value: ratio 2.0,
// count 2, big 1e6, ratios [2.0, 3.0], kv {d: 2.0}; the resource's cpu
// 4.0 and the event's at 1.0.
func wholeDoubles(t *testing.T) *fixture {
	t.Helper()
	td := traces([]span{{traceCheckout, spanRoot, "", "frontend", "GET /api", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second,
		map[string]any{"ratio": 2.0, "count": 2, "big": 1e6, "ratios": []any{2.0, 3.0}, "kv": map[string]any{"d": 2.0}}}})
	rs := td.ResourceSpans().At(0)
	rs.Resource().Attributes().PutDouble("cpu", 4)
	ev := rs.ScopeSpans().At(0).Spans().At(0).Events().AppendEmpty()
	ev.SetName("tick")
	ev.Attributes().PutDouble("at", 1)
	return newFixtureOf(t, map[string][]ptrace.Traces{"a": {td}}, maxTraceSpans)
}

// A whole double attribute (2.0) is answered a double, not an int, in
// the trace by id, inside arrays and maps too, as Tempo stores it (a
// double in vparquet's float column).
func TestTraceByIDKeepsWholeDoublesDoubles(t *testing.T) {
	f := wholeDoubles(t)
	rec := f.get("a", "/api/traces/"+traceCheckout, "application/protobuf")
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	td := decodeTraceV1(t, rec.Body.Bytes())
	if td.SpanCount() != 1 {
		t.Fatalf("%d spans", td.SpanCount())
	}
	rs := td.ResourceSpans().At(0)
	sp := rs.ScopeSpans().At(0).Spans().At(0)
	want := pcommon.NewMap()
	if err := want.FromRaw(map[string]any{"ratio": 2.0, "count": 2, "big": 1e6, "ratios": []any{2.0, 3.0}, "kv": map[string]any{"d": 2.0}}); err != nil {
		t.Fatal(err)
	}
	if !sp.Attributes().Equal(want) {
		t.Errorf("span attributes %s, want %s", typed(sp.Attributes()), typed(want))
	}
	if cpu, _ := rs.Resource().Attributes().Get("cpu"); cpu.Type() != pcommon.ValueTypeDouble || cpu.Double() != 4 {
		t.Errorf("resource cpu %s %v, want Double 4", cpu.Type(), cpu.AsRaw())
	}
	if at, _ := sp.Events().At(0).Attributes().Get("at"); at.Type() != pcommon.ValueTypeDouble || at.Double() != 1 {
		t.Errorf("event attribute at %s %v, want Double 1", at.Type(), at.AsRaw())
	}
}

// typed is a map's attributes with their types, for messages.
func typed(m pcommon.Map) string {
	var out []string
	for k, v := range m.All() {
		s := fmt.Sprintf("%s=%s:%s", k, v.Type(), v.AsString())
		if v.Type() == pcommon.ValueTypeSlice {
			var es []string
			for _, e := range v.Slice().All() {
				es = append(es, e.Type().String())
			}
			s += fmt.Sprint(es)
		}
		if v.Type() == pcommon.ValueTypeMap {
			s += typed(v.Map())
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return fmt.Sprint(out)
}

// A search's select() and a metrics query's by() answer a whole double
// attribute as a double.
func TestSearchAndMetricsKeepWholeDoublesDoubles(t *testing.T) {
	f := wholeDoubles(t)
	s := f.search("a", url.Values{"q": {`{ span.count = 2 } | select(span.ratio, span.count)`}})
	var got []string
	for _, tr := range s.Traces {
		for _, ss := range tr.SpanSets {
			for _, sp := range ss.Spans {
				for _, a := range sp.Attributes {
					for k, v := range a.Value {
						got = append(got, a.Key+"="+k+":"+string(v))
					}
				}
			}
		}
	}
	slices.Sort(got)
	if want := []string{`count=intValue:"2"`, `ratio=doubleValue:2`}; !slices.Equal(got, want) {
		t.Errorf("select: %q, want %q", got, want)
	}
	if got, want := f.rangeOf("a", `{ } | count_over_time() by (span.ratio)`), []string{"span.ratio=doubleValue:2: 1@2"}; !slices.Equal(got, want) {
		t.Errorf("by (span.ratio): %q, want %q", got, want)
	}
}

// Tag values answer a double as Tempo does: type float, its text as
// Tempo's Static.EncodeToString writes a float (pkg/traceql/ast_stringer.go:
// FormatFloat 'g', with .0 when neither . nor e shows), whether read
// from the spans or from the query's own condition.
func TestTagValuesOfWholeDoubles(t *testing.T) {
	f := wholeDoubles(t)
	for _, c := range []struct{ tag, q string }{
		{"span.ratio", ""}, {"span.count", ""}, {"span.big", ""}, {"span.ratios", ""}, {"resource.cpu", ""}, {".ratio", ""},
		{"span.ratio", `{ span.ratio = 2.0 }`}, {"span.big", `{ span.big = 1e6 }`},
	} {
		want := map[string][]string{"span.ratio": {"float:2.0"}, "span.count": {"int:2"}, "span.big": {"float:1e+06"},
			"span.ratios": {"float:2.0", "float:3.0"}, "resource.cpu": {"float:4.0"}, ".ratio": {"float:2.0"}}[c.tag]
		code, got := f.v2Values(c.tag, c.q)
		if code != 200 || !slices.Equal(got, want) {
			t.Errorf("%s q=%q: %d %q, want %q", c.tag, c.q, code, got, want)
		}
	}
}
