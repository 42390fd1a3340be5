package flightsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	afsql "github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	duckdb "github.com/duckdb/duckdb-go/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tracelake/tracelake/internal/cputime"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// benchSpans is how many spans BenchmarkStreamSpans's table holds, half
// of them tenant a's.
const benchSpans = 1_000_000

// spanTable is a DuckDB file with the OpenTelemetry spans table as the
// sink declares it, filled with n spans of tenants a and b: a value of
// its type in every column.
func spanTable(b *testing.B, n int) *sql.DB {
	b.Helper()
	db, err := sql.Open("duckdb", filepath.Join(b.TempDir(), "spans.duckdb"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	cols := duckdbsink.TypedColumns(otel.TableOf(otel.SignalTraces))
	defs, values := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		defs[i] = fmt.Sprintf("%q %s", c.Name, c.Type)
		switch {
		case c.Name == "tenant_id":
			values[i] = "CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END"
		case c.Type == "VARCHAR":
			values[i] = fmt.Sprintf("'%s-' || (i %% 1000)", c.Name)
		case c.Type == "JSON":
			values[i] = `'{"service.name": "svc-' || (i % 7) || '", "gen_ai.request.model": "gpt-4o"}'`
		case c.Type == "TIMESTAMP":
			values[i] = "TIMESTAMP '2026-12-01' + INTERVAL (i) MILLISECONDS"
		case c.Type == "BOOLEAN":
			values[i] = "i % 3 = 0"
		default:
			values[i] = fmt.Sprintf("(i %% 100000)::%s", c.Type)
		}
	}
	for _, q := range []string{
		fmt.Sprintf("CREATE TABLE otel_spans (%s)", strings.Join(defs, ", ")),
		fmt.Sprintf("INSERT INTO otel_spans SELECT %s FROM range(%d) t(i)", strings.Join(values, ", "), n),
		"CHECKPOINT",
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// BenchmarkStreamSpans streams one tenant's spans (SELECT * FROM
// otel_spans, 500,000 rows of the declared table's columns) through
// Arrow Flight SQL over loopback TCP — a client in the same process
// reading every batch — beside its yardstick in the same run: DuckDB's
// own Arrow export of the same query on a connection of the same
// database, in the same process, with no read path around it (duckdb-go's
// Arrow reader: a materialized result, as the read path runs queries on
// DuckDB).
func BenchmarkStreamSpans(b *testing.B) {
	db := spanTable(b, benchSpans)
	const q = "SELECT * FROM otel_spans"
	ctx := context.Background()
	b.Run("duckdb_arrow", func(b *testing.B) {
		var rows int64
		cpu := -cputime.Process()
		for b.Loop() {
			conn, err := db.Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			err = conn.Raw(func(dc any) error {
				a, err := duckdb.NewArrowFromConn(dc.(driver.Conn))
				if err != nil {
					return err
				}
				rr, err := a.QueryContext(ctx, q+" WHERE tenant_id = 'a'")
				if err != nil {
					return err
				}
				defer rr.Release()
				rows = drain(rr)
				return rr.Err()
			})
			conn.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		cpu += cputime.Process()
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
	b.Run("flight_sql", func(b *testing.B) {
		reader, err := query.NewDuckDB(ctx, db, query.DuckDBOptions{})
		if err != nil {
			b.Fatal(err)
		}
		srv, err := Start(Options{Listen: "127.0.0.1:0", Reader: reader, Log: slog.New(slog.DiscardHandler),
			Tenants: tenancy.Resolver{}}) // the tenant each call names
		if err != nil {
			b.Fatal(err)
		}
		defer srv.Shutdown(ctx)
		c, err := afsql.NewClient(srv.Addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cctx := metadata.AppendToOutgoingContext(ctx, "x-scope-orgid", "a")
		var rows int64
		cpu := -cputime.Process()
		for b.Loop() {
			info, err := c.Execute(cctx, q)
			if err != nil {
				b.Fatal(err)
			}
			rows = 0
			for _, ep := range info.Endpoint {
				rdr, err := c.DoGet(cctx, ep.Ticket)
				if err != nil {
					b.Fatal(err)
				}
				rows += drain(rdr)
				err = rdr.Err()
				rdr.Release()
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		if rows != benchSpans/2 {
			b.Fatalf("streamed %d rows, want tenant a's %d", rows, benchSpans/2)
		}
		cpu += cputime.Process()
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
}

// drain reads every batch of rr and counts its rows.
func drain(rr array.RecordReader) int64 {
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n
}
