package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// The checker reads a query as DuckDB's own parser read it (the JSON of
// json_serialize_sql), never its text: comments, quoting and several
// statements are the parser's business, and what runs is the parsed
// query printed back (json_deserialize_sql), itself parsed and checked
// again (DuckDB's printer is not its parser's inverse), so the query
// checked is the query run. It admits one SELECT whose every table
// reference is an unqualified name of a table the scope may read (which
// the engine binds to the scope's rows) or of a CTE in scope, whose every
// function is one of DuckDB's own scalar, aggregate or window functions
// (or macros) that neither reads outside state nor changes it, and whose
// every type is one of DuckDB's own. Everything else is refused: table
// functions (read_parquet, glob, duckdb_settings(), …), qualified names
// (main.t, information_schema.tables), time travel (AT), and statements
// that are not SELECTs (json_serialize_sql refuses them itself).

// tableRefTypes are the table references a query may hold: the others
// (TABLE_FUNCTION, SHOW_REF, PIVOT, COLUMN_DATA, DELIM_GET, …) are
// refused.
var tableRefTypes = map[string]bool{"BASE_TABLE": true, "JOIN": true, "SUBQUERY": true, "EXPRESSION_LIST": true, "EMPTY": true}

// checker holds what a scope may name, and records what a checked query
// names, for an engine that rewrites the tree before it runs (Iceberg).
type checker struct {
	tables    map[string]bool // lower-cased names of the tables the scope reads
	functions map[string]bool // lower-cased names of the functions allowed
	types     map[string]bool // lower-cased names of the types the binder finds, allowed

	// doc is the whole parsed document, numbers kept as written
	// (json.Number), so that it can be changed and printed back.
	doc map[string]any
	// refs are the query's references to tables (not to CTEs), in the
	// order met, each the reference's object in doc.
	refs []tableRef
	// cteUses counts the references to each CTE name (lower-cased) in the
	// whole query, whatever scope they are in: an over-count.
	cteUses map[string]int
	// ctes are the CTE definitions (the entries of every WITH clause).
	ctes []map[string]any
	// recursive is how many recursive CTE bodies the walk is in.
	recursive int
}

// tableRef is a reference to a table the scope reads.
type tableRef struct {
	obj   map[string]any // the BASE_TABLE object
	table string         // the table's lower-cased name
	// inRecursive: the reference is in the body of a recursive CTE, which
	// runs again for each step of the recursion.
	inRecursive bool
}

// again is a checker of what c may name, for another query (check keeps
// the state of the query it checked).
func (c *checker) again(tables ...string) *checker {
	all := make(map[string]bool, len(c.tables)+len(tables))
	maps.Copy(all, c.tables)
	for _, t := range tables {
		all[foldName(t)] = true
	}
	return &checker{tables: all, functions: c.functions, types: c.types}
}

// check says why the statement serialized as js may not run, or nil. It
// returns the number of its parameters.
func (c *checker) check(js []byte) (params int, err error) {
	doc, err := decodeParse(js)
	if err != nil {
		return 0, fmt.Errorf("read the parsed query: %w", err)
	}
	if failed, _ := doc["error"].(bool); failed {
		if doc["error_type"] == "not implemented" {
			return 0, &RefusedError{Reason: "only SELECT statements are taken (the endpoint is read-only)"}
		}
		msg, _ := doc["error_message"].(string)
		return 0, &RefusedError{Reason: msg, syntax: doc["error_type"] == "parser"}
	}
	stmts, _ := doc["statements"].([]any)
	if len(stmts) != 1 {
		return 0, &RefusedError{Reason: fmt.Sprintf("one statement per query, got %d", len(stmts))}
	}
	stmt, ok := stmts[0].(map[string]any)
	if !ok {
		return 0, errors.New("read the parsed query: a statement that is not an object")
	}
	c.doc, c.refs, c.ctes, c.cteUses = doc, nil, nil, map[string]int{}
	if err := c.walk(stmt["node"], nil); err != nil {
		return 0, err
	}
	named, _ := stmt["named_param_map"].([]any)
	return len(named), nil
}

// decodeParse decodes json_serialize_sql's JSON, keeping numbers as
// written (json.Number): printed back, a float64 would lose digits (the
// parse holds 2^64-1 for "no location"). A DOUBLE or FLOAT constant that
// is not finite, which DuckDB writes as a bare Infinity, -Infinity or
// NaN (not JSON: 1e400 is the DOUBLE infinity), is read as that word in
// a string (see nonFiniteQuoted), which floatsCast casts to its type.
func decodeParse(js []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(nonFiniteQuoted(js)))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	return doc, nil
}

// nonFiniteWords are how DuckDB's JSON writes a double that is not
// finite, each a token of its own outside a string.
var nonFiniteWords = []string{"-Infinity", "Infinity", "NaN"}

