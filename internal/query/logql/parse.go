package logql

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// rangeOps are the range aggregations; needUnwrap those that take their
// values from unwrap, noUnwrap those that count lines or bytes (Loki
// pkg/logql/syntax/ast.go RangeAggregationExpr.validate).
var (
	rangeOps = []string{"count_over_time", "rate", "rate_counter", "bytes_over_time", "bytes_rate",
		"avg_over_time", "sum_over_time", "min_over_time", "max_over_time", "stddev_over_time",
		"stdvar_over_time", "quantile_over_time", "first_over_time", "last_over_time", "absent_over_time"}
	needUnwrap = []string{"avg_over_time", "sum_over_time", "min_over_time", "max_over_time", "stddev_over_time",
		"stdvar_over_time", "quantile_over_time", "first_over_time", "last_over_time", "rate_counter"}
	noUnwrap = []string{"count_over_time", "bytes_over_time", "bytes_rate"}
	// groupingOps are the range aggregations that take by/without (Loki
	// RangeAggregationExpr.validate).
	groupingOps = []string{"avg_over_time", "stddev_over_time", "stdvar_over_time", "quantile_over_time",
		"max_over_time", "min_over_time", "first_over_time", "last_over_time"}
	vectorOps = []string{"sum", "avg", "count", "max", "min", "stddev", "stdvar", "topk", "bottomk", "sort", "sort_desc"}
	// binary operators by precedence, lowest first (PromQL's, which
	// LogQL keeps).
	binaryLevels = [][]string{{"or"}, {"and", "unless"}, {"==", "!=", "<=", "<", ">=", ">"}, {"+", "-"}, {"*", "/", "%"}, {"^"}}
	comparisons  = []string{"==", "!=", "<=", "<", ">=", ">"}
)

type parser struct {
	toks []token
	i    int
	// depth is how deep the parser's recursion is nested: bounded by
	// maxDepth.
	depth int
}

// maxDepth bounds a query's nesting: a recursive descent over a query of
// millions of parentheses (a form-encoded POST of up to 10 MB) grows the
// goroutine's stack past Go's limit, a fatal error that ends the process.
const maxDepth = 1000

