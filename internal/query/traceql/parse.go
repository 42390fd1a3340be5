package traceql

import (
	"fmt"
	"regexp"
	"slices"
	"time"
)

// Parse reads a TraceQL query of the subset answered.
func Parse(q string) (*Query, error) {
	toks, err := lex(q)
	if err != nil {
		return nil, &ParseError{Msg: err.Error()}
	}
	p := &parser{toks: toks}
	query, err := p.query()
	if err != nil {
		return nil, &ParseError{Msg: err.Error()}
	}
	return query, nil
}

// ParseError is a query that does not parse, or is outside the subset.
type ParseError struct{ Msg string }

func (e *ParseError) Error() string { return "parse error: " + e.Msg }

// ParseAttribute reads a tag name as upstream's ParseIdentifier does (the
// tag of /api/v2/search/tag/{tag}/values): it must be an attribute or an
// intrinsic alone, as inside `{ }`.
func ParseAttribute(s string) (Attribute, error) {
	toks, err := lex("{" + s + "}")
	if err != nil {
		return Attribute{}, &ParseError{Msg: err.Error()}
	}
	p := &parser{toks: toks, bareIntrinsics: true}
	q, err := p.query()
	if err != nil {
		return Attribute{}, &ParseError{Msg: err.Error()}
	}
	f, ok := q.Spans.(Filter)
	if !ok || q.Select != nil || q.Metrics != nil {
		return Attribute{}, &ParseError{Msg: fmt.Sprintf("%s is not an attribute", s)}
	}
	a, ok := f.Cond.(Attribute)
	if !ok {
		return Attribute{}, &ParseError{Msg: fmt.Sprintf("%s is not an attribute", s)}
	}
	return a, nil
}

type parser struct {
	toks []token
	i    int
	// bareIntrinsics admits an intrinsic alone in a filter, which names
	// it (a tag) but is no condition.
	bareIntrinsics bool
	// depth is how many parentheses, negations and braces the parser is
	// inside: each is a recursion, bounded by maxDepth.
	depth int
}

// maxDepth bounds a query's nesting: a recursive descent over a query of
// a million parentheses (a GET of a megabyte) grows the goroutine's stack
// past Go's limit, a fatal error that ends the process.
const maxDepth = 1000

// enter counts one more level of nesting; leave must follow it.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &ParseError{Msg: fmt.Sprintf("the query nests deeper than %d levels", maxDepth)}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i = min(p.i+1, len(p.toks)-1); return t }

func (p *parser) isOp(ops ...string) bool {
	t := p.peek()
	return t.kind == tOp && slices.Contains(ops, t.text)
}

func (p *parser) expect(op string) error {
	if !p.isOp(op) {
		return p.unexpected("expecting " + op)
	}
	p.next()
	return nil
}

func (p *parser) unexpected(want string) error {
	t := p.peek()
	what := t.text
	switch t.kind {
	case tEOF:
		what = "end of query"
	case tAttr:
		what = t.attr.String()
	case tString:
		what = fmt.Sprintf("%q", t.text)
	case tInt, tFloat, tDuration:
		what = "number"
	}
	return fmt.Errorf("unexpected %s at %d, %s", what, t.pos, want)
}

// query: spansetExpr { "|" (select(...) | metricsFunc) }.
func (p *parser) query() (*Query, error) {
	s, err := p.spansetExpr()
	if err != nil {
		return nil, err
	}
	q := &Query{Spans: s}
	for p.isOp("|") {
		p.next()
		t := p.peek()
		switch {
		case t.kind == tIdent && t.text == "select" && q.Metrics == nil:
			p.next()
			attrs, err := p.attrList()
			if err != nil {
				return nil, err
			}
			q.Select = append(q.Select, attrs...)
		case t.kind == tIdent && q.Metrics == nil && slices.Contains(metricsFuncs, t.text):
			m, err := p.metrics()
			if err != nil {
				return nil, err
			}
			q.Metrics = m
		default:
			return nil, p.unexpected("expecting select() or a metrics function (rate, count_over_time, quantile_over_time, histogram_over_time)")
		}
	}
	if p.peek().kind != tEOF {
		return nil, p.unexpected("expecting end of query")
	}
	return q, nil
}

