package query

import (
	"fmt"
	"maps"
	"slices"
)

// The Iceberg reader plans each table reference of a checked query before
// it runs: which columns the query can use (the scan reads no other) and
// which of its predicates the scan can apply (so that Iceberg skips the
// files, by partition and column statistics, that hold no row they keep).
// Both read the tree as DuckDB parsed it and err on the side of reading
// more: a column is kept when any name in the query could mean it, and a
// predicate is pushed only where it is certain that DuckDB drops every row
// it rejects, whatever the rest of the query does with the table.

// refPlan is how one table reference of a query is read.
type refPlan struct {
	tableRef
	// binding is the lower-cased name the query qualifies the reference's
	// columns by: its alias, or the table's name.
	binding string
	// view is the name the reference is renamed to in the query that runs:
	// its own view over its own scan.
	view string
	// columns are the lower-cased names of the table's columns the query
	// names, unless all: a star, a positional reference, a natural join,
	// renamed columns or the whole row.
	columns map[string]bool
	all     bool
	// preds are the predicates the scan applies.
	preds []pred
}

// pred is a comparison of a column with constant expressions (still to be
// evaluated, see constants), one for each operator but "in" and "isnull";
// or, of op "or", a disjunction of conjunctions of such (anyOf: a
// condition with an OR, `end_time IS NULL OR end_time >= …`, prunes files
// too, where a query of one branch per disjunct cost a scan each to plan).
type pred struct {
	column string           // lower-cased; "" of an "or"
	op     string           // =, <, <=, >, >=, in, isnull or or
	exprs  []map[string]any // constant expressions of the parsed tree
	anyOf  [][]pred
}

// constants are p's constant expressions in the order their values are
// evaluated and bound (an "or"'s in its disjuncts' order).
func (p pred) constants() []map[string]any {
	if p.op != "or" {
		return p.exprs
	}
	var out []map[string]any
	for _, conj := range p.anyOf {
		for _, q := range conj {
			out = append(out, q.constants()...)
		}
	}
	return out
}

// trueOfNull says whether p may hold of a row of NULLs (IS NULL, in it or
// in one of its disjuncts).
func (p pred) trueOfNull() bool {
	if p.op == "isnull" {
		return true
	}
	for _, conj := range p.anyOf {
		if !slices.ContainsFunc(conj, func(q pred) bool { return !q.trueOfNull() }) {
			return true
		}
	}
	return false
}

// tableColumns says, for a table of the scope, the lower-cased names of
// its columns that a predicate on may be pushed (nil: none) and whether it
// has the column at all.
type tableColumns func(table, column string) (exists, pushable bool)

// planner plans the references of one checked query.
type planner struct {
	plans      []*refPlan
	byView     map[string]*refPlan
	columns    tableColumns
	consistent map[string]bool // scalar functions that answer the same for the same arguments
}

// planRefs renames each table reference of the checked query to a view of
// its own (prefix + its index), makes the CTEs the query names more than
// once materialized (so that a reference in them is scanned once), and
// plans the columns and predicates of each reference.
func planRefs(c *checker, prefix string, columns tableColumns, consistent map[string]bool) []*refPlan {
	p := &planner{byView: map[string]*refPlan{}, columns: columns, consistent: consistent}
	for i, r := range c.refs {
		name, _ := r.obj["table_name"].(string)
		alias, _ := r.obj["alias"].(string)
		if alias == "" {
			// The query may qualify columns by the table's name.
			alias = name
			r.obj["alias"] = name
		}
		rp := &refPlan{tableRef: r, binding: foldName(alias), view: fmt.Sprintf("%s%d", prefix, i), columns: map[string]bool{}}
		r.obj["table_name"] = rp.view
		if renamed, _ := r.obj["column_name_alias"].([]any); len(renamed) > 0 {
			rp.all = true // t(a, b) names columns by position
		}
		p.plans = append(p.plans, rp)
		p.byView[rp.view] = rp
	}
	for _, cte := range c.ctes {
		name, _ := cte["key"].(string)
		body, _ := cte["value"].(map[string]any)
		// A CTE named twice would be inlined twice (a scan twice) if DuckDB
		// chose to; materialized, its body runs once. A recursive one runs
		// again for each step: its references are materialized instead.
		if c.cteUses[foldName(name)] > 1 && body != nil && !isRecursive(body) {
			body["materialized"] = "CTE_MATERIALIZE_ALWAYS"
		}
	}
	stmts, _ := c.doc["statements"].([]any)
	stmt, _ := stmts[0].(map[string]any)
	p.walk(stmt["node"], nil)
	return p.plans
}