// enter counts one more level of nesting; leave must follow it.
func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf(p.peek(), "the query nests deeper than %d levels", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// Parse reads a LogQL query.
func Parse(q string) (Expr, error) {
	toks, err := lex(q)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errorf(t, "unexpected %s", t)
	}
	if _, isLog := e.(*LogExpr); !isLog {
		if err := checkMetric(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// checkMetric refuses a log query used where a metric is needed (in a
// binary operation or a vector aggregation).
func checkMetric(e Expr) error {
	switch x := e.(type) {
	case *LogExpr:
		return &ParseError{Msg: "a log query cannot be used as a metric: wrap it in a range aggregation such as count_over_time"}
	case *BinaryExpr:
		if isSetOp(x.Op) && (isScalar(x.LHS) || isScalar(x.RHS)) {
			return &ParseError{Msg: fmt.Sprintf("unexpected literal for right leg of logical/set binary operation (%s)", x.Op)}
		}
		if err := checkMetric(x.LHS); err != nil {
			return err
		}
		return checkMetric(x.RHS)
	case *VectorAggr:
		return checkMetric(x.Inner)
	case *LabelReplace:
		return checkMetric(x.Inner)
	}
	return nil
}

// isScalar says whether e is a number: a literal, or an operation on
// numbers.
func isScalar(e Expr) bool {
	switch x := e.(type) {
	case *Literal:
		return true
	case *BinaryExpr:
		return isScalar(x.LHS) && isScalar(x.RHS)
	}
	return false
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) peekAt(n int) token {
	if p.i+n < len(p.toks) {
		return p.toks[p.i+n]
	}
	return p.toks[len(p.toks)-1]
}
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(t token, format string, args ...any) error {
	return &ParseError{Pos: t.pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) isOp(s string) bool {
	t := p.peek()
	return t.kind == tokOp && t.text == s
}

func (p *parser) isIdent(s string) bool {
	t := p.peek()
	return t.kind == tokIdent && t.text == s
}

func (p *parser) expectOp(s string) error {
	if t := p.next(); t.kind != tokOp || t.text != s {
		return p.errorf(t, "expected %q, got %s", s, t)
	}
	return nil
}

func (p *parser) expectString() (string, error) {
	t := p.next()
	if t.kind != tokString {
		return "", p.errorf(t, "expected a string, got %s", t)
	}
	return t.text, nil
}

func (p *parser) expectIdent() (string, error) {
	t := p.next()
	if t.kind != tokIdent {
		return "", p.errorf(t, "expected a label name, got %s", t)
	}
	return t.text, nil
}

// binaryOp is the binary operator at the cursor of precedence level, or "".
func (p *parser) binaryOp(level int) string {
	t := p.peek()
	if (t.kind == tokOp || t.kind == tokIdent) && slices.Contains(binaryLevels[level], t.text) {
		return t.text
	}
	return ""
}

// binary parses operations of precedence level and above; ^ is right
// associative, the others left.
func (p *parser) binary(level int) (Expr, error) {
	if level == len(binaryLevels) {
		return p.unary()
	}
	lhs, err := p.binary(level + 1)
	if err != nil {
		return nil, err
	}
	for {
		op := p.binaryOp(level)
		if op == "" {
			return lhs, nil
		}
		p.next()
		b := &BinaryExpr{Op: op, LHS: lhs}
		if p.isIdent("bool") {
			p.next()
			if !slices.Contains(comparisons, op) {
				return nil, p.errorf(p.peek(), "bool modifier can only be used on comparison operators")
			}
			b.ReturnBool = true
		}
		if b.Matching, err = p.vectorMatching(); err != nil {
			return nil, err
		}
		next := level + 1
		if op == "^" {
			next = level
		}
		if b.RHS, err = p.binary(next); err != nil {
			return nil, err
		}
		lhs = b
	}
}

func (p *parser) vectorMatching() (*VectorMatching, error) {
	if !p.isIdent("on") && !p.isIdent("ignoring") {
		return nil, nil
	}
	m := &VectorMatching{On: p.next().text == "on"}
	var err error
	if m.Labels, err = p.labelList(); err != nil {
		return nil, err
	}
	if p.isIdent("group_left") || p.isIdent("group_right") {
		m.Card = p.next().text
		if p.isOp("(") {
			if m.Include, err = p.labelList(); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// labelList parses (a, b, c).
func (p *parser) labelList() ([]string, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	var names []string
	err := p.list(")", func() error {
		n, err := p.expectIdent()
		names = append(names, n)
		return err
	})
	return names, err
}

// list parses comma-separated items up to close, which it consumes.
func (p *parser) list(close string, item func() error) error {
	for !p.isOp(close) {
		if err := item(); err != nil {
			return err
		}
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return p.expectOp(close)
}

func (p *parser) unary() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if p.isOp("-") || p.isOp("+") {
		neg := p.next().text == "-"
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		if !neg {
			return e, nil
		}
		if l, ok := e.(*Literal); ok {
			return &Literal{Val: -l.Val}, nil
		}
		return &BinaryExpr{Op: "*", LHS: &Literal{Val: -1}, RHS: e}, nil
	}
	return p.primary()
}

func (p *parser) primary() (Expr, error) {
	t := p.peek()
	switch {
	case t.kind == tokNumber:
		p.next()
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, p.errorf(t, "malformed number %s", t.text)
		}
		return &Literal{Val: v}, nil
	case t.kind == tokOp && t.text == "{":
		return p.logExpr()
	case t.kind == tokOp && t.text == "(":
		p.next()
		e, err := p.binary(0)
		if err != nil {
			return nil, err
		}
		return e, p.expectOp(")")
	case t.kind == tokIdent && slices.Contains(rangeOps, t.text):
		return p.rangeAggr()
	case t.kind == tokIdent && slices.Contains(vectorOps, t.text):
		return p.vectorAggr()
	case t.kind == tokIdent && t.text == "vector":
		p.next()
		if err := p.expectOp("("); err != nil {
			return nil, err
		}
		n := p.next()
		v, err := strconv.ParseFloat(n.text, 64)
		if n.kind != tokNumber || err != nil {
			return nil, p.errorf(n, "vector() takes a number, got %s", n)
		}
		return &VectorLit{Val: v}, p.expectOp(")")
	case t.kind == tokIdent && t.text == "label_replace":
		return p.labelReplace()
	}
	return nil, p.errorf(t, "unexpected %s", t)
}

func (p *parser) labelReplace() (Expr, error) {
	p.next()
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	inner, err := p.binary(0)
	if err != nil {
		return nil, err
	}
	lr := &LabelReplace{Inner: inner}
	for _, dst := range []*string{&lr.Dst, &lr.Replacement, &lr.Src, &lr.Regex} {
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
		if *dst, err = p.expectString(); err != nil {
			return nil, err
		}
	}
	if lr.re, err = regexp.Compile("^(?s:" + lr.Regex + ")$"); err != nil {
		return nil, p.errorf(p.peek(), "invalid regular expression in label_replace: %v", err)
	}
	return lr, p.expectOp(")")
}

func (p *parser) grouping() (*Grouping, error) {
	if !p.isIdent("by") && !p.isIdent("without") {
		return nil, nil
	}
	g := &Grouping{Without: p.next().text == "without"}
	var err error
	g.Labels, err = p.labelList()
	return g, err
}

func (p *parser) vectorAggr() (Expr, error) {
	v := &VectorAggr{Op: p.next().text}
	var err error
	if v.Grouping, err = p.grouping(); err != nil {
		return nil, err
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	if v.Op == "topk" || v.Op == "bottomk" {
		n := p.next()
		k, err := strconv.ParseFloat(n.text, 64)
		if n.kind != tokNumber || err != nil || k != float64(int64(k)) || k <= 0 {
			return nil, p.errorf(n, "invalid parameter (must be an integer greater than 0) %s(%s", v.Op, n)
		}
		v.Param = k
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
	}
	if v.Inner, err = p.binary(0); err != nil {
		return nil, err
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if v.Grouping == nil {
		if v.Grouping, err = p.grouping(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (p *parser) rangeAggr() (Expr, error) {
	opTok := p.next()
	r := &RangeAggr{Op: opTok.text}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	if r.Op == "quantile_over_time" {
		n := p.next()
		v, err := strconv.ParseFloat(n.text, 64)
		if n.kind != tokNumber || err != nil {
			return nil, p.errorf(n, "quantile_over_time takes a number, got %s", n)
		}
		r.Param = v
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
	}
	parenthesized := p.isOp("(")
	if parenthesized {
		p.next()
	}
	if !p.isOp("{") {
		return nil, p.errorf(p.peek(), "%s takes a log query with a range, got %s", r.Op, p.peek())
	}
	log, rng, unwrap, err := p.logPipeline(true)
	if err != nil {
		return nil, err
	}
	if parenthesized {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	r.Log, r.Unwrap = log, unwrap
	if rng == "" {
		t := p.next()
		if t.kind != tokRange {
			return nil, p.errorf(t, "%s needs a range such as [5m], got %s", r.Op, t)
		}
		rng = t.text
	}
	if r.Range, err = ParseDuration(rng); err != nil || r.Range <= 0 {
		return nil, p.errorf(opTok, "invalid range [%s]", rng)
	}
	if p.isIdent("offset") {
		p.next()
		neg := p.isOp("-")
		if neg {
			p.next()
		}
		t := p.next()
		if r.Offset, err = ParseDuration(t.text); err != nil {
			return nil, p.errorf(t, "invalid offset %s", t)
		}
		if neg {
			r.Offset = -r.Offset
		}
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if r.Grouping, err = p.grouping(); err != nil {
		return nil, err
	}
	switch {
	case slices.Contains(needUnwrap, r.Op) && r.Unwrap == nil:
		return nil, p.errorf(opTok, "invalid aggregation %s without unwrap", r.Op)
	case slices.Contains(noUnwrap, r.Op) && r.Unwrap != nil:
		return nil, p.errorf(opTok, "invalid aggregation %s with unwrap", r.Op)
	case r.Grouping != nil && !slices.Contains(groupingOps, r.Op):
		return nil, p.errorf(opTok, "grouping not allowed for %s aggregation", r.Op)
	}
	return r, nil
}
