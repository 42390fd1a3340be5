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
	icetable "github.com/apache/iceberg-go/table"
	duckdb "github.com/duckdb/duckdb-go/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tracelake/tracelake/internal/cputime"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
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
		streamFlight(b, reader, q)
	})
}

// BenchmarkStreamSpansIceberg is BenchmarkStreamSpans over the same spans
// in Iceberg (a SQLite catalog and a local warehouse, loaded as the
// pipeline loads: a file per tenant and batch of 10,000 spans), read as
// `tracelake serve` reads them (query.NewIceberg): its yardstick is the
// reader's own Arrow result of the query for tenant a, read in the same
// process with no transport (DuckDB's export of its scan of the files).
func BenchmarkStreamSpansIceberg(b *testing.B) {
	db := spanTable(b, benchSpans)
	dir := b.TempDir()
	snk, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: "otel_spans", Typed: &otel.Spans})
	if err != nil {
		b.Fatal(err)
	}
	defer snk.Close()
	ctx := context.Background()
	if err := snk.Prepare(ctx); err != nil {
		b.Fatal(err)
	}
	icebergtest.LoadTable(b, db, "otel_spans", &otel.Spans, benchSpans, 10_000, 10, snk)
	reader, err := query.NewIceberg(ctx, snk.Catalog(),
		[]query.IcebergTable{{Name: "otel_spans", ID: icetable.Identifier{"tracelake", "otel_spans"}, Columns: duckdbsink.SinkColumns(duckdbsink.TypedColumns(&otel.Spans))}}, query.IcebergOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	const q = "SELECT * FROM otel_spans"
	b.Run("reader_arrow", func(b *testing.B) {
		var rows int64
		cpu := -cputime.Process()
		for b.Loop() {
			rr, err := reader.Query(ctx, tenancy.One("a"), q)
			if err != nil {
				b.Fatal(err)
			}
			rows = drain(rr)
			err = rr.Err()
			rr.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		if rows != benchSpans/2 {
			b.Fatalf("read %d rows, want tenant a's %d", rows, benchSpans/2)
		}
		cpu += cputime.Process()
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
	b.Run("flight_sql", func(b *testing.B) { streamFlight(b, reader, q) })
}

// streamFlight runs q for tenant a through Arrow Flight SQL served from
// reader over loopback TCP, a client in the same process reading every
// batch, and reports rows per second and CPU per run.
func streamFlight(b *testing.B, reader query.Reader, q string) {
	ctx := context.Background()
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
}

// drain reads every batch of rr and counts its rows.
func drain(rr array.RecordReader) int64 {
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	return n
}
