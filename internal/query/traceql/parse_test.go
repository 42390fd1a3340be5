package traceql

import (
	"reflect"
	"testing"
	"time"
)

// Upstream's own test cases (grafana/tempo pkg/traceql/test_examples.yaml):
// of its "valid" queries, those inside the subset parse; every one of its
// "parse_fails" shown fails, and so do the "validate_fails" ones the
// parser can tell (a bare intrinsic, = nil, a negated comparison).
var (
	upstreamValid = []string{
		`{ true }`, `{ !true }`, `{ true && false }`, `{ true || false }`, `{ .a }`, `{ !.a }`, `{ .a && false }`,
		`{ .a = 2 }`, `{ .a != 2 }`, `{ .a > 2 }`, `{ .a >= 2 }`, `{ .a < 2 }`, `{ .a <= 2 }`, `{ .a =~ "test" }`,
		`{ .a !~ "test" }`, `{ .a = "test" }`, `{ resource.a != 3 }`, `{ span.a != 3 }`,
		`{ !("test" != .c || ((true && .b) || 3 < .a)) }`, `{ status = ok }`, `{ status = unset }`, `{ status != error }`,
		`{ statusMessage =~ ".*" }`, `{ kind = internal }`, `{ kind = consumer }`, `{ traceDuration > 1s }`,
		`{ rootServiceName = "foo" }`, `{ rootName != "foo" }`, `{ duration > 1s }`, `{ span.foo != 3.0 }`,
		`{ ."foo bar" = "v" }`, `{ span."foo bar" = "v" }`, `{ resource."foo bar" = "v" }`, `{ ."foo\" = \"bar" = "v" }`,
		`{ ."a\\b" = "v" }`, `{ trace:duration > 2s }`, `{ trace:rootName = "a" }`, `{ trace:rootService = "a" }`,
		`{ span:duration > 2s }`, `{ span:status = error }`, `{ span:kind = client }`, `{ .http.status >= "200" }`,
		`{ true } && { true }`, `{ true } || { true }`, `{ true } >> { true }`, `{ true } << { true }`,
		`{ true } > { true }`, `{ true } < { true }`, `{ true } ~ { true }`, `{.attr="a" || .attr="b"}`,
		`{.attr=1.1 || .attr=2.2}`, `{.attr!~"a.*" && .attr!~"b.*"}`, `{} | select(.a,.b,.c)`, `{} | rate()`,
		`{} | quantile_over_time(duration, 0, 0.9, 1) by (span.http.path)`, `{ .foo != nil }`,
	}
	upstreamFails = []string{
		`true`, `[ true ]`, `( true )`, `{ . }`, `{ < }`, `{ .a < }`, `{ .a < 3`, `{ (.a < 3 }`, `{ attribute = 4 }`,
		`{ .attribute == 4 }`, `{} | rate() == 42`, `{ span. }`, `{ true } + { true }`, `{ true } = { true }`,
		`{ true } <= { true }`, `max(name) = "foo"`, `select(.a`, `select()`, `{ true } | count()`, `{ true } | by()`,
		`2 + 3`, `3 = 2`, `{ .foo = "a" } | 3 > 2`, `{ trace:status = error }`, `{ trace:kind = server }`,
		`{ trace:name = "a" }`, `{ trace:rootServiceName = "a" }`, `{ span:rootName = "bar" }`, `{} | topk(10)`,
		`{} > 10`, `{} == 10`, `({}) + ({})`,
		// validate_fails
		`{ status }`, `{ kind }`, `{ resource.service.name = nil }`, `{ nil = resource.service.name }`,
		`{ !ok = status }`, `{ !name = "foo" }`,
	}
)

func TestParseUpstreamExamples(t *testing.T) {
	for _, q := range upstreamValid {
		if _, err := Parse(q); err != nil {
			t.Errorf("%s: %v", q, err)
		}
	}
	for _, q := range upstreamFails {
		if _, err := Parse(q); err == nil {
			t.Errorf("%s parsed", q)
		}
	}
}