// walk plans what v holds; leaves are the references of the FROM clause of
// the innermost SELECT around v.
func (p *planner) walk(v any, leaves []*refPlan) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			p.walk(e, leaves)
		}
	case map[string]any:
		if x["type"] == "SELECT_NODE" {
			leaves = p.selectNode(x)
		}
		switch x["class"] {
		case "COLUMN_REF":
			p.columnRef(x)
		case "STAR", "POSITIONAL_REFERENCE":
			// *, COLUMNS(…), #n: columns of this SELECT's FROM by position
			// or pattern; t.* those of t, wherever t is.
			for _, l := range leaves {
				l.all = true
			}
			if rel, _ := x["relation_name"].(string); rel != "" {
				for _, rp := range p.plans {
					if rp.binding == foldName(rel) {
						rp.all = true
					}
				}
			}
		}
		if x["type"] == "JOIN" {
			if x["ref_type"] == "NATURAL" {
				p.allIn(x)
			}
			using, _ := x["using_columns"].([]any)
			for _, u := range using {
				if name, ok := u.(string); ok {
					p.name(foldName(name))
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p.walk(x[k], leaves)
		}
	}
}

// allIn makes every reference of the FROM clause t read all columns.
func (p *planner) allIn(t map[string]any) {
	switch t["type"] {
	case "BASE_TABLE":
		name, _ := t["table_name"].(string)
		if rp := p.byView[name]; rp != nil {
			rp.all = true
		}
	case "JOIN":
		left, _ := t["left"].(map[string]any)
		right, _ := t["right"].(map[string]any)
		p.allIn(left)
		p.allIn(right)
	}
}

// columnRef keeps every column the name could mean: any part of a.b.c may
// be a column (of a table, or a struct column); a lone name that is a
// reference's binding is its whole row.
func (p *planner) columnRef(o map[string]any) {
	parts, _ := o["column_names"].([]any)
	for _, part := range parts {
		s, _ := part.(string)
		p.name(foldName(s))
	}
	if len(parts) == 1 {
		s, _ := parts[0].(string)
		for _, rp := range p.plans {
			if rp.binding == foldName(s) {
				rp.all = true
			}
		}
	}
}

// name keeps column name of every reference whose table has it.
func (p *planner) name(name string) {
	for _, rp := range p.plans {
		if exists, _ := p.columns(rp.table, name); exists {
			rp.columns[name] = true
		}
	}
}

// leaf is a reference in a FROM clause: clean when no join between the
// clause's root and it changes which of its rows a predicate above keeps
// (an ASOF join picks the nearest row, a positional one pairs by position,
// a semi or anti join hides the table's columns).
type leaf struct {
	plan  *refPlan
	clean bool
	// nulled: an outer join above the reference fills its columns with
	// NULLs for a row of the other side without a match, so a predicate
	// true of NULL (IS NULL) is not the scan's to apply.
	nulled bool
}

// selectNode pushes the predicates of a SELECT (its WHERE, the ON of its
// inner joins) to the references of its FROM clause, and returns those.
func (p *planner) selectNode(n map[string]any) []*refPlan {
	from, _ := n["from_table"].(map[string]any)
	leaves := p.leavesOf(from)
	// USING SAMPLE draws from what WHERE keeps.
	if n["sample"] == nil {
		p.push(conjuncts(n["where_clause"]), leaves)
	}
	plans := make([]*refPlan, len(leaves))
	for i, l := range leaves {
		plans[i] = l.plan
	}
	return plans
}

