// Package traceql reads the subset of Grafana Tempo's TraceQL that
// tracelake answers into an AST, and turns that AST into SQL over the
// otel_spans table (sql.go). The grammar followed is upstream's
// (grafana/tempo pkg/traceql/expr.y and lexer.go); the upstream parser is
// not imported because grafana/tempo is a module with replace directives
// and a dependency tree (Prometheus, gogo protobuf, Tempo's cache) far
// beyond this subset.
//
// Answered: spanset filters `{ … }` of comparisons (= != > >= < <= =~ !~,
// regular expressions anchored) of an attribute with a static (string,
// int, float, bool, duration, status, kind; `!= nil` for existence,
// `= nil` for absence), the
// attribute scoped `span.`, `resource.` or unscoped `.` (quoted names
// included), or one of the intrinsics name, status, statusMessage, kind,
// duration, rootName, rootServiceName, traceDuration (also spelled
// span:…, trace:…); `&&`, `||`, `!` and parentheses inside a filter, a
// bare boolean attribute or literal; spanset `&&` `||` and the structural
// `>>` `>` `~` `<<` `<`; `| select(…)`; `| rate()`, `count_over_time()`,
// `quantile_over_time(duration, q…)`, `histogram_over_time(duration)`,
// each with `by(…)`.
//
// Refused with a parse error (400): arithmetic, aggregates and scalar
// filters (count(), avg(…) > x), by() and coalesce() as pipeline stages,
// the negated and union structural operators (!> &>> …), the parent.,
// event., link. and instrumentation. scopes and their intrinsics, the id
// intrinsics (trace:id, span:id, span:parentID), other metrics functions
// (min/max/avg/sum_over_time, compare, topk, bottomk), `with(…)` hints,
// comparisons of two statics, and `= nil` on an intrinsic or
// resource.service.name (upstream's ast_validate.go: they cannot be nil).
package traceql

import "time"

// Query is a parsed TraceQL query: a spanset expression, then optionally
// select() and a metrics function.
type Query struct {
	Spans Spanset
	// Select are the attributes select() asks for, nil without.
	Select []Attribute
	// Metrics is the metrics function ending the pipeline, nil for a
	// search.
	Metrics *Metrics
}

// Spanset is a spanset expression: a Filter or a SpansetOp.
type Spanset interface{ spanset() }

// Filter is `{ cond }`; Cond nil is `{ }`, every span.
type Filter struct{ Cond Expr }

// SpansetOp combines two spansets: "&&", "||" (traces holding both;
// either), ">>" ">" "~" "<<" "<" (the right-hand spans that are
// descendants, children, siblings, ancestors, parents of left-hand ones).
type SpansetOp struct {
	Op   string
	L, R Spanset
}

func (Filter) spanset()    {}
func (SpansetOp) spanset() {}

// Expr is a condition inside a filter: a Logical, a Not, a Comparison or
// a bare Attribute (true when it exists, Tempo's `{ .a }`).
type Expr interface{ expr() }

// Logical is "&&" or "||" of two conditions.
type Logical struct {
	Op   string
	L, R Expr
}

// Not is `!cond`.
type Not struct{ X Expr }

// Comparison is an attribute compared with a static value: Op is one of
// = != > >= < <= =~ !~.
type Comparison struct {
	Attr  Attribute
	Op    string
	Value Static
}

// Literal is `true` or `false` alone.
type Literal struct{ B bool }

func (Literal) expr()    {}
func (Logical) expr()    {}
func (Not) expr()        {}
func (Comparison) expr() {}
func (Attribute) expr()  {}

// Scope is where an attribute is looked up.
type Scope int

const (
	// Unscoped is `.name`: the span's attribute, else the resource's.
	Unscoped Scope = iota
	// SpanScope is `span.name`.
	SpanScope
	// ResourceScope is `resource.name`.
	ResourceScope
	// Intrinsic is one of the span's or trace's own fields.
	Intrinsic
)

// Intrinsics are the intrinsic fields answered, by their TraceQL names
// (also spelled span:name, trace:rootName, as upstream's lexer admits).
const (
	IntrinsicName            = "name"
	IntrinsicStatus          = "status"
	IntrinsicStatusMessage   = "statusMessage"
	IntrinsicKind            = "kind"
	IntrinsicDuration        = "duration"
	IntrinsicRootName        = "rootName"
	IntrinsicRootServiceName = "rootServiceName"
	IntrinsicTraceDuration   = "traceDuration"
	// IntrinsicNestedSetParent is a span's parent's place in the
	// trace's nested set numbering: -1 for a root span, 1 or more for
	// the others (upstream enum_attributes.go). Only comparisons whose
	// answer that tells are served: { nestedSetParent<0 }, Traces
	// Drilldown's root spans, and the like.
	IntrinsicNestedSetParent = "nestedSetParent"
)

// Attribute names a value of a span: an intrinsic or an attribute.
type Attribute struct {
	Scope Scope
	Name  string
}

// String is the attribute as TraceQL writes it.
func (a Attribute) String() string {
	switch a.Scope {
	case SpanScope:
		return "span." + quoteName(a.Name)
	case ResourceScope:
		return "resource." + quoteName(a.Name)
	case Intrinsic:
		return a.Name
	}
	return "." + quoteName(a.Name)
}

// StaticKind is the type of a static value.
type StaticKind int

const (
	String StaticKind = iota
	Int
	Float
	Bool
	Duration
	Status // ok, error, unset
	Kind   // server, client, …
	Nil
)

// Static is a literal value.
type Static struct {
	Kind StaticKind
	S    string // String, Status, Kind
	I    int64  // Int
	F    float64
	B    bool
	D    time.Duration
}

// Metrics is the metrics function ending a query.
type Metrics struct {
	// Func is "rate", "count_over_time", "quantile_over_time" or
	// "histogram_over_time".
	Func string
	// Of is quantile_over_time's and histogram_over_time's attribute
	// (duration).
	Of *Attribute
	// Quantiles are quantile_over_time's quantiles.
	Quantiles []float64
	// By are the attributes grouped by.
	By []Attribute
}
