package logql

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
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
	noUnwrap = []string{"count_over_time", "bytes_over_time", "bytes_rate", "absent_over_time"}
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
}

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

func (p *parser) logExpr() (Expr, error) {
	log, rng, unwrap, err := p.logPipeline(false)
	if err != nil {
		return nil, err
	}
	if rng != "" || unwrap != nil {
		return nil, p.errorf(p.peek(), "a range or unwrap belongs inside a range aggregation")
	}
	return log, nil
}

// logPipeline parses a selector and its stages; in a range aggregation
// (inRange) the range may follow the selector or the pipeline, and the
// pipeline may end with unwrap.
func (p *parser) logPipeline(inRange bool) (*LogExpr, string, *Unwrap, error) {
	ms, err := p.selector()
	if err != nil {
		return nil, "", nil, err
	}
	log := &LogExpr{Matchers: ms}
	var rng string
	var unwrap *Unwrap
	for {
		t := p.peek()
		switch {
		case t.kind == tokRange && inRange && rng == "":
			p.next()
			rng = t.text
			continue
		case t.kind == tokOp && (t.text == "|=" || t.text == "!=" || t.text == "|~" || t.text == "!~" || t.text == "|>"):
			if unwrap != nil {
				return nil, "", nil, p.errorf(t, "only label filters may follow unwrap")
			}
			f, err := p.lineFilter()
			if err != nil {
				return nil, "", nil, err
			}
			log.Stages = append(log.Stages, f)
			continue
		case t.kind == tokOp && t.text == "|":
			p.next()
			if unwrap != nil {
				f, err := p.labelFilter()
				if err != nil {
					return nil, "", nil, err
				}
				unwrap.PostFilters = append(unwrap.PostFilters, f)
				continue
			}
			if p.isIdent("unwrap") {
				if !inRange {
					return nil, "", nil, p.errorf(p.peek(), "unwrap belongs inside a range aggregation")
				}
				if unwrap, err = p.unwrap(); err != nil {
					return nil, "", nil, err
				}
				continue
			}
			s, err := p.stage()
			if err != nil {
				return nil, "", nil, err
			}
			log.Stages = append(log.Stages, s)
			continue
		}
		return log, rng, unwrap, nil
	}
}

func (p *parser) selector() ([]*Matcher, error) {
	if err := p.expectOp("{"); err != nil {
		return nil, err
	}
	var ms []*Matcher
	err := p.list("}", func() error {
		m, err := p.matcher()
		ms = append(ms, m)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, p.errorf(p.peek(), "queries require at least one regexp or equality matcher that does not have an empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but app=~\".+\" will")
	}
	// Loki refuses a selector that every stream matches (Loki
	// pkg/logql/syntax/parser.go ParseMatchers).
	for _, m := range ms {
		if !m.Matches("") {
			return ms, nil
		}
	}
	return nil, p.errorf(p.peek(), "queries require at least one regexp or equality matcher that does not have an empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but app=~\".+\" will")
}

// matcher parses name op "value".
func (p *parser) matcher() (*Matcher, error) {
	name, err := p.expectIdent()
	if err != nil {
		return nil, err
	}
	opTok := p.next()
	op := MatchOp(opTok.text)
	if opTok.kind != tokOp || (op != MatchEq && op != MatchNotEq && op != MatchRe && op != MatchNotRe) {
		return nil, p.errorf(opTok, "expected a matcher operator (=, !=, =~, !~) after %s, got %s", name, opTok)
	}
	v, err := p.expectString()
	if err != nil {
		return nil, err
	}
	return NewMatcher(name, op, v)
}

// NewMatcher makes a matcher, compiling its regular expression.
func NewMatcher(name string, op MatchOp, value string) (*Matcher, error) {
	m := &Matcher{Name: name, Op: op, Value: value}
	if op == MatchRe || op == MatchNotRe {
		re, err := regexp.Compile("^(?s:" + value + ")$")
		if err != nil {
			return nil, &ParseError{Msg: fmt.Sprintf("invalid regular expression %q: %v", value, err)}
		}
		m.re = re
	}
	return m, nil
}

func (p *parser) lineFilter() (Stage, error) {
	f := &LineFilter{Op: LineFilterOp(p.next().text)}
	for {
		v, err := p.expectString()
		if err != nil {
			return nil, err
		}
		f.Values = append(f.Values, v)
		if !p.isIdent("or") || p.peekAt(1).kind != tokString {
			break
		}
		p.next()
	}
	if f.Op == LineMatch || f.Op == LineNotMatch {
		for _, v := range f.Values {
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, &ParseError{Msg: fmt.Sprintf("invalid line filter regular expression %q: %v", v, err)}
			}
			f.res = append(f.res, re)
		}
	}
	if f.Op == LinePattern {
		for _, v := range f.Values {
			pp, err := compilePattern(v, false)
			if err != nil {
				return nil, err
			}
			f.pats = append(f.pats, pp)
		}
	}
	return f, nil
}

