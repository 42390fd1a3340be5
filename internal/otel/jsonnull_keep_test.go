package otel

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

const nullSpanHead = `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60e","spanId":"eee19b7ec3c1b176","name":"s","attributes":[`
const nullSpanTail = `]}]}]}]}`

// A null that pdata reads as something (an AnyValue's stringValue,
// arrayValue or kvlistValue: an empty string, list or map) is a request the
// Collector's receiver accepts and stores with that value, as tracelake
// did before nulls were left out: it must read the same.
func TestPrepareJSONKeepsNullsPdataReads(t *testing.T) {
	body := nullSpanHead + `{"key":"s","value":{"stringValue":null}},{"key":"s2","value":{"string_value":null}},` +
		`{"key":"a","value":{"arrayValue":null}},{"key":"m","value":{"kvlistValue":null}}` + nullSpanTail
	want, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := jsonTraces{}.UnmarshalTraces([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	wa := want.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	ga := got.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().AsRaw()
	for _, k := range []string{"s", "s2", "a", "m"} {
		w, g := wa[k], ga[k]
		if (w == nil) != (g == nil) {
			t.Errorf("attribute %s read as %#v, the Collector reads %#v", k, g, w)
		}
	}
}
