package query

import (
	"context"
	"slices"
	"testing"
)

// Review of 0d5c1ce: the DESCRIBE that names a parameter-typed query's
// columns starts past what precedes the statement as DuckDB's lexer
// skips it, or it is not taken (DESCRIBE ; SELECT … ends at the
// semicolon) and the schema renames repeated names (x, x_1, where the
// result answers x, x). DuckDB's lexer ends a -- comment at a carriage
// return as at a newline, and its parser reads Unicode spaces (no-break
// space, ideographic space, byte order mark) as blanks: statementStart
// skipped neither, so a query sent with Windows line ends from a
// comment-headed file (-- c\r;SELECT …) or pasted with a no-break space
// was said to answer x and x_1.
func TestDescribeStartsPastWhatDuckDBSkips(t *testing.T) {
	l := newLake(t)
	for _, q := range []string{
		"-- c\rSELECT $1 AS x, 2 AS x",
		"-- c\r;SELECT $1 AS x, 2 AS x",
		"\u00a0;SELECT $1 AS x, 2 AS x",
		"; \u3000 ;SELECT $1 AS x, 2 AS x",
		"\ufeff;SELECT $1 AS x, 2 AS x",
	} {
		rows, err := l.db.Query(q, "v")
		if err != nil {
			t.Fatalf("DuckDB itself, %q: %v", q, err)
		}
		want, err := rows.Columns()
		rows.Close()
		if err != nil {
			t.Fatal(err)
		}
		sc, err := l.reader.Schema(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		rr, err := l.reader.Query(context.Background(), tenantA, q, "v")
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		var said, answered []string
		for _, f := range sc.Fields() {
			said = append(said, f.Name)
		}
		for _, f := range rr.Schema().Fields() {
			answered = append(answered, f.Name)
		}
		rr.Release()
		if !slices.Equal(said, want) || !slices.Equal(answered, want) {
			t.Errorf("%q: said %q, answered %q; want %q (DuckDB's own names)", q, said, answered, want)
		}
	}
}