// nonFiniteQuoted is js with each of nonFiniteWords that stands outside a
// string put in one ("Infinity"), which JSON reads; js itself when it has
// none.
func nonFiniteQuoted(js []byte) []byte {
	if !bytes.Contains(js, []byte("Infinity")) && !bytes.Contains(js, []byte("NaN")) {
		return js
	}
	out := make([]byte, 0, len(js)+16)
	inString, escaped := false, false
	for i := 0; i < len(js); i++ {
		ch := js[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			out = append(out, ch)
			continue
		}
		if ch == '"' {
			inString = true
			out = append(out, ch)
			continue
		}
		word := ""
		for _, w := range nonFiniteWords {
			if bytes.HasPrefix(js[i:], []byte(w)) {
				word = w
				break
			}
		}
		if word == "" {
			out = append(out, ch)
			continue
		}
		out = append(out, '"')
		out = append(out, word...)
		out = append(out, '"')
		i += len(word) - 1
	}
	return out
}

// walk checks every object under v; ctes are the CTE names in scope.
func (c *checker) walk(v any, ctes []string) error {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if err := c.walk(e, ctes); err != nil {
				return err
			}
		}
	case map[string]any:
		return c.object(x, ctes)
	}
	return nil
}

// object checks one object of the tree: a query node (which may bring
// CTEs into scope), a table reference or an expression, then what it
// holds.
func (c *checker) object(o map[string]any, ctes []string) error {
	if cm, ok := o["cte_map"].(map[string]any); ok {
		inner, err := c.withCTEs(cm, ctes)
		if err != nil {
			return err
		}
		ctes = inner
	}
	if _, isExpr := o["class"]; isExpr {
		if err := c.expression(o); err != nil {
			return err
		}
	} else if o["id"] == "UNBOUND" {
		if err := c.typeName(o); err != nil {
			return err
		}
	} else if isTableRef(o) {
		if err := c.tableRef(o, ctes); err != nil {
			return err
		}
	} else if err := sample(o); err != nil {
		return err // a query node's (USING SAMPLE after its FROM)
	}
	// In key order, so that a query with several faults is refused for
	// the same one each time.
	for _, k := range slices.Sorted(maps.Keys(o)) {
		if k == "cte_map" {
			continue // walked by withCTEs, each body in its own scope
		}
		scope := ctes
		if k == "left" && o["type"] == "RECURSIVE_CTE_NODE" {
			// A recursive CTE is itself only in its recursive part: in
			// its anchor, DuckDB binds its name to the table so named.
			name, _ := o["cte_name"].(string)
			scope = slices.DeleteFunc(slices.Clone(ctes), func(cte string) bool { return foldName(cte) == foldName(name) })
		}
		if err := c.walk(o[k], scope); err != nil {
			return err
		}
	}
	return nil
}

// withCTEs checks the bodies of a WITH clause and returns the names in
// scope inside the query it belongs to. A body sees the CTEs before it
// and, when recursive, itself (in its recursive part alone, see object):
// a name it uses that is none of those binds to a table, and must be one
// the scope reads.
func (c *checker) withCTEs(cm map[string]any, outer []string) ([]string, error) {
	entries, _ := cm["map"].([]any)
	scope := append([]string(nil), outer...)
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		name, _ := entry["key"].(string)
		body := entry["value"]
		inBody := scope
		recursive := isRecursive(body)
		if recursive {
			inBody = append(append([]string(nil), scope...), name)
			c.recursive++
		}
		err := c.walk(body, inBody)
		if recursive {
			c.recursive--
		}
		if err != nil {
			return nil, err
		}
		c.ctes = append(c.ctes, entry)
		scope = append(scope, name)
	}
	return scope, nil
}

// isTableRef says whether o is a table reference (FROM's items): query
// nodes (SELECT_NODE, …) have a sample too.
func isTableRef(o map[string]any) bool {
	_, sampled := o["sample"]
	typ, _ := o["type"].(string)
	return sampled && !strings.HasSuffix(typ, "_NODE")
}

// sample checks a table reference's or a query node's sample: Bernoulli
// without a seed only. DuckDB takes a SYSTEM sample by whole vectors of
// the table it scans and a reservoir as its chunks arrive, and a
// tenant's view scans the table every tenant's rows are in: which of a
// tenant's rows such a sample holds would tell where other tenants' rows
// lie among them. A seed makes a sample repeatable, and each of DuckDB's
// threads draws from it anew over the rows its part of the table holds:
// the same telling, by a sample that answers the same every time.
func sample(o map[string]any) error {
	sm, _ := o["sample"].(map[string]any)
	method, _ := sm["method"].(string)
	seed, _ := sm["seed"].(json.Number) // -1: none
	if sm == nil || strings.EqualFold(method, "bernoulli") && (sm["seed"] == nil || seed == "-1") {
		return nil
	}
	return &RefusedError{Reason: "a sample is taken by Bernoulli without a seed only (USING SAMPLE 10 PERCENT (bernoulli)): the others depend on the rows of other tenants"}
}