// leavesOf are our references in the FROM clause t (through joins, not
// into subqueries), pushing the ON conjuncts of inner joins on the way.
func (p *planner) leavesOf(t map[string]any) []leaf {
	switch t["type"] {
	case "BASE_TABLE":
		name, _ := t["table_name"].(string)
		rp := p.byView[name]
		if rp == nil {
			return nil // a CTE
		}
		renamed, _ := t["column_name_alias"].([]any)
		return []leaf{{plan: rp, clean: t["sample"] == nil && len(renamed) == 0}}
	case "JOIN":
		left, _ := t["left"].(map[string]any)
		right, _ := t["right"].(map[string]any)
		lefts := p.leavesOf(left)
		nLeft := len(lefts)
		leaves := append(lefts, p.leavesOf(right)...)
		joinType, _ := t["join_type"].(string)
		refType, _ := t["ref_type"].(string)
		if joinType == "INNER" && refType == "REGULAR" {
			p.push(conjuncts(t["condition"]), leaves)
		}
		if !joinKeepsRows[joinType] || !refKeepsRows[refType] {
			for i := range leaves {
				leaves[i].clean = false
			}
		}
		// The sides an outer join fills with NULLs: LEFT's right,
		// RIGHT's left, both of a FULL (OUTER) one.
		for i := range leaves {
			if (i < nLeft && (joinType == "RIGHT" || joinType == "OUTER")) || (i >= nLeft && (joinType == "LEFT" || joinType == "OUTER")) {
				leaves[i].nulled = true
			}
		}
		return leaves
	}
	return nil
}

// A predicate above a join of these kinds that rejects a row of a table
// (being false or unknown on its columns, as a comparison with a constant
// is on NULL) may drop the row before the join: every row the join makes
// of it is rejected, and what the join makes of the others does not
// change (an outer join's row without a match has NULL for the table's
// columns: rejected too).
var (
	joinKeepsRows = map[string]bool{"INNER": true, "LEFT": true, "RIGHT": true, "OUTER": true}
	refKeepsRows  = map[string]bool{"REGULAR": true, "CROSS": true, "NATURAL": true, "DEPENDENT": true}
)

// conjuncts are the terms of e's top-level AND.
func conjuncts(e any) []map[string]any {
	o, ok := e.(map[string]any)
	if !ok {
		return nil
	}
	if o["class"] == "CONJUNCTION" && o["type"] == "CONJUNCTION_AND" {
		var out []map[string]any
		children, _ := o["children"].([]any)
		for _, c := range children {
			out = append(out, conjuncts(c)...)
		}
		return out
	}
	return []map[string]any{o}
}

