package query

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// spansOverDays loads n spans of two tenants over ten days in time order,
// as loads append them, into a file database.
func spansOverDays(b *testing.B, n int) *sql.DB {
	b.Helper()
	db, err := sql.Open("duckdb", filepath.Join(b.TempDir(), "spans.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE otel_spans (tenant_id VARCHAR, trace_id VARCHAR, span_id VARCHAR, service_name VARCHAR, name VARCHAR, start_time TIMESTAMP, duration_ns BIGINT)`,
		fmt.Sprintf(`INSERT INTO otel_spans SELECT CASE WHEN i %% 2 = 0 THEN 'a' ELSE 'b' END, md5(i::VARCHAR), i::VARCHAR,
			'svc-' || (i %% 7), 'op-' || (i %% 13), TIMESTAMP '2026-11-01' + INTERVAL (i * (864000000000 // %d)) MICROSECONDS, i %% 1000000
			FROM range(%d) t(i)`, n, n),
		`CHECKPOINT`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkTenantHour reads one tenant's hour of a 10-million-span table
// through the read path, beside the whole tenant's table, and reports the
// rows the scans read (DuckDB's OPERATOR_ROWS_SCANNED): the tenant's view
// and the hour's predicate reach the scan, whose zone maps skip the row
// groups of other hours.
func BenchmarkTenantHour(b *testing.B) {
	n := 10_000_000
	if testing.Short() {
		n = 1_000_000
	}
	db := spansOverDays(b, n)
	d, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, q string }{
		{"hour", `SELECT count(*), sum(duration_ns) FROM otel_spans WHERE start_time >= TIMESTAMP '2026-11-05 10:00' AND start_time < TIMESTAMP '2026-11-05 11:00'`},
		{"all", `SELECT count(*), sum(duration_ns) FROM otel_spans`},
	} {
		b.Run(c.name, func(b *testing.B) {
			scanned := rowsScanned(b, d, tenancy.One("a"), c.q)
			for b.Loop() {
				rr, err := d.Query(context.Background(), tenancy.One("a"), c.q)
				if err != nil {
					b.Fatal(err)
				}
				for rr.Next() {
				}
				rr.Release()
			}
			b.ReportMetric(float64(scanned), "rows_scanned")
			b.ReportMetric(float64(n), "rows_in_table")
		})
	}
}

// rowsScanned runs q for s as Query does and sums the rows its scans
// read, from DuckDB's profile of the query.
func rowsScanned(b *testing.B, d *DuckDB, s tenancy.Scope, q string) int {
	ctx := context.Background()
	sess, text, _, err := d.prepare(ctx, s, q)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.close()
	for _, set := range []string{`PRAGMA enable_profiling = 'no_output'`, `SET custom_profiling_settings = '{"OPERATOR_ROWS_SCANNED": "true"}'`} {
		if _, err := sess.conn.ExecContext(ctx, set); err != nil {
			b.Fatal(err)
		}
	}
	rows, err := sess.conn.QueryContext(ctx, text)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
	}
	rows.Close()
	info, err := duckdb.GetProfilingInfo(sess.conn)
	if err != nil {
		b.Fatal(err)
	}
	var sum func(p duckdb.ProfilingInfo) int
	sum = func(p duckdb.ProfilingInfo) int {
		n, _ := strconv.Atoi(p.Metrics["OPERATOR_ROWS_SCANNED"])
		for _, c := range p.Children {
			n += sum(c)
		}
		return n
	}
	return sum(info)
}