// isRecursive says whether a CTE's body is a recursive query (WITH
// RECURSIVE with a reference to itself).
func isRecursive(body any) bool {
	b, _ := body.(map[string]any)
	q, _ := b["query"].(map[string]any)
	n, _ := q["node"].(map[string]any)
	return n["type"] == "RECURSIVE_CTE_NODE"
}

func (c *checker) tableRef(o map[string]any, ctes []string) error {
	if err := sample(o); err != nil {
		return err
	}
	typ, _ := o["type"].(string)
	if !tableRefTypes[typ] {
		if typ == "TABLE_FUNCTION" {
			return &RefusedError{Reason: fmt.Sprintf("table function %s: only the declared tables can be read", functionName(o["function"]))}
		}
		return &RefusedError{Reason: fmt.Sprintf("%s is not taken: only the declared tables can be read", foldName(strings.ReplaceAll(typ, "_", " ")))}
	}
	if at, ok := o["at_clause"]; ok && at != nil {
		return &RefusedError{Reason: "AT (time travel) is not taken"}
	}
	if typ != "BASE_TABLE" {
		return nil
	}
	name, _ := o["table_name"].(string)
	cat, _ := o["catalog_name"].(string)
	schema, _ := o["schema_name"].(string)
	if cat != "" || schema != "" {
		q := strings.Join(slices.DeleteFunc([]string{cat, schema, name}, func(s string) bool { return s == "" }), ".")
		return &RefusedError{Reason: fmt.Sprintf("%s: name tables without a catalog or schema", q)}
	}
	lower := foldName(name)
	for _, cte := range ctes {
		if foldName(cte) == lower {
			c.cteUses[lower]++
			return nil
		}
	}
	if !c.tables[lower] {
		return &RefusedError{Reason: fmt.Sprintf("no table %s among those this caller may read", name)}
	}
	c.refs = append(c.refs, tableRef{obj: o, table: lower, inRecursive: c.recursive > 0})
	return nil
}

// expression checks a function call: a scalar, aggregate or window
// function of DuckDB's own, or one of its macros, allowed
// (allowedFunctions), named unqualified or with DuckDB's own schema.
func (c *checker) expression(o map[string]any) error {
	name, ok := o["function_name"].(string)
	if !ok {
		return nil
	}
	cat, _ := o["catalog"].(string)
	schema, _ := o["schema"].(string)
	written := strings.Join(slices.DeleteFunc([]string{cat, schema, name}, func(s string) bool { return s == "" }), ".")
	if cat != "" && foldName(cat) != "system" {
		return &RefusedError{Reason: fmt.Sprintf("function %s: name functions without a catalog", written)}
	}
	key := foldName(name)
	if schema != "" {
		key = foldName(schema) + "." + key
	}
	if !c.functions[key] {
		return &RefusedError{Reason: fmt.Sprintf("function %s is not taken", written)}
	}
	children, _ := o["children"].([]any)
	switch foldName(name) {
	case "json_transform", "json_transform_strict", "from_json", "from_json_strict":
		// The structure names types as strings, which DuckDB finds when
		// it binds: a type not loaded would install its extension, and
		// the database's own types (an ENUM's values) would be read.
		return c.structure(written, children)
	case "list_aggregate", "array_aggregate", "list_aggr", "array_aggr", "aggregate":
		// The aggregate is named as a string, found when it binds: a name
		// not found makes DuckDB suggest the database's own functions.
		if f, ok := constantString(children, 1); !ok || !c.functions[foldName(f)] {
			return &RefusedError{Reason: fmt.Sprintf("function %s takes the name of an allowed function as a constant string", written)}
		}
	}
	return nil
}

// structure checks the structure argument of a JSON function that names
// types in a string (json_transform's): a constant string of JSON whose
// every type is one of DuckDB's own (typeOK); a struct or a list is
// JSON's object or array. Read token by token: DuckDB binds every key of
// an object, a key given twice too, where a decoder into a map keeps the
// last.
func (c *checker) structure(written string, children []any) error {
	s, ok := constantString(children, 1)
	if !ok {
		return &RefusedError{Reason: fmt.Sprintf("function %s takes its structure as a constant string of JSON", written)}
	}
	dec := json.NewDecoder(strings.NewReader(s))
	type open struct{ object, wantKey bool }
	var stack []*open     // the objects and arrays open
	valueDone := func() { // a value ended: an object's next string is a key
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &RefusedError{Reason: fmt.Sprintf("function %s takes its structure as a constant string of JSON", written)}
		}
		switch x := tok.(type) {
		case json.Delim:
			if x == '{' || x == '[' {
				stack = append(stack, &open{object: x == '{', wantKey: x == '{'})
				continue
			}
			stack = stack[:len(stack)-1]
			valueDone()
		case string:
			if top := len(stack) - 1; top >= 0 && stack[top].wantKey {
				stack[top].wantKey = false
				continue
			}
			if !c.typeOK(x) {
				return &RefusedError{Reason: fmt.Sprintf("function %s: a type of its structure is not taken: only DuckDB's own types, such as VARCHAR, BIGINT[], DECIMAL(18,3) or MAP(VARCHAR, BIGINT)", written)}
			}
			valueDone()
		default:
			return &RefusedError{Reason: fmt.Sprintf("function %s: its structure holds %v where a type goes", written, tok)}
		}
	}
}