// TestParseTree: precedence and associativity as upstream's grammar has
// them (structural operators before && and ||, which share a level and
// associate left; ! before comparisons), statics and scopes.
func TestParseTree(t *testing.T) {
	span := func(n string) Attribute { return Attribute{Scope: SpanScope, Name: n} }
	str := func(s string) Static { return Static{Kind: String, S: s} }
	eq := func(a Attribute, v Static) Comparison { return Comparison{Attr: a, Op: "=", Value: v} }
	for _, c := range []struct {
		q    string
		want *Query
	}{
		{`{ span.a = "x" || span.b = "y" && span.c = "z" }`, &Query{Spans: Filter{Cond: Logical{Op: "&&",
			L: Logical{Op: "||", L: eq(span("a"), str("x")), R: eq(span("b"), str("y"))}, R: eq(span("c"), str("z"))}}}},
		{`{ 3 < .a }`, &Query{Spans: Filter{Cond: Comparison{Attr: Attribute{Name: "a"}, Op: ">", Value: Static{Kind: Int, I: 3}}}}},
		{`{ duration >= 1.5s && span:status = error }`, &Query{Spans: Filter{Cond: Logical{Op: "&&",
			L: Comparison{Attr: Attribute{Scope: Intrinsic, Name: "duration"}, Op: ">=", Value: Static{Kind: Duration, D: 1500 * time.Millisecond}},
			R: Comparison{Attr: Attribute{Scope: Intrinsic, Name: "status"}, Op: "=", Value: Static{Kind: Status, S: "error"}}}}}},
		{`{ resource.x = -2.5 }`, &Query{Spans: Filter{Cond: eq(Attribute{Scope: ResourceScope, Name: "x"}, Static{Kind: Float, F: -2.5})}}},
		{`{ traceDuration > 1d }`, &Query{Spans: Filter{Cond: Comparison{Attr: Attribute{Scope: Intrinsic, Name: "traceDuration"}, Op: ">", Value: Static{Kind: Duration, D: 24 * time.Hour}}}}},
		{`{} && {} > {} || {}`, &Query{Spans: SpansetOp{Op: "||", L: SpansetOp{Op: "&&", L: Filter{}, R: SpansetOp{Op: ">", L: Filter{}, R: Filter{}}}, R: Filter{}}}},
		{`{} >> ({} || {})`, &Query{Spans: SpansetOp{Op: ">>", L: Filter{}, R: SpansetOp{Op: "||", L: Filter{}, R: Filter{}}}}},
		{`{ !.a }`, &Query{Spans: Filter{Cond: Not{X: Attribute{Name: "a"}}}}},
		{`{} | select(span.a, resource."b c") | rate() by (resource.service.name)`, &Query{Spans: Filter{},
			Select:  []Attribute{span("a"), {Scope: ResourceScope, Name: "b c"}},
			Metrics: &Metrics{Func: "rate", By: []Attribute{{Scope: ResourceScope, Name: "service.name"}}}}},
		{`{ span.http.route =~ "/api/.*" } | quantile_over_time(duration, .99, .5)`, &Query{
			Spans:   Filter{Cond: Comparison{Attr: span("http.route"), Op: "=~", Value: str("/api/.*")}},
			Metrics: &Metrics{Func: "quantile_over_time", Of: &Attribute{Scope: Intrinsic, Name: "duration"}, Quantiles: []float64{.99, .5}}}},
	} {
		got, err := Parse(c.q)
		if err != nil {
			t.Errorf("%s: %v", c.q, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.q, got, c.want)
		}
	}
}

// TestParseAttribute: tag names as /api/v2/search/tag/{tag}/values takes
// them; a name left URL-encoded is none.
func TestParseAttribute(t *testing.T) {
	for in, want := range map[string]Attribute{
		"resource.service.name": {Scope: ResourceScope, Name: "service.name"},
		".http.method":          {Name: "http.method"},
		"span:name":             {Scope: Intrinsic, Name: "name"},
		`span."a b"`:            {Scope: SpanScope, Name: "a b"},
		"span.http/route":       {Scope: SpanScope, Name: "http/route"},
	} {
		got, err := ParseAttribute(in)
		if err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
		if back, err := ParseAttribute(got.String()); err != nil || back != got {
			t.Errorf("%s does not read back: %v", got, err)
		}
	}
	for _, in := range []string{"span%3Aname", "service.name", `resource.service.name = "x"`, "", "span:rootName"} {
		if _, err := ParseAttribute(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}

// TestConditionGroups: q's filter expanded into OR groups as upstream's
// lenient_extract.go splitReqConditions does; a group with no condition
// but bare attributes filters nothing, and so does a q that does not
// parse or is not a single filter.
func TestConditionGroups(t *testing.T) {
	for q, want := range map[string]int{
		`{ (.a = "1" || .b = "2") && .c = "3" }`: 2,
		`{ .a = "1" && .c = "3" }`:               1,
		`{ .a = "x" || .b }`:                     0,
	} {
		groups, ok := ConditionGroups(TagFilter(q).Cond)
		if !ok || len(groups) != want {
			t.Errorf("%s: %d groups %v, want %d", q, len(groups), groups, want)
		}
	}
	for _, q := range []string{`{ .a = }`, `{ .a = "1" } >> { .b = "2" }`, `{ }`, ``} {
		if f := TagFilter(q); f != nil {
			t.Errorf("%s: filter %v, want none", q, f)
		}
	}
}
