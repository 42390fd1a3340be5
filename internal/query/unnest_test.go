package query

import (
	"slices"
	"testing"
)

// TestUnnestOfAListIsTaken: README "Reading while it loads",
// Read-only: "One SELECT per query (with CTEs, joins, subqueries, set
// operations, window functions, ?/$1 parameters)"; what is refused is
// listed (table functions such as read_parquet, read_csv, glob, query,
// duckdb_settings(); state-reading functions), and unnest over a list
// value is none of them: it reads no table and no file, only the list the
// query itself made. DuckDB lists unnest among its table functions (it is
// also the FROM unnest(...)), so the allow-list built from scalar,
// aggregate, window functions and macros (internal/query/duckdb.go,
// allowedFunctions) leaves it out and refuses ordinary queries — and
// `x = ANY ([...])`, which DuckDB's parser turns into an unnest subquery,
// with "function unnest is not taken".
func TestUnnestOfAListIsTaken(t *testing.T) {
	l := newLake(t)
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{`SELECT name FROM otel_spans WHERE name = ANY (['chat']) ORDER BY name`, []string{"chat"}},
		{`SELECT name FROM otel_spans WHERE name IN (SELECT unnest(['chat', 'secret-b'])) ORDER BY name`, []string{"chat"}},
		{`SELECT count(*) FROM (SELECT unnest(str_split(name, 'o')) AS part FROM otel_spans)`, []string{"4"}}, // chat: 1 part, tool: t, '', l
		{`SELECT sum(x) FROM (SELECT unnest([1, 2, 3]) AS x)`, []string{"6"}},
	} {
		got, err := l.rows(t, tenantA, tc.q)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s\n  got %q, %v; want %q", tc.q, got, err, tc.want)
		}
	}
	// Over Iceberg (tracelake serve) alike.
	il := newIceLake(t, IcebergOptions{})
	if got, err := il.rows(t, tenantA, `SELECT name FROM otel_spans WHERE name = ANY (['chat'])`); err != nil || !slices.Equal(got, []string{"chat"}) {
		t.Errorf("Iceberg: = ANY (list): %q, %v; want [chat]", got, err)
	}
}