// comparisons maps DuckDB's comparison types to the operators pushed, and
// flipped gives each the operator with its sides swapped.
var (
	comparisons = map[string]string{"COMPARE_EQUAL": "=", "COMPARE_LESSTHAN": "<", "COMPARE_LESSTHANOREQUALTO": "<=",
		"COMPARE_GREATERTHAN": ">", "COMPARE_GREATERTHANOREQUALTO": ">="}
	flipped = map[string]string{"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
)

// push pushes each conjunct that compares a column of one of the clean
// leaves with constants to that leaf's scan.
func (p *planner) push(conjs []map[string]any, leaves []leaf) {
	for _, c := range conjs {
		for _, t := range p.terms(c) {
			for _, l := range leaves {
				if !l.clean {
					continue
				}
				pr, ok := p.pred(l.plan, t)
				if !ok || l.nulled && pr.trueOfNull() {
					// IS NULL is true of the NULLs an outer join
					// fills in: it rejects no row the join makes
					// of an unmatched one.
					continue
				}
				l.plan.preds = append(l.plan.preds, pr)
			}
		}
	}
}

// pred is term t as a predicate of rp's scan, if it is one: a disjunct of
// an "or" keeps those of its terms that are (fewer conditions keep more
// rows, never fewer), and with none of them the "or" is none.
func (p *planner) pred(rp *refPlan, t term) (pred, bool) {
	if t.op != "or" {
		col, ok := p.resolve(rp, t.col)
		return pred{column: col, op: t.op, exprs: t.exprs}, ok
	}
	out := pred{op: "or", anyOf: make([][]pred, 0, len(t.anyOf))}
	for _, conj := range t.anyOf {
		var preds []pred
		for _, u := range conj {
			if q, ok := p.pred(rp, u); ok {
				preds = append(preds, q)
			}
		}
		if len(preds) == 0 {
			return pred{}, false
		}
		out.anyOf = append(out.anyOf, preds)
	}
	return out, true
}

// term is a conjunct read as column op constants, or, of op "or", as a
// disjunction of conjunctions of such.
type term struct {
	col   []any // the column's name parts
	op    string
	exprs []map[string]any
	anyOf [][]term
}

// terms reads conjunct c as comparisons of a column with constant
// expressions (a BETWEEN is two), or none.
func (p *planner) terms(c map[string]any) []term {
	typ, _ := c["type"].(string)
	switch c["class"] {
	case "CONJUNCTION":
		if typ != "CONJUNCTION_OR" {
			return nil
		}
		// Each disjunct a conjunction of terms; one of none makes the
		// OR none (it may hold of any row).
		children, _ := c["children"].([]any)
		or := term{op: "or"}
		for _, d := range children {
			var conj []term
			for _, cc := range conjuncts(d) {
				conj = append(conj, p.terms(cc)...)
			}
			if len(conj) == 0 {
				return nil
			}
			or.anyOf = append(or.anyOf, conj)
		}
		return []term{or}
	case "COMPARISON":
		op, ok := comparisons[typ]
		if !ok {
			return nil
		}
		left, _ := c["left"].(map[string]any)
		right, _ := c["right"].(map[string]any)
		if col, ok := columnParts(left); ok && p.constant(right) {
			return []term{{col: col, op: op, exprs: []map[string]any{right}}}
		}
		if col, ok := columnParts(right); ok && p.constant(left) {
			return []term{{col: col, op: flipped[op], exprs: []map[string]any{left}}}
		}
	case "BETWEEN":
		input, _ := c["input"].(map[string]any)
		lower, _ := c["lower"].(map[string]any)
		upper, _ := c["upper"].(map[string]any)
		if col, ok := columnParts(input); ok && p.constant(lower) && p.constant(upper) {
			return []term{{col: col, op: ">=", exprs: []map[string]any{lower}}, {col: col, op: "<=", exprs: []map[string]any{upper}}}
		}
	case "OPERATOR":
		children, _ := c["children"].([]any)
		if typ == "OPERATOR_IS_NULL" && len(children) == 1 {
			// No constant: Iceberg's null counts and a partition's
			// nulls prune as DuckDB's IS NULL selects (Tempo's trace by
			// id reads a trace's spans without a start so).
			first, _ := children[0].(map[string]any)
			if col, ok := columnParts(first); ok {
				return []term{{col: col, op: "isnull"}}
			}
			return nil
		}
		if typ != "COMPARE_IN" || len(children) < 2 {
			return nil
		}
		first, _ := children[0].(map[string]any)
		col, ok := columnParts(first)
		if !ok {
			return nil
		}
		exprs := make([]map[string]any, 0, len(children)-1)
		for _, e := range children[1:] {
			o, _ := e.(map[string]any)
			if !p.constant(o) {
				return nil
			}
			exprs = append(exprs, o)
		}
		return []term{{col: col, op: "in", exprs: exprs}}
	}
	return nil
}

// columnParts are the name parts of a column reference.
func columnParts(o map[string]any) ([]any, bool) {
	if o["class"] != "COLUMN_REF" {
		return nil, false
	}
	parts, _ := o["column_names"].([]any)
	return parts, len(parts) == 1 || len(parts) == 2
}

// constant says whether e is an expression of constants alone that
// answers the same whenever it runs: constants, parameters (their values
// are bound when the query runs, and the constants are evaluated with
// them: see session.constants), casts, and scalar functions DuckDB calls
// consistent (not now(), not random()).
func (p *planner) constant(e map[string]any) bool {
	switch e["class"] {
	case "CONSTANT", "PARAMETER":
		return true
	case "CAST":
		child, _ := e["child"].(map[string]any)
		return p.constant(child)
	case "FUNCTION":
		name, _ := e["function_name"].(string)
		if !p.consistent[foldName(name)] || e["filter"] != nil || e["distinct"] == true {
			return false
		}
		if ob, _ := e["order_bys"].(map[string]any); ob != nil {
			if orders, _ := ob["orders"].([]any); len(orders) > 0 {
				return false
			}
		}
		children, _ := e["children"].([]any)
		for _, c := range children {
			o, _ := c.(map[string]any)
			if !p.constant(o) {
				return false
			}
		}
		return true
	}
	return false
}

// resolve says which column of rp's table the name parts mean, if they
// mean one of its pushable columns. A lone name means rp's column if its
// table has one so named: DuckDB binds a name to the innermost FROM that
// has it and refuses one that two tables there have (but for a USING
// column, which is equal in both, or null where the row is dropped). A
// qualified name means rp's column if the qualifier is rp's binding.
func (p *planner) resolve(rp *refPlan, parts []any) (string, bool) {
	name, _ := parts[len(parts)-1].(string)
	name = foldName(name)
	if len(parts) == 2 {
		q, _ := parts[0].(string)
		if foldName(q) != rp.binding {
			return "", false
		}
	}
	if _, pushable := p.columns(rp.table, name); !pushable {
		return "", false
	}
	return name, true
}
