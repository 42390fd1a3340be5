package logql

// The grammar of log queries: selectors, line filters, parsers, label
// filters, formatting stages and unwrap.

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

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
		case t.kind == tokOp && (t.text == "|=" || t.text == "!=" || t.text == "|~" || t.text == "!~" || t.text == "|>" || t.text == "!>"):
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
	if f.Op == LinePattern || f.Op == LineNotPattern {
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
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
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