// stage parses what follows a "|" (unwrap aside).
func (p *parser) stage() (Stage, error) {
	t := p.peek()
	if t.kind == tokIdent {
		switch t.text {
		case "json", "logfmt":
			return p.extractParser()
		case "regexp", "pattern":
			p.next()
			arg, err := p.expectString()
			if err != nil {
				return nil, err
			}
			ps := &Parser{Kind: ParserKind(t.text), Arg: arg}
			if t.text == "regexp" {
				if ps.re, err = compileRegexpParser(arg); err != nil {
					return nil, err
				}
			} else if ps.pattern, err = compilePattern(arg, true); err != nil {
				return nil, err
			}
			return ps, nil
		case "unpack":
			p.next()
			return &Parser{Kind: ParseUnpack}, nil
		case "line_format":
			p.next()
			s, err := p.expectString()
			if err != nil {
				return nil, err
			}
			tmpl, err := newTemplate(s)
			if err != nil {
				return nil, err
			}
			return &LineFormat{Template: s, tmpl: tmpl}, nil
		case "label_format":
			return p.labelFormat()
		case "drop", "keep":
			return p.dropKeep()
		case "decolorize":
			p.next()
			return &Decolorize{}, nil
		}
	}
	f, err := p.labelFilter()
	if err != nil {
		return nil, err
	}
	return &LabelFilterStage{Filter: f}, nil
}

func (p *parser) extractParser() (Stage, error) {
	ps := &Parser{Kind: ParserKind(p.next().text)}
	for p.peek().kind == tokFlag {
		t := p.next()
		switch {
		case ps.Kind == ParseLogfmt && t.text == "--strict":
			ps.Strict = true
		case ps.Kind == ParseLogfmt && t.text == "--keep-empty":
			ps.KeepEmpty = true
		default:
			return nil, p.errorf(t, "unknown flag %s of %s", t.text, ps.Kind)
		}
	}
	for p.peek().kind == tokIdent {
		// json a, b="x.y": a label, with an expression when = follows.
		name := p.next().text
		param := ExtractParam{Label: name}
		if p.isOp("=") {
			p.next()
			e, err := p.expectString()
			if err != nil {
				return nil, err
			}
			param.Expr = e
		}
		ps.Params = append(ps.Params, param)
		if !p.isOp(",") {
			break
		}
		p.next()
	}
	return ps, nil
}

func (p *parser) labelFormat() (Stage, error) {
	p.next()
	lf := &LabelFormat{}
	for {
		dst, err := p.expectIdent()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		item := LabelFormatItem{Dst: dst}
		t := p.next()
		switch t.kind {
		case tokIdent:
			item.Src = t.text
		case tokString:
			item.Template = t.text
			if item.tmpl, err = newTemplate(t.text); err != nil {
				return nil, err
			}
		default:
			return nil, p.errorf(t, "label_format takes a label or a template, got %s", t)
		}
		lf.Items = append(lf.Items, item)
		if !p.isOp(",") {
			return lf, nil
		}
		p.next()
	}
}

func (p *parser) dropKeep() (Stage, error) {
	d := &DropKeep{Keep: p.next().text == "keep"}
	for {
		if p.peek().kind != tokIdent {
			return nil, p.errorf(p.peek(), "expected a label name, got %s", p.peek())
		}
		if next := p.peekAt(1); next.kind == tokOp && (next.text == "=" || next.text == "!=" || next.text == "=~" || next.text == "!~") {
			m, err := p.matcher()
			if err != nil {
				return nil, err
			}
			d.Items = append(d.Items, DropItem{Name: m.Name, Matcher: m})
		} else {
			d.Items = append(d.Items, DropItem{Name: p.next().text})
		}
		if !p.isOp(",") {
			return d, nil
		}
		p.next()
	}
}