// typeOK says whether s names only DuckDB's own types, loaded
// (allowedTypes), without a catalog or schema: a name (of words: TIMESTAMP
// WITH TIME ZONE) with a width such as (18,3); MAP(k, v), STRUCT(name
// type, …) or UNION(name type, …) of such types; each followed by list
// brackets.
func (c *checker) typeOK(s string) bool {
	p := typeParser{s: s, types: c.types}
	return p.typ() && p.skip() == len(p.s)
}

// typeParser reads a type named in a string (typeOK).
type typeParser struct {
	s     string
	i     int
	types map[string]bool
}

// skip passes spaces and returns the position.
func (p *typeParser) skip() int {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
	return p.i
}

// eat passes the character b, if it is next.
func (p *typeParser) eat(b byte) bool {
	if p.skip() < len(p.s) && p.s[p.i] == b {
		p.i++
		return true
	}
	return false
}

// word reads letters, digits and underscores.
func (p *typeParser) word() string {
	from := p.skip()
	for p.i < len(p.s) && (p.s[p.i] == '_' || 'a' <= p.s[p.i]|0x20 && p.s[p.i]|0x20 <= 'z' || '0' <= p.s[p.i] && p.s[p.i] <= '9') {
		p.i++
	}
	return p.s[from:p.i]
}

func (p *typeParser) typ() bool {
	words := []string{p.word()}
	for {
		at := p.i
		if w := p.word(); w != "" {
			words = append(words, w)
			continue
		}
		p.i = at
		break
	}
	name := foldName(strings.Join(words, " "))
	ok := true
	switch name {
	case "map":
		ok = p.eat('(') && p.typ() && p.eat(',') && p.typ() && p.eat(')')
	case "struct", "union":
		ok = p.eat('(')
		for first := true; ok && !p.eat(')'); first = false {
			ok = (first || p.eat(',')) && p.word() != "" && p.typ()
		}
	default:
		if p.eat('(') {
			ok = p.width() && (!p.eat(',') || p.width()) && p.eat(')')
		}
		ok = ok && p.types[name]
	}
	for ok && p.eat('[') {
		p.width()
		ok = p.eat(']')
	}
	return ok
}

// width reads digits, false for none.
func (p *typeParser) width() bool {
	from := p.skip()
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i > from
}

// constantString is children[i] when it is a constant string.
func constantString(children []any, i int) (string, bool) {
	if i >= len(children) {
		return "", false
	}
	o, _ := children[i].(map[string]any)
	if o["type"] != "VALUE_CONSTANT" {
		return "", false
	}
	v, _ := o["value"].(map[string]any)
	typ, _ := v["type"].(map[string]any)
	s, ok := v["value"].(string)
	return s, ok && typ["id"] == "VARCHAR"
}

// typeName checks a type the parser left for the binder to find by its
// name (JSON, ENUM, a user's or an extension's type): one of DuckDB's
// own, loaded (allowedTypes), named without a catalog or schema.
func (c *checker) typeName(o map[string]any) error {
	info, _ := o["type_info"].(map[string]any)
	name, _ := info["name"].(string)
	cat, _ := info["catalog"].(string)
	schema, _ := info["schema"].(string)
	if cat != "" || schema != "" || !c.types[foldName(name)] {
		written := strings.Join(slices.DeleteFunc([]string{cat, schema, name}, func(s string) bool { return s == "" }), ".")
		return &RefusedError{Reason: fmt.Sprintf("type %s is not taken: only DuckDB's own types", written)}
	}
	return nil
}

func functionName(f any) string {
	o, _ := f.(map[string]any)
	name, _ := o["function_name"].(string)
	return name
}

// foldName is name as DuckDB compares identifiers (tables, CTEs, columns,
// functions, types, catalogs): ASCII letters in lower case, every other
// character as it is. Go's Unicode lower-casing would make names equal
// that DuckDB keeps apart (the Kelvin sign K lowers to k), and a reference
// the checker took for a CTE would reach the table, or the file, of that
// name (TestEscapeThroughUnicodeCaseFolding).
func foldName(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}
