package traceql

// maxConditionGroups bounds the OR expansion of ConditionGroups (upstream
// lenient_extract.go DefaultMaxConditionGroupsPerTagQuery).
const maxConditionGroups = 100

// TagFilter is the filter a tag request's q narrows the spans by, read
// as upstream's traceql.ExtractConditionGroups reads it
// (pkg/traceql/lenient_extract.go): a q that does not parse, or whose
// spanset is not a single filter (a structural or spanset operator), or
// whose filter places no condition, filters nothing (nil). The tag
// APIs never refuse a q: Grafana's autocomplete sends the query being
// typed.
func TagFilter(q string) *Filter {
	parsed, err := Parse(q)
	if err != nil {
		return nil
	}
	f, ok := parsed.Spans.(Filter)
	if !ok || f.Cond == nil {
		return nil
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