// attrList: "(" attribute { "," attribute } ")".
func (p *parser) attrList() ([]Attribute, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []Attribute
	for {
		a, ok := p.attribute()
		if !ok {
			return nil, p.unexpected("expecting an attribute")
		}
		out = append(out, a)
		if p.isOp(",") {
			p.next()
			continue
		}
		return out, p.expect(")")
	}
}

// metricsFuncs are the metrics functions answered.
var metricsFuncs = []string{"rate", "count_over_time", "quantile_over_time", "histogram_over_time"}

// metrics: rate() | count_over_time() | quantile_over_time(attr, q, …),
// then optionally by(attrs).
func (p *parser) metrics() (*Metrics, error) {
	m := &Metrics{Func: p.next().text}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	if m.Func == "quantile_over_time" || m.Func == "histogram_over_time" {
		a, ok := p.attribute()
		if !ok {
			return nil, p.unexpected("expecting the attribute of " + m.Func)
		}
		m.Of = &a
	}
	if m.Func == "quantile_over_time" {
		for p.isOp(",") {
			p.next()
			switch t := p.peek(); t.kind {
			case tFloat:
				m.Quantiles = append(m.Quantiles, t.f)
			case tInt:
				m.Quantiles = append(m.Quantiles, float64(t.i))
			default:
				return nil, p.unexpected("expecting a quantile")
			}
			p.next()
		}
		if len(m.Quantiles) == 0 {
			return nil, p.unexpected("quantile_over_time needs at least one quantile")
		}
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tIdent && t.text == "by" {
		p.next()
		by, err := p.attrList()
		if err != nil {
			return nil, err
		}
		m.By = by
	}
	return m, nil
}

// spansetExpr: spanset operations, the structural ones binding tighter
// than && and ||, each level left-associative (upstream expr.y: AND OR on
// one %left line, the structural operators on the next).
func (p *parser) spansetExpr() (Spanset, error) {
	return leftAssoc(p, p.spansetStructural, []string{"&&", "||"}, newSpansetOp)
}

func (p *parser) spansetStructural() (Spanset, error) {
	return leftAssoc(p, p.spansetPrimary, []string{">>", ">", "~", "<<", "<"}, newSpansetOp)
}

func newSpansetOp(op string, l, r Spanset) Spanset { return SpansetOp{Op: op, L: l, R: r} }

// leftAssoc reads operands joined by ops, left-associative.
func leftAssoc[T any](p *parser, operand func() (T, error), ops []string, join func(op string, l, r T) T) (T, error) {
	l, err := operand()
	if err != nil {
		return l, err
	}
	for p.isOp(ops...) {
		op := p.next().text
		r, err := operand()
		if err != nil {
			return r, err
		}
		l = join(op, l, r)
	}
	return l, nil
}

func (p *parser) spansetPrimary() (Spanset, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch {
	case p.isOp("("):
		p.next()
		s, err := p.spansetExpr()
		if err != nil {
			return nil, err
		}
		return s, p.expect(")")
	case p.isOp("{"):
		p.next()
		if p.isOp("}") {
			p.next()
			return Filter{}, nil
		}
		e, err := p.fieldExpr()
		if err != nil {
			return nil, err
		}
		return Filter{Cond: e}, p.expect("}")
	}
	return nil, p.unexpected("expecting { or (")
}

// fieldExpr: conditions joined by && and ||, one precedence level,
// left-associative, as upstream's grammar has them.
func (p *parser) fieldExpr() (Expr, error) {
	return leftAssoc(p, p.fieldUnary, []string{"&&", "||"}, func(op string, l, r Expr) Expr { return Logical{Op: op, L: l, R: r} })
}

func (p *parser) fieldUnary() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	switch {
	case p.isOp("!"):
		// ! binds tighter than a comparison (upstream expr.y): it negates
		// a parenthesized condition, an attribute or a boolean, and
		// !x = y, which compares a negation, is refused.
		p.next()
		var x Expr
		var err error
		if p.isOp("(", "!") {
			x, err = p.fieldUnary()
		} else {
			x, err = p.comparison()
			if _, compared := x.(Comparison); compared {
				return nil, fmt.Errorf("! negates a value, not a comparison: write !(…)")
			}
		}
		if err != nil {
			return nil, err
		}
		return Not{X: x}, nil
	case p.isOp("("):
		p.next()
		e, err := p.fieldExpr()
		if err != nil {
			return nil, err
		}
		return e, p.expect(")")
	}
	return p.comparison()
}

