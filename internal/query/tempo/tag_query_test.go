package tempo

import (
	"slices"
	"testing"
)

// TestTagQueryLenientKeepsCompleteConditions: Grafana's
// autocomplete sends the query being typed, e.g. the values of
// span.http.method while the user types
// `{ resource.service.name = "payments" && span.http.method = }`. Tempo
// reads q with traceql.ExtractConditionGroups, which parses it with
// ParseLenient (pkg/traceql/lenient_parser.go: "incomplete matchers are
// replaced with `true` and the cleaned query is re-parsed", the example
// in its doc being `{ .foo = "bar" && name = }`), so the complete
// condition resource.service.name = "payments" still narrows the values
// to POST. traceql.TagFilter (groups.go) uses the strict Parse, which
// fails, and returns nil: every span's values are answered.
func TestTagQueryLenientKeepsCompleteConditions(t *testing.T) {
	f := newFixture(t)
	q := `{ resource.service.name = "payments" && span.http.method = }`
	want := []string{"string:POST"}
	if code, got := f.v2Values("span.http.method", q); code != 200 || !slices.Equal(got, want) {
		t.Errorf("values of span.http.method, q=%s: %d %q, want 200 %q", q, code, got, want)
	}
}

// TestTagValuesNilConditionIsNotAValue: `span.foo = nil` is not an
// equality with a value: Tempo's grammar makes it
// newUnaryOperation(OpNotExists, …) (pkg/traceql/expr.y, "NIL
// handling"), so ExecuteTagValues's shortcut (pkg/traceql/engine.go:
// `c.Attribute == tag && c.Op == OpEqual` → cb(c.Operands[0])) never
// applies to it: the group is read, with the tag's own OpNone condition
// added, and a span lacking the tag has no value of it. tempo's
// ownValues (tags.go) takes the Comparison{Op: "=", Value: nil} for an
// own value and answers {"string", ""} without reading anything.
func TestTagValuesNilConditionIsNotAValue(t *testing.T) {
	f := newFixture(t)
	for q, want := range map[string][]string{
		`{ span.http.method = nil }`:                                       nil,
		`{ span.http.method = nil || resource.service.name = "payments" }`: {"string:POST"},
	} {
		if code, got := f.v2Values("span.http.method", q); code != 200 || !slices.Equal(got, want) {
			t.Errorf("values of span.http.method, q=%s: %d %q, want 200 %q", q, code, got, want)
		}
	}
}
