package query

import (
	"context"
	"errors"
	"testing"
)

// A query DuckDB refuses for what the query itself says is the caller's
// mistake (Flight SQL's InvalidArgument), whatever kind of error DuckDB
// names it: a LIKE's escape of two characters (a Syntax Error), values of
// types DuckDB will not combine (Not implemented), an empty list reduced
// (Parameter Not Allowed). They reached the caller as the server's own
// failure (Internal), logged as one.
func TestEngineRefusalsOfEveryKindAreTheCallers(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	for name, r := range map[string]Reader{"duckdb": l.reader, "iceberg": il.reader} {
		for _, q := range []string{
			`SELECT name FROM otel_spans WHERE name LIKE 'a' ESCAPE 'xx'`,
			`SELECT array_value(duration_ms, name) FROM otel_spans`,
			`SELECT list_reduce([], (a, b) -> a + b) FROM otel_spans`,
		} {
			rr, err := r.Query(context.Background(), tenantA, q)
			if err == nil {
				for rr.Next() {
				}
				err = rr.Err()
				rr.Release()
			}
			var re *RefusedError
			if !errors.As(err, &re) || !re.Engine {
				t.Errorf("%s: %s: %T %v, want DuckDB's refusal of the query (a *RefusedError)", name, q, err, err)
			}
		}
	}
}
