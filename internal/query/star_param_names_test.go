package query

import (
	"context"
	"slices"
	"testing"
)

// COLUMNS(…) whose columns a parameter's value picks answers the columns
// the value picks, named as they are: the names came from DuckDB
// preparing (or describing) the query without the values, which picked
// others, so the column trace_id, picked by the value, was named "name"
// (the column a NULL picks), its values under another column's name.
func TestColumnsPickedByAParameterKeepTheirNames(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	for _, q := range []string{
		`SELECT COLUMNS(c -> c = coalesce($1, 'name')) FROM otel_spans`,
		`SELECT $1 AS p, COLUMNS(c -> c = coalesce($1, 'name')) FROM otel_spans`,
	} {
		rows, err := l.db.Query(q, "trace_id")
		if err != nil {
			t.Fatalf("DuckDB itself, %s: %v", q, err)
		}
		want, err := rows.Columns()
		rows.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(want, "trace_id") {
			t.Fatalf("DuckDB itself answers %s with %q; the test assumes trace_id", q, want)
		}
		for name, r := range map[string]Reader{"duckdb": l.reader, "iceberg": il.reader} {
			rr, err := r.Query(context.Background(), tenantA, q, "trace_id")
			if err != nil {
				t.Fatalf("%s %s: %v", name, q, err)
			}
			var got []string
			for _, f := range rr.Schema().Fields() {
				got = append(got, f.Name)
			}
			rr.Release()
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: columns %q, want %q (DuckDB's own names)", name, q, got, want)
			}
		}
	}
}
