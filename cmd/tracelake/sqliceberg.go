package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	duckdb "github.com/duckdb/duckdb-go/v2"

	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// memoryDuckDB opens an in-memory DuckDB on one connection: every
// statement sees the same database.
func memoryDuckDB() (*sql.DB, error) {
	db, err := sql.Open("duckdb", "?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		return nil, fmt.Errorf("open in-memory duckdb: %w", err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// icebergRawColumns are the Iceberg raw table's columns beyond the DuckDB
// sink's: Kafka's topic and timestamp, and the event time.
var icebergRawColumns = []duckdbsink.Column{{Name: "ktopic", Type: "VARCHAR"}, {Name: "ktimestamp", Type: "TIMESTAMP"}, {Name: "event_time", Type: "TIMESTAMP"}}

// copyIcebergTable creates table name in db with those of cols the Iceberg
// table id has, in its order (a table from before a column was added lacks it until
// `tracelake run` adds it) and appends every row of its current snapshot.
// JSON columns are appended as VARCHAR and made JSON after: the appender
// would store a Go string into a JSON column as a JSON string.
func copyIcebergTable(ctx context.Context, snk *iceberg.Sink, id table.Identifier, db *sql.DB, name string, cols []duckdbsink.Column, scan ...table.ScanOption) (int, error) {
	tbl, err := snk.Catalog().LoadTable(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("load iceberg table %v: %w", id, err)
	}
	// In the table's order, which the scan keeps.
	pos := map[string]int{}
	for i, f := range tbl.Schema().Fields() {
		pos[f.Name] = i
	}
	cols = slices.DeleteFunc(cols, func(c duckdbsink.Column) bool {
		_, ok := pos[c.Name]
		return !ok
	})
	slices.SortStableFunc(cols, func(a, b duckdbsink.Column) int { return pos[a.Name] - pos[b.Name] })
	defs, names := make([]string, len(cols)), make([]string, len(cols))
	for i, c := range cols {
		typ := c.Type
		if typ == "JSON" {
			typ = "VARCHAR"
		}
		defs[i], names[i] = sqltext.Name(c.Name)+" "+typ, c.Name
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", sqltext.Name(name), strings.Join(defs, ", "))); err != nil {
		return 0, fmt.Errorf("create table %s: %w", name, err)
	}
	n, err := appendIcebergTable(ctx, tbl, names, db, name, nil, scan...)
	if err != nil {
		return n, err
	}
	for _, c := range cols {
		if c.Type != "JSON" {
			continue
		}
		if _, err := db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ALTER %s TYPE JSON", sqltext.Name(name), sqltext.Name(c.Name))); err != nil {
			return n, fmt.Errorf("make %s.%s JSON: %w", name, c.Name, err)
		}
	}
	return n, nil
}

// appendIcebergTable appends columns cols of every row of tbl's current
// snapshot (those the scan options keep) to table name in db, whose
// columns are those, in the order of tbl's schema (the scan's order); or,
// with convert, the columns convert makes of each scanned batch (which
// it does not release).
func appendIcebergTable(ctx context.Context, tbl *table.Table, cols []string, db *sql.DB, name string,
	convert func(arrow.RecordBatch) (arrow.RecordBatch, error), scan ...table.ScanOption) (int, error) {
	id := tbl.Identifier()
	_, batches, err := tbl.Scan(append(scan, table.WithSelectedFields(cols...))...).ToArrowRecords(ctx)
	if err != nil {
		return 0, fmt.Errorf("scan %v: %w", id, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	n := 0
	err = conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", name)
		if err != nil {
			return err
		}
		for rec, err := range batches {
			if err != nil {
				app.Close()
				return err
			}
			if convert != nil {
				var out arrow.RecordBatch
				if out, err = convert(rec); err == nil {
					err = appendRecord(app, out)
					out.Release()
				}
			} else {
				err = appendRecord(app, rec)
			}
			rec.Release()
			if err != nil {
				app.Close()
				return err
			}
			n += int(rec.NumRows())
		}
		return app.Close()
	})
	if err != nil {
		return n, fmt.Errorf("copy %v into duckdb: %w", id, err)
	}
	return n, nil
}

// appendRecord appends the rows of rec, whose columns are in the order of
// the DuckDB table's.
func appendRecord(app *duckdb.Appender, rec arrow.RecordBatch) error {
	row := make([]driver.Value, rec.NumCols())
	for i := range int(rec.NumRows()) {
		for c, col := range rec.Columns() {
			if col.IsNull(i) {
				row[c] = nil
				continue
			}
			switch a := col.(type) {
			case *array.String:
				row[c] = a.Value(i)
			case *array.Binary:
				row[c] = append([]byte(nil), a.Value(i)...) // the batch is released after
			case *array.Int64:
				row[c] = a.Value(i)
			case *array.Int32:
				row[c] = a.Value(i)
			case *array.Timestamp:
				row[c] = a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit)
			case *array.Float64:
				row[c] = a.Value(i)
			case *array.Boolean:
				row[c] = a.Value(i)
			case *array.Decimal128:
				dt := a.DataType().(*arrow.Decimal128Type)
				row[c] = duckdb.Decimal{Width: uint8(dt.Precision), Scale: uint8(dt.Scale), Value: a.Value(i).BigInt()}
			default:
				return fmt.Errorf("column %s: no conversion for Arrow type %s", rec.ColumnName(c), col.DataType())
			}
		}
		if err := app.AppendRow(row...); err != nil {
			return err
		}
	}
	return nil
}