var compareOps = []string{"=", "!=", ">", ">=", "<", "<=", "=~", "!~"}

// flipped is the operator with its operands swapped: 3 < .a is .a > 3.
var flipped = map[string]string{"=": "=", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}

// comparison: an attribute compared with a static (either side), or an
// attribute alone.
func (p *parser) comparison() (Expr, error) {
	if a, ok := p.attribute(); ok {
		if !p.isOp(compareOps...) {
			if a.Scope == Intrinsic && !p.bareIntrinsics {
				// Every intrinsic answered is a string, number or enum:
				// alone it is no condition.
				return nil, fmt.Errorf("%s alone is not a condition", a)
			}
			return a, nil
		}
		op := p.next().text
		v, err := p.static()
		if err != nil {
			return nil, err
		}
		return checkComparison(Comparison{Attr: a, Op: op, Value: v})
	}
	v, err := p.static()
	if err != nil {
		return nil, err
	}
	if !p.isOp(compareOps...) {
		if v.Kind == Bool {
			return Literal{B: v.B}, nil
		}
		return nil, p.unexpected("expecting a comparison")
	}
	op := p.next().text
	a, ok := p.attribute()
	if !ok {
		return nil, p.unexpected("expecting an attribute: comparisons of two statics are not supported")
	}
	f, ok := flipped[op]
	if !ok {
		return nil, fmt.Errorf("%s takes the attribute on its left", op)
	}
	return checkComparison(Comparison{Attr: a, Op: f, Value: v})
}

// NestedSetParentAnswers is what nestedSetParent op n answers for a root
// span (nestedSetParent -1) and for every other span (1 or more), ok
// false when the answer for the others depends on their place in the
// trace.
func NestedSetParentAnswers(op string, n int64) (root, other, ok bool) {
	cmp := func(v int64) bool {
		switch op {
		case "=":
			return v == n
		case "!=":
			return v != n
		case "<":
			return v < n
		case "<=":
			return v <= n
		case ">":
			return v > n
		case ">=":
			return v >= n
		}
		return false
	}
	root = cmp(-1)
	switch op {
	case "<":
		return root, false, n <= 1
	case "<=", "=":
		return root, false, n < 1
	case ">", "!=":
		return root, true, n < 1
	case ">=":
		return root, true, n <= 1
	}
	return false, false, false
}

