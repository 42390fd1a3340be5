package traceql

import "strings"

// maxConditionGroups bounds the OR expansion of ConditionGroups (upstream
// lenient_extract.go DefaultMaxConditionGroupsPerTagQuery).
const maxConditionGroups = 100

// TagFilter is the filter a tag request's q narrows the spans by, read
// as upstream's traceql.ExtractConditionGroups reads it
// (pkg/traceql/lenient_extract.go): a q that does not parse, even with
// its incomplete comparisons taken as true (completed), or whose spanset
// is not a single filter (a structural or spanset operator), or whose
// filter places no condition, filters nothing (nil). The tag APIs never
// refuse a q: Grafana's autocomplete sends the query being typed.
func TagFilter(q string) *Filter {
	parsed, err := Parse(q)
	if err != nil {
		if parsed, err = Parse(completed(q)); err != nil {
			return nil
		}
	}
	f, ok := parsed.Spans.(Filter)
	if always, lit := f.Cond.(Literal); !ok || f.Cond == nil || lit && always.B {
		return nil // no condition, or only true (what a completed q may leave)
	}
	return &f
}

// Group is one AND-connected set of conditions.
type Group []Expr

// ConditionGroups expands a filter's condition into OR-connected groups
// of AND-connected conditions, as upstream's splitReqConditions does: a
// bare attribute is no condition (upstream's OpNone, a fetch hint), and
// a group left without conditions makes the whole filter match every
// span (nil). ok is false when the expansion passes maxConditionGroups.
func ConditionGroups(e Expr) (groups []Group, ok bool) {
	groups, ok = expand(e)
	if !ok {
		return nil, false
	}
	for i, g := range groups {
		var kept Group
		for _, c := range g {
			if _, bare := c.(Attribute); !bare {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			return nil, true
		}
		groups[i] = kept
	}
	return groups, true
}

// expand is e in disjunctive form: || joins the groups of both sides,
// && crosses them; negations and literals are conditions as they stand.
func expand(e Expr) ([]Group, bool) {
	l, ok := e.(Logical)
	if !ok {
		return []Group{{e}}, true
	}
	lg, lok := expand(l.L)
	rg, rok := expand(l.R)
	if !lok || !rok {
		return nil, false
	}
	if l.Op == "||" {
		out := append(lg, rg...)
		return out, len(out) <= maxConditionGroups
	}
	if len(lg)*len(rg) > maxConditionGroups {
		return nil, false
	}
	var out []Group
	for _, a := range lg {
		for _, b := range rg {
			out = append(out, append(append(Group{}, a...), b...))
		}
	}
	return out, true
}

// Or is the filter of groups: any group's conditions all holding.
func Or(groups []Group) Filter {
	var cond Expr
	for _, g := range groups {
		var and Expr
		for _, c := range g {
			if and == nil {
				and = c
			} else {
				and = Logical{Op: "&&", L: and, R: c}
			}
		}
		if cond == nil {
			cond = and
		} else {
			cond = Logical{Op: "||", L: cond, R: and}
		}
	}
	return Filter{Cond: cond}
}

// comparisons are the operators of a comparison.
var comparisons = map[string]bool{"=": true, "!=": true, "=~": true, "!~": true, ">": true, ">=": true, "<": true, "<=": true}

// completed is q as it is being typed, made whole as upstream's
// ParseLenient makes it (pkg/traceql/lenient_parser.go): before the first
// pipe, an attribute and a comparison with nothing after it (the end, a
// closing brace or parenthesis, && or ||) becomes true, which places no
// condition in an AND and matches everything in an OR; unclosed braces
// are closed. "" when q does not lex.
func completed(q string) string {
	toks, err := lex(q)
	if err != nil {
		return ""
	}
	ends := func(t token) bool {
		return t.kind == tEOF || t.kind == tOp && (t.text == "}" || t.text == ")" || t.text == "&&" || t.text == "||")
	}
	var b strings.Builder
	from, depth := 0, 0
	for i := 0; i < len(toks) && toks[i].kind != tEOF; i++ {
		t := toks[i]
		if t.kind == tOp && t.text == "|" {
			break
		}
		switch {
		case t.kind == tOp && t.text == "{":
			depth++
		case t.kind == tOp && t.text == "}":
			depth--
		case (t.kind == tAttr || t.kind == tIdent) && i+2 < len(toks) && toks[i+1].kind == tOp && comparisons[toks[i+1].text] && ends(toks[i+2]):
			b.WriteString(q[from:t.pos])
			b.WriteString("true")
			from = toks[i+1].pos + len(toks[i+1].text)
			i++
		}
	}
	b.WriteString(q[from:])
	for ; depth > 0; depth-- {
		b.WriteString(" }")
	}
	return b.String()
}
