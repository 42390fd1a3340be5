package query

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cputime"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// BenchmarkQueryOverhead is what the read path costs a query beyond
// running it: one small SELECT of a tenant through the reader, beside the
// same SELECT on a connection of the database (the yardstick); each with
// the process's CPU time per query, which the shared machine's load
// swells less than wall time.
func BenchmarkQueryOverhead(b *testing.B) {
	ctx := context.Background()
	db, err := sql.Open("duckdb", filepath.Join(b.TempDir(), "o.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, t := range []string{"otel_spans", "otel_logs", "otel_metrics", "genai_operations", "otel_spans_dedup"} {
		if _, err := db.Exec(`CREATE TABLE ` + t + ` AS SELECT 'a' AS tenant_id, range AS v FROM range(1000)`); err != nil {
			b.Fatal(err)
		}
	}
	const q = `SELECT count(*) FROM otel_spans WHERE v < $1`
	b.Run("direct", func(b *testing.B) {
		defer reportCPU(b, cputime.Process())
		for b.Loop() {
			var n int64
			if err := db.QueryRowContext(ctx, q, 10).Scan(&n); err != nil {
				b.Fatal(err)
			}
		}
	})
	r, err := NewDuckDB(ctx, db, DuckDBOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("reader", func(b *testing.B) {
		defer reportCPU(b, cputime.Process())
		for b.Loop() {
			rr, err := r.Query(ctx, tenancy.One("a"), q, 10)
			if err != nil {
				b.Fatal(err)
			}
			for rr.Next() {
			}
			rr.Release()
		}
	})
	// A query whose column's type waits for its parameter's value, which
	// DuckDB describes for its names (queryNames).
	b.Run("reader_parameter_typed", func(b *testing.B) {
		defer reportCPU(b, cputime.Process())
		for b.Loop() {
			rr, err := r.Query(ctx, tenancy.One("a"), `SELECT $1 AS p, v FROM otel_spans WHERE v < 10`, "x")
			if err != nil {
				b.Fatal(err)
			}
			for rr.Next() {
			}
			rr.Release()
		}
	})
}

// reportCPU reports the process's CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cputime.Process()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
