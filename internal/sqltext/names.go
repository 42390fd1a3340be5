package sqltext

import "strings"

// SameTable says whether a and b name one table of the default schema as
// DuckDB resolves names: without regard to case, main's when a name
// gives no schema ("Trace_Raw", "main.trace_raw" and "MAIN.trace_raw"
// are one table).
func SameTable(a, b string) bool {
	return defaultSchema(a) == defaultSchema(b)
}

// defaultSchema is name lower-cased, without a "main." schema.
func defaultSchema(name string) string {
	name = strings.ToLower(name)
	return strings.TrimPrefix(name, "main.")
}
