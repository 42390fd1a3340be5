package query

import (
	"context"
	"slices"
	"testing"
)

// Review of 4158a13/750346d: a query whose columns' types wait for its
// parameters' values (DuckDB prepares no names for it) is the very query
// a client prepares (Flight SQL, ADBC: Schema, then execute with the
// values), yet its schema names its columns otherwise than its result:
// repeated names come out x, x_1 in the schema (the LIMIT 0 subquery
// renames them) and x, x in the result, and on Iceberg a column holding a
// subquery is named by the scan's random view, another in the schema than
// in the result (tracelake_<24 hex>_0 each time).
func TestReviewParameterTypedQuerySchemaNamesItsResult(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	for _, q := range []string{
		`SELECT $1 AS x, 2 AS x`,
		`SELECT $1 AS p, trace_id, trace_id FROM otel_spans`,
		`SELECT $1 AS p, (SELECT count(*) FROM otel_spans)`,
	} {
		for _, e := range []struct {
			name string
			r    Reader
		}{{"duckdb", l.reader}, {"iceberg", il.reader}} {
			sc, err := e.r.Schema(context.Background(), tenantA, q)
			if err != nil {
				t.Fatalf("%s %s: %v", e.name, q, err)
			}
			rr, err := e.r.Query(context.Background(), tenantA, q, "v")
			if err != nil {
				t.Fatalf("%s %s: %v", e.name, q, err)
			}
			var said, answered []string
			for _, f := range sc.Fields() {
				said = append(said, f.Name)
			}
			for _, f := range rr.Schema().Fields() {
				answered = append(answered, f.Name)
			}
			rr.Release()
			if !slices.Equal(said, answered) {
				t.Errorf("%s %s: said to answer %q, answered %q", e.name, q, said, answered)
			}
		}
	}
}
