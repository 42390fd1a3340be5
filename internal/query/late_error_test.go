package query

import (
	"context"
	"errors"
	"testing"
)

// lateConversion fails at the last row of the 'bulk' trace with the
// caller's mistake (a string that is no number), several times DuckDB's
// streaming buffer past the first.
const lateConversion = `SELECT CAST(CASE WHEN duration_ms = 399999 AND trace_id = 'bulk' THEN 'x' ELSE duration_ms::VARCHAR END AS BIGINT) AS d FROM otel_spans`

// A query's own mistake is a RefusedError (Flight SQL's InvalidArgument)
// wherever the result meets it: when the query runs, as a materialized
// result does, or at a later batch, as a streaming one does.
func TestIcebergLateQueryErrorIsRefused(t *testing.T) {
	l := bulkIceLake(t)
	rr, err := l.reader.Query(context.Background(), tenantA, lateConversion)
	if err != nil {
		t.Fatalf("the query failed before its first batch: %v", err)
	}
	defer rr.Release()
	batches := 0
	for rr.Next() {
		batches++
	}
	var re *RefusedError
	if err := rr.Err(); !errors.As(err, &re) {
		t.Fatalf("after %d batches the read ended with %T %v, want a *RefusedError (the DuckDB reader's for the same query)", batches, err, err)
	}
	if batches == 0 {
		t.Fatal("no batch before the failure: the test no longer shows a failure met while streaming")
	}
}
