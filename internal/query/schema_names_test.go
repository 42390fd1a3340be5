package query

import (
	"context"
	"testing"

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