// checkComparison refuses what upstream's validation refuses (a regular
// expression against a non-string; status or kind compared with the
// other's values) and what the subset leaves out.
func checkComparison(c Comparison) (Expr, error) {
	if c.Op == "=~" || c.Op == "!~" {
		if c.Value.Kind != String {
			return nil, fmt.Errorf("%s needs a string", c.Op)
		}
		// Checked here so that a bad pattern is the caller's error, not
		// the database's (DuckDB's regexps are RE2, as Go's).
		if _, err := regexp.Compile(c.Value.S); err != nil {
			return nil, fmt.Errorf("regular expression %q: %w", c.Value.S, err)
		}
	}
	if c.Value.Kind == Nil {
		// `= nil` is "does not exist", `!= nil` "exists" (upstream
		// expr.y, NIL handling); ast_validate.go UnaryOperation.validate
		// refuses `= nil` for intrinsics and resource.service.name,
		// which always exist.
		switch {
		case c.Op != "=" && c.Op != "!=":
			return nil, fmt.Errorf("nil is compared with = or != only")
		case c.Op == "=" && c.Attr.Scope == Intrinsic:
			return nil, fmt.Errorf("%s=nil is not valid because intrinsics cannot be nil", c.Attr)
		case c.Op == "=" && c.Attr == Attribute{Scope: ResourceScope, Name: "service.name"}:
			return nil, fmt.Errorf("%s=nil is not valid because resource.service.name cannot be nil", c.Attr)
		}
		return c, nil
	}
	if c.Attr.Scope == Intrinsic {
		switch c.Attr.Name {
		case IntrinsicStatus:
			if c.Value.Kind != Status {
				return nil, fmt.Errorf("status is compared with ok, error or unset")
			}
		case IntrinsicKind:
			if c.Value.Kind != Kind {
				return nil, fmt.Errorf("kind is compared with a span kind")
			}
		case IntrinsicNestedSetParent:
			if c.Value.Kind != Int {
				return nil, fmt.Errorf("nestedSetParent is compared with an integer")
			}
			if _, _, ok := NestedSetParentAnswers(c.Op, c.Value.I); !ok {
				return nil, fmt.Errorf("nestedSetParent %s %d: only comparisons that tell root spans (-1) from the others (1 or more) are supported", c.Op, c.Value.I)
			}
		case IntrinsicDuration, IntrinsicTraceDuration:
			// A number is nanoseconds: int, float and duration are
			// matching operands (upstream enum_statics.go
			// isMatchingOperand, isNumeric).
			if c.Value.Kind != Duration && c.Value.Kind != Int && c.Value.Kind != Float {
				return nil, fmt.Errorf("%s is compared with a duration or a number", c.Attr.Name)
			}
		default:
			if c.Value.Kind != String {
				return nil, fmt.Errorf("%s is compared with a string", c.Attr.Name)
			}
		}
	} else if c.Value.Kind == Status || c.Value.Kind == Kind {
		return nil, fmt.Errorf("%s is compared with %s", c.Attr, c.Value.S)
	}
	if (c.Value.Kind == Status || c.Value.Kind == Kind) && c.Op != "=" && c.Op != "!=" {
		return nil, fmt.Errorf("%s is compared with = or !=", c.Attr)
	}
	if c.Value.Kind == Bool && c.Op != "=" && c.Op != "!=" {
		// A boolean is compared with = or != alone: upstream's
		// validation refuses { .a > false } (ast_validate.go
		// BinaryOperation.validate, enum_operators.go binaryTypeValid:
		// TypeBoolean takes && || = != in notin).
		return nil, fmt.Errorf("illegal operation for the given types: %s %s %t", c.Attr, c.Op, c.Value.B)
	}
	return c, nil
}

var intrinsics = []string{IntrinsicName, IntrinsicStatus, IntrinsicStatusMessage, IntrinsicKind, IntrinsicDuration,
	IntrinsicRootName, IntrinsicRootServiceName, IntrinsicTraceDuration, IntrinsicNestedSetParent}

// attribute reads an attribute or intrinsic, if one is next.
func (p *parser) attribute() (Attribute, bool) {
	t := p.peek()
	switch {
	case t.kind == tAttr:
		p.next()
		return t.attr, true
	case t.kind == tIdent && slices.Contains(intrinsics, t.text):
		p.next()
		return Attribute{Scope: Intrinsic, Name: t.text}, true
	}
	return Attribute{}, false
}

var (
	statuses = []string{"ok", "error", "unset"}
	kinds    = []string{"unspecified", "internal", "server", "client", "producer", "consumer"}
)

// static reads a literal.
func (p *parser) static() (Static, error) {
	neg := false
	if p.isOp("-") {
		p.next()
		neg = true
	}
	at := p.i
	t := p.next()
	sign := int64(1)
	if neg {
		sign = -1
	}
	switch t.kind {
	case tInt:
		return Static{Kind: Int, I: sign * t.i}, nil
	case tFloat:
		return Static{Kind: Float, F: float64(sign) * t.f}, nil
	case tDuration:
		return Static{Kind: Duration, D: time.Duration(sign) * t.d}, nil
	case tString:
		if !neg {
			return Static{Kind: String, S: t.text}, nil
		}
	case tIdent:
		if neg {
			break
		}
		switch {
		case t.text == "true" || t.text == "false":
			return Static{Kind: Bool, B: t.text == "true"}, nil
		case t.text == "nil":
			return Static{Kind: Nil}, nil
		case slices.Contains(statuses, t.text):
			return Static{Kind: Status, S: t.text}, nil
		case slices.Contains(kinds, t.text):
			return Static{Kind: Kind, S: t.text}, nil
		}
	}
	p.i = at
	return Static{}, p.unexpected("expecting a value")
}