func (p *parser) unwrap() (*Unwrap, error) {
	p.next()
	u := &Unwrap{}
	t := p.next()
	if t.kind != tokIdent {
		return nil, p.errorf(t, "unwrap takes a label, got %s", t)
	}
	if p.isOp("(") {
		switch t.text {
		case "duration", "duration_seconds", "bytes":
		default:
			return nil, p.errorf(t, "unknown unwrap conversion %s", t.text)
		}
		u.Conv = t.text
		p.next()
		name, err := p.expectIdent()
		if err != nil {
			return nil, err
		}
		u.Label = name
		return u, p.expectOp(")")
	}
	u.Label = t.text
	return u, nil
}

// labelFilter parses label filters joined by or; and, "," and juxtaposition bind tighter.
func (p *parser) labelFilter() (LabelFilter, error) {
	l, err := p.labelFilterAnd()
	if err != nil {
		return nil, err
	}
	for p.isIdent("or") {
		p.next()
		r, err := p.labelFilterAnd()
		if err != nil {
			return nil, err
		}
		l = &BinaryFilter{Left: l, Right: r}
	}
	return l, nil
}

func (p *parser) labelFilterAnd() (LabelFilter, error) {
	l, err := p.labelFilterPrimary()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.isIdent("and") || p.isOp(","):
			p.next()
		case p.peek().kind == tokIdent && !p.isIdent("or") && p.peekAt(1).kind == tokOp && isFilterOp(p.peekAt(1).text),
			p.isOp("("):
		default:
			return l, nil
		}
		r, err := p.labelFilterPrimary()
		if err != nil {
			return nil, err
		}
		l = &BinaryFilter{And: true, Left: l, Right: r}
	}
}

func isFilterOp(s string) bool {
	return slices.Contains(comparisons, s) || s == "=" || s == "=~" || s == "!~"
}

func (p *parser) labelFilterPrimary() (LabelFilter, error) {
	if p.isOp("(") {
		p.next()
		f, err := p.labelFilter()
		if err != nil {
			return nil, err
		}
		return f, p.expectOp(")")
	}
	name, err := p.expectIdent()
	if err != nil {
		return nil, err
	}
	opTok := p.next()
	if opTok.kind != tokOp || !isFilterOp(opTok.text) {
		return nil, p.errorf(opTok, "expected a label filter operator after %s, got %s", name, opTok)
	}
	v := p.next()
	switch v.kind {
	case tokString:
		op := MatchOp(opTok.text)
		if op == matchEqEq {
			op = MatchEq
		}
		if op != MatchEq && op != MatchNotEq && op != MatchRe && op != MatchNotRe {
			return nil, p.errorf(opTok, "operator %s cannot compare with a string", opTok.text)
		}
		m, err := NewMatcher(name, op, v.text)
		if err != nil {
			return nil, err
		}
		return &StringFilter{Matcher: m}, nil
	case tokNumber, tokDuration, tokBytes:
		op := CmpOp(opTok.text)
		if op == "=" {
			op = "=="
		}
		if !slices.Contains(comparisons, string(op)) {
			return nil, p.errorf(opTok, "operator %s cannot compare with a number", opTok.text)
		}
		switch v.kind {
		case tokDuration:
			d, _ := ParseDuration(v.text)
			return &DurationFilter{Name: name, Op: op, Value: d}, nil
		case tokBytes:
			b, _ := ParseBytes(v.text)
			return &BytesFilter{Name: name, Op: op, Value: b}, nil
		}
		f, err := strconv.ParseFloat(v.text, 64)
		if err != nil {
			return nil, p.errorf(v, "malformed number %s", v.text)
		}
		return &NumberFilter{Name: name, Op: op, Value: f}, nil
	case tokOp:
		if v.text == "-" && p.peek().kind == tokNumber {
			n := p.next()
			f, err := strconv.ParseFloat(n.text, 64)
			if err != nil {
				return nil, p.errorf(n, "malformed number %s", n.text)
			}
			op := CmpOp(opTok.text)
			if op == "=" {
				op = "=="
			}
			return &NumberFilter{Name: name, Op: op, Value: -f}, nil
		}
	}
	return nil, p.errorf(v, "expected a value after %s %s, got %s", name, opTok.text, v)
}

// durationOf is a Go duration's seconds, for unwrap duration().
func durationOf(s string) (float64, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return d.Seconds(), nil
}
