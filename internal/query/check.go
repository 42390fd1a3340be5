package query

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The checker reads a query as DuckDB's own parser read it (the JSON of
// json_serialize_sql), never its text: comments, quoting and several
// statements are the parser's business, and what runs is the parsed
// query printed back (json_deserialize_sql), so the query checked is the
// query run. It admits one SELECT whose every table reference is an
// unqualified name of a table the scope may read (which the engine binds
// to the scope's rows) or of a CTE in scope, and whose every function is
// one of DuckDB's own scalar, aggregate or window functions that neither
// reads outside state nor changes it. Everything else is refused: table
// functions (read_parquet, glob, duckdb_settings(), …), qualified names
// (main.t, information_schema.tables), time travel (AT), and statements
// that are not SELECTs (json_serialize_sql refuses them itself).

// parsed is json_serialize_sql's answer.
type parsed struct {
	Error      bool              `json:"error"`
	ErrorType  string            `json:"error_type"`
	Message    string            `json:"error_message"`
	Statements []json.RawMessage `json:"statements"`
}

// tableRefTypes are the table references a query may hold: the others
// (TABLE_FUNCTION, SHOW_REF, PIVOT, COLUMN_DATA, DELIM_GET, …) are
// refused.
var tableRefTypes = map[string]bool{"BASE_TABLE": true, "JOIN": true, "SUBQUERY": true, "EXPRESSION_LIST": true, "EMPTY": true}

// checker holds what a scope may name.
type checker struct {
	tables    map[string]bool // lower-cased names of the tables the scope reads
	functions map[string]bool // lower-cased names of the functions allowed
}

// check says why the statement serialized as js may not run, or nil. It
// returns the number of its parameters.
func (c *checker) check(js []byte) (params int, err error) {
	var p parsed
	if err := json.Unmarshal(js, &p); err != nil {
		return 0, fmt.Errorf("read the parsed query: %w", err)
	}
	if p.Error {
		if p.ErrorType == "not implemented" {
			return 0, &RefusedError{"only SELECT statements are taken (the endpoint is read-only)"}
		}
		return 0, &RefusedError{p.Message}
	}
	if len(p.Statements) != 1 {
		return 0, &RefusedError{fmt.Sprintf("one statement per query, got %d", len(p.Statements))}
	}
	var stmt struct {
		Node   any `json:"node"`
		Params []struct {
			Key string `json:"key"`
		} `json:"named_param_map"`
	}
	if err := json.Unmarshal(p.Statements[0], &stmt); err != nil {
		return 0, fmt.Errorf("read the parsed query: %w", err)
	}
	if err := c.walk(stmt.Node, nil); err != nil {
		return 0, err
	}
	return len(stmt.Params), nil
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
	} else if isTableRef(o) {
		if err := c.tableRef(o, ctes); err != nil {
			return err
		}
	}
	// In key order, so that a query with several faults is refused for
	// the same one each time.
	for _, k := range slices.Sorted(maps.Keys(o)) {
		if k == "cte_map" {
			continue // walked by withCTEs, each body in its own scope
		}
		if err := c.walk(o[k], ctes); err != nil {
			return err
		}
	}
	return nil
}

// withCTEs checks the bodies of a WITH clause and returns the names in
// scope inside the query it belongs to. A body sees the CTEs before it
// and, when recursive, itself: a name it uses that is none of those binds
// to a table, and must be one the scope reads.
func (c *checker) withCTEs(cm map[string]any, outer []string) ([]string, error) {
	entries, _ := cm["map"].([]any)
	scope := append([]string(nil), outer...)
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		name, _ := entry["key"].(string)
		body := entry["value"]
		inBody := scope
		if isRecursive(body) {
			inBody = append(append([]string(nil), scope...), name)
		}
		if err := c.walk(body, inBody); err != nil {
			return nil, err
		}
		scope = append(scope, name)
	}
	return scope, nil
}

// isRecursive says whether a CTE's body is a recursive query (WITH
// RECURSIVE with a reference to itself).
// isTableRef says whether o is a table reference (FROM's items): query
// nodes (SELECT_NODE, …) have a sample too.
func isTableRef(o map[string]any) bool {
	_, sampled := o["sample"]
	typ, _ := o["type"].(string)
	return sampled && !strings.HasSuffix(typ, "_NODE")
}

func isRecursive(body any) bool {
	b, _ := body.(map[string]any)
	q, _ := b["query"].(map[string]any)
	n, _ := q["node"].(map[string]any)
	return n["type"] == "RECURSIVE_CTE_NODE"
}

func (c *checker) tableRef(o map[string]any, ctes []string) error {
	typ, _ := o["type"].(string)
	if !tableRefTypes[typ] {
		if typ == "TABLE_FUNCTION" {
			return &RefusedError{fmt.Sprintf("table function %s: only the declared tables can be read", functionName(o["function"]))}
		}
		return &RefusedError{fmt.Sprintf("%s is not taken: only the declared tables can be read", strings.ToLower(strings.ReplaceAll(typ, "_", " ")))}
	}
	if at, ok := o["at_clause"]; ok && at != nil {
		return &RefusedError{"AT (time travel) is not taken"}
	}
	if typ != "BASE_TABLE" {
		return nil
	}
	name, _ := o["table_name"].(string)
	cat, _ := o["catalog_name"].(string)
	schema, _ := o["schema_name"].(string)
	if cat != "" || schema != "" {
		q := strings.Join(slices.DeleteFunc([]string{cat, schema, name}, func(s string) bool { return s == "" }), ".")
		return &RefusedError{fmt.Sprintf("%s: name tables without a catalog or schema", q)}
	}
	lower := strings.ToLower(name)
	for _, cte := range ctes {
		if strings.ToLower(cte) == lower {
			return nil
		}
	}
	if !c.tables[lower] {
		return &RefusedError{fmt.Sprintf("no table %s among those this caller may read", name)}
	}
	return nil
}

// expression checks a function call: a scalar, aggregate or window
// function of DuckDB's own, allowed, and named without a schema.
func (c *checker) expression(o map[string]any) error {
	name, ok := o["function_name"].(string)
	if !ok {
		return nil
	}
	if s, _ := o["schema"].(string); s != "" {
		return &RefusedError{fmt.Sprintf("function %s.%s: name functions without a schema", s, name)}
	}
	if cat, _ := o["catalog"].(string); cat != "" {
		return &RefusedError{fmt.Sprintf("function %s.%s: name functions without a catalog", cat, name)}
	}
	if !c.functions[strings.ToLower(name)] {
		return &RefusedError{fmt.Sprintf("function %s is not taken", name)}
	}
	return nil
}

func functionName(f any) string {
	o, _ := f.(map[string]any)
	name, _ := o["function_name"].(string)
	return name
}
