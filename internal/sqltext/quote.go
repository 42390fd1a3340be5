// Package sqltext quotes names and values into SQL text, the same way for
// every dialect tracelake writes (DuckDB and Databend both take "double
// quoted" identifiers and 'single quoted' strings).
package sqltext

import "strings"

// Ident quotes one identifier.
func Ident(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Name quotes a table name, keeping an optional schema prefix.
func Name(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = Ident(p)
	}
	return strings.Join(parts, ".")
}

// String quotes a string literal.
func String(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// DatabendString quotes a string literal for Databend, whose lexer reads a
// backslash as an escape (ast/src/parser/token.rs LiteralString,
// ast/src/ast/quote.rs QuotedString::from_str: '\b' is a backspace, '\\'
// one backslash, and a quote after a backslash does not end the literal),
// where DuckDB and String keep it as it is.
func DatabendString(s string) string {
	return String(strings.ReplaceAll(s, `\`, `\\`))
}

// Strings quotes each string and joins them with ", ".
func Strings(ss []string) string { return QuoteAll(ss, String) }

// QuoteAll quotes each string with quote and joins them with ", ".
func QuoteAll(ss []string, quote func(string) string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}

// DatabendColumns is the query of the columns (name, type) of table (name
// or db.name, split at the last dot) in Databend's system.columns, which
// lists them by database and table name as stored, each type as its
// wrapped_display: Nullable(…) around each nullable level, where DESC
// shows none (storages/system columns_table.rs, expression schema.rs;
// interpreters util.rs generate_desc_schema: remove_recursive_nullable).
func DatabendColumns(table string) string {
	db, name := "currentDatabase()", table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		db, name = DatabendString(table[:i]), table[i+1:]
	}
	return "SELECT name, type FROM system.columns WHERE database = " + db + " AND table = " + DatabendString(name)
}
