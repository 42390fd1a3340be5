package query

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// The schema a query is said to have (a prepared statement's, a
// FlightInfo's) is the schema its result has, column names included.
// Schema ran the query within SELECT * FROM (…) LIMIT 0, and DuckDB
// renames a subquery's repeated names (x, x_1): a query of two columns
// named alike was said to answer x and x_1, then answered x and x, as
// DuckDB itself does.
func TestSchemaNamesTheResultsColumns(t *testing.T) {
	schemaNamesTheResultsColumns(t, newLake(t).reader)
}

// On Iceberg too (the same session's schema).
func TestIcebergSchemaNamesTheResultsColumns(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	l.load(t, []span{{"a", "t1", "chat", 10, day(1)}}, nil)
	schemaNamesTheResultsColumns(t, l.reader)
}

func schemaNamesTheResultsColumns(t *testing.T, r Reader) {
	t.Helper()
	for _, q := range []string{
		`SELECT 1 AS x, 2 AS x`,
		`SELECT trace_id, trace_id FROM otel_spans`,
		`SELECT * FROM otel_spans a JOIN otel_spans b ON a.trace_id = b.trace_id`,
	} {
		for _, scope := range []tenancy.Scope{tenancy.Operator, tenantA} {
			sc, err := r.Schema(context.Background(), scope, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			rr, err := r.Query(context.Background(), scope, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if !sc.Equal(rr.Schema()) {
				t.Errorf("%s, %v: said to answer\n%s\nanswered\n%s", q, scope, sc, rr.Schema())
			}
			rr.Release()
		}
	}
}

// A query of one column whose type waits for a parameter's value, which
// DuckDB prepares as one column named "unknown", is said to answer its
// column's own name: the one-column "unknown" was taken for the query's
// own names.
func TestSchemaNamesAParameterColumn(t *testing.T) {
	l := newLake(t)
	const q = `SELECT $1 AS x`
	for _, r := range []Reader{l.reader} {
		sc, err := r.Schema(context.Background(), tenantA, q)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := r.Query(context.Background(), tenantA, q, "v")
		if err != nil {
			t.Fatal(err)
		}
		defer rr.Release()
		if said, answered := sc.Field(0).Name, rr.Schema().Field(0).Name; said != answered {
			t.Errorf("%s: said to answer column %q, answered %q", q, said, answered)
		}
	}
}

// On Iceberg each table a query names is read through a view of its own
// scan, under a name of its own: a column holding a subquery, which
// DuckDB names by the subquery's text, was named by the scan's view
// (random, another in the schema than in the result), and a DOUBLE
// constant beside a typed cast by the cast's type as resolved. Each
// column is named as DuckDB names it for the query sent, in a query's
// result and in its schema.
func TestIcebergColumnsKeepDuckDBsNames(t *testing.T) {
	oracle := newLake(t).db
	l := newIceLake(t, IcebergOptions{})
	for _, q := range []string{
		`SELECT (SELECT max(duration_ms) FROM otel_spans)`,
		`SELECT EXISTS (SELECT 1 FROM otel_spans o WHERE o.duration_ms > 1e0) AS e, (SELECT count(*) FROM otel_spans) + 1e0`,
		`SELECT 1::DECIMAL(3,1) + 1e0, duration_ms::HUGEINT * 1e0 FROM otel_spans`,
	} {
		rows, err := oracle.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := rows.Columns()
		rows.Close()
		if err != nil {
			t.Fatal(err)
		}
		sc, err := l.reader.Schema(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rr, err := l.reader.Query(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for what, s := range map[string]*arrow.Schema{"schema": sc, "result": rr.Schema()} {
			var got []string
			for _, f := range s.Fields() {
				got = append(got, f.Name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: the %s's columns %q, want %q (DuckDB's own names)", q, what, got, want)
			}
		}
		rr.Release()
	}
}

// A query whose columns' types wait for its parameters' values has no
// names DuckDB prepares: a column holding a DOUBLE constant is named by
// the constant as printed back (1.0), not by the cast that keeps its type
// (CAST('1.0' AS "DOUBLE")), on DuckDB and on Iceberg.
func TestParameterTypedColumnsKeepDuckDBsNames(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	const q = `SELECT $1, 1e0, 2e0 AS two`
	rows, err := l.db.Query(q, "v")
	if err != nil {
		t.Fatal(err)
	}
	want, err := rows.Columns()
	rows.Close()
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]Reader{"duckdb": l.reader, "iceberg": il.reader} {
		rr, err := r.Query(context.Background(), tenantA, q, "v")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, f := range rr.Schema().Fields() {
			got = append(got, f.Name)
		}
		rr.Release()
		if !slices.Equal(got, want) {
			t.Errorf("%s: columns %q, want %q (DuckDB's own names)", name, got, want)
		}
	}
}

// A query whose columns' types wait for its parameters' values is named
// as DuckDB names the query sent (with the values), in its schema (which
// a client asks for before it has values) and in its result, on DuckDB
// and on Iceberg: a cast's type as written (DECIMAL(3, 1), which DuckDB's
// parse printed back writes DECIMAL(3,1)), a subquery by the table's
// name, not the scan's view, repeated names as they are, whatever
// precedes the statement (a DESCRIBE of the query sent names them).
func TestParameterTypedQueriesKeepDuckDBsNames(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	for _, c := range []struct {
		q    string
		args []any
	}{
		{`SELECT $1 AS x, 2 AS x`, []any{"v"}},
		{`SELECT ?, ? || 'a', ? AS x, 1 AS x`, []any{"v", "w", 3}},
		{`SELECT $1::DECIMAL(3,1), $2 AS p, (SELECT count(*) FROM otel_spans)`, []any{1, "v"}},
		{`WITH c AS (SELECT $1, $1 AS x) SELECT *, x FROM c UNION ALL SELECT 'a', 'b', 'c'`, []any{"v"}},
		{`SELECT (SELECT $1 FROM otel_spans LIMIT 1), trace_id, trace_id FROM otel_spans`, []any{"v"}},
		{"/* a /* b */ */ ;-- c\n; SELECT $1 AS x, 2 AS x; -- d", []any{"v"}},
	} {
		rows, err := l.db.Query(c.q, c.args...)
		if err != nil {
			t.Fatalf("DuckDB itself, %s: %v", c.q, err)
		}
		want, err := rows.Columns()
		rows.Close()
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]Reader{"duckdb": l.reader, "iceberg": il.reader} {
			sc, err := r.Schema(context.Background(), tenantA, c.q)
			if err != nil {
				t.Fatalf("%s %s: %v", name, c.q, err)
			}
			rr, err := r.Query(context.Background(), tenantA, c.q, c.args...)
			if err != nil {
				t.Fatalf("%s %s: %v", name, c.q, err)
			}
			for what, s := range map[string]*arrow.Schema{"schema": sc, "result": rr.Schema()} {
				var got []string
				for _, f := range s.Fields() {
					got = append(got, f.Name)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s %s: the %s's columns %q, want %q (DuckDB's own names)", name, c.q, what, got, want)
				}
			}
			rr.Release()
		}
	}
}

// A DESCRIBE names columns only when DuckDB parses it as one of the very
// query checked (another query, or more statements, are not taken), and
// when no parameter picks a star's columns.
func TestDescribesOnlyTheQueryChecked(t *testing.T) {
	db := newLake(t).db
	parse := func(q string) string {
		t.Helper()
		var js string
		if err := db.QueryRow(`SELECT json_serialize_sql($1::VARCHAR)::VARCHAR`, q).Scan(&js); err != nil {
			t.Fatal(err)
		}
		return js
	}
	skeleton := parse(`DESCRIBE SELECT 1`)
	for _, c := range []struct {
		described, checked string
		want               bool
	}{
		{`DESCRIBE SELECT $1 AS x FROM otel_spans`, `  SELECT $1 AS x FROM otel_spans`, true},
		{`DESCRIBE SELECT $1 AS x FROM otel_spans`, `SELECT $1 AS y FROM otel_spans`, false},
		{`DESCRIBE SELECT $1 AS x; SELECT $1 AS x`, `SELECT $1 AS x`, false},
		{`SELECT * FROM (DESCRIBE SELECT $1 AS x) WHERE true`, `SELECT $1 AS x`, false},
		// A NULL picks other columns than the value.
		{`DESCRIBE SELECT COLUMNS(c -> c = $1) FROM otel_spans`, `SELECT COLUMNS(c -> c = $1) FROM otel_spans`, false},
	} {
		got, err := describes(parse(c.described), skeleton, parse(c.checked))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%q describes %q: %v, want %v", c.described, c.checked, got, c.want)
		}
	}
}
