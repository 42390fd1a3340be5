package main

import (
	"bufio"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// cmdSQL is `tracelake sql`. On the DuckDB sink it also runs inside
// `tracelake run` (env), through the read path: one SELECT over the
// tables, for the tenant given (enforced there) or for the operator.
func cmdSQL(ctx context.Context, env *cmdEnv, args []string) error {
	fs := env.flagSet("sql")
	var cf configFlags
	cf.register(fs)
	tenant := fs.String("tenant", "", "every table with a tenant_id column (the OpenTelemetry tables, genai_operations) shows only this tenant's rows")
	if err := parseOnly(fs, commentedQueryIsArg(args)); err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usagef("sql: want one query argument, got %d", fs.NArg())
	}
	cfg, err := env.config(&cf, false)
	if err != nil {
		return err
	}
	if err := checkTenantArg(*tenant, flagGiven(fs, "tenant")); err != nil {
		return usagef("--tenant: %v", err)
	}
	if env.running != nil {
		return queryRunning(ctx, env, fs.Arg(0), *tenant)
	}
	switch cfg.Sink.Type {
	case config.SinkIceberg:
		reader, closeReader, err := openIcebergReader(ctx, cfg)
		if err != nil {
			return err
		}
		defer closeReader()
		return printRead(ctx, env.stdout, reader, fs.Arg(0), *tenant, "on iceberg")
	case config.SinkDuckDB:
		snk, err := openDuckDB(cfg, true)
		if err != nil {
			return err
		}
		defer snk.Close()
		if *tenant != "" {
			if err := restrictToTenant(ctx, snk.DB(), *tenant); err != nil {
				return err
			}
		}
		return printQuery(ctx, env.stdout, snk.DB(), fs.Arg(0))
	}
	return fmt.Errorf("tracelake sql reads the duckdb and iceberg sinks; sink.type is %s (query Databend with its own client, e.g. bendsql)", cfg.Sink.Type)
}

// queryRunning answers q inside `tracelake run` through the read path,
// which the file's loads go on beside: for tenant alone if not "", else
// for every tenant. The read path takes one SELECT over the tables by
// their plain names (no schema or catalog, no table functions), the
// same for the operator: a query it refuses is the caller's error.
func queryRunning(ctx context.Context, env *cmdEnv, q, tenant string) error {
	if env.running.reader == nil {
		return errors.New("this tracelake run could not start its read path (see its log); stop it to query the file")
	}
	return printRead(ctx, env.stdout, env.running.reader, q, tenant, "through a running tracelake run")
}

// printRead answers q through the read path r, for tenant alone if not
// "", else for every tenant, and prints the result; where says where a
// query the read path refuses was sent.
func printRead(ctx context.Context, w io.Writer, r query.Reader, q, tenant, where string) error {
	scope := tenancy.Operator
	if tenant != "" {
		scope = tenancy.One(tenant)
	}
	rr, err := r.Query(ctx, scope, q)
	var refused *query.RefusedError
	switch {
	case errors.As(err, &refused) && refused.Engine:
		// DuckDB's own answer (a column misspelt, an error raised while
		// the query ran): no rule of ours kept the caller out, so it
		// reads as on a stopped file (printQuery), not as refused.
		return fmt.Errorf("query: %s", refused.Reason)
	case errors.As(err, &refused):
		return fmt.Errorf("%w (%s, sql takes one SELECT over the tables, named without schema or catalog, and no table functions)", err, where)
	}
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer rr.Release()
	return writeTable(w, rr)
}

// restrictToTenant shadows every table of the database that has a
// tenant_id column with a temporary view of the tenant's rows alone, on
// the one connection queries then use (DuckDB resolves a name in the temp
// schema first). A convenience, not access control: a query that names
// the table with its catalog sees every tenant, as does anyone who can
// read the file.
func restrictToTenant(ctx context.Context, db *sql.DB, tenant string) error {
	db.SetMaxOpenConns(1)
	rows, err := db.QueryContext(ctx, `SELECT DISTINCT table_catalog, table_schema, table_name FROM information_schema.columns
		WHERE lower(column_name) = 'tenant_id' AND table_catalog = current_database() ORDER BY ALL`)
	if err != nil {
		return fmt.Errorf("--tenant: list the tables: %w", err)
	}
	var views []string
	for rows.Next() {
		var catalog, schema, name string
		if err := rows.Scan(&catalog, &schema, &name); err != nil {
			rows.Close()
			return err
		}
		// Named with its catalog: "main.t" would be the temp view itself.
		views = append(views, fmt.Sprintf("CREATE TEMP VIEW %s AS SELECT * FROM %s.%s.%s WHERE %s",
			sqltext.Ident(name), sqltext.Ident(catalog), sqltext.Ident(schema), sqltext.Ident(name), query.TenantIs("tenant_id", tenant)))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, v := range views {
		if _, err := db.ExecContext(ctx, v); err != nil {
			return fmt.Errorf("--tenant: %w", err)
		}
	}
	return nil
}

// printQuery runs q (any statements; the last one's result is printed)
// on one connection of db and prints the result as an aligned table.
func printQuery(ctx context.Context, w io.Writer, db *sql.DB, q string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		// The read path's reading of DuckDB's Arrow, not duckdb-go's:
		// duckdb-go's reads a UHUGEINT from 2^127 up as a negative number.
		rr, err := query.RunArrow(ctx, dc.(driver.Conn), q)
		if err != nil {
			return fmt.Errorf("query: %w", err)
		}
		defer rr.Release()
		return writeTable(w, rr)
	})
}

// cellEscapes shows a cell's line breaks and tabs as escapes, which would
// break the table's lines and columns (built once: a cell is printed per
// value of a result).
var cellEscapes = strings.NewReplacer("\n", `\n`, "\t", `\t`)

// alignRows is how many rows writeTable aligns together before it writes
// them: a tabwriter holds every line until it flushes, so aligning the
// whole result held all of it as text (in run's memory, through its
// socket) and wrote nothing until the last row.
const alignRows = 1000

// writeTable prints the records of rr as an aligned table: a line of
// column names, a line per row (formatCell), then the number of rows;
// the columns are aligned within each alignRows rows (the first block
// with the names), which are written as soon as they are read. Every
// `sql` prints through it, standalone or through `tracelake run`, so
// both print the same answer the same way.
func writeTable(w io.Writer, rr array.RecordReader) error {
	// A tabwriter writes each cell and its padding on its own: buffered,
	// a block is one write (through run's socket, not one per cell).
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	fields := rr.Schema().Fields()
	cells := make([]string, len(fields))
	for i, f := range fields {
		cells[i] = f.Name
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	n := 0
	for rr.Next() {
		rec := rr.RecordBatch()
		for row := range int(rec.NumRows()) {
			for i, col := range rec.Columns() {
				cells[i] = formatCell(cellValue(col, row))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
			n++
			if n%alignRows == 0 {
				if err := flushAll(tw, bw); err != nil {
					return err
				}
			}
		}
	}
	if err := rr.Err(); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	fmt.Fprintf(tw, "(%d rows)\n", n)
	return flushAll(tw, bw)
}

// flushAll writes what tw aligned so far through bw, to its writer.
func flushAll(tw *tabwriter.Writer, bw *bufio.Writer) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// cellValue is the Go value of row i of col that formatCell prints:
// numbers, strings and bytes as they are, times as time.Time (DuckDB's
// DATE, TIMESTAMP and TIMESTAMPTZ; infinite ones as DuckDB prints them),
// decimals as DuckDB writes them;
// anything else (lists, structs, maps, intervals, times of day) as Arrow
// writes it (JSON for the nested ones).
func cellValue(col arrow.Array, i int) any {
	if col.IsNull(i) {
		return nil
	}
	switch a := col.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return a.Value(i)
	case *array.Int16:
		return a.Value(i)
	case *array.Int32:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return a.Value(i)
	case *array.Uint16:
		return a.Value(i)
	case *array.Uint32:
		return a.Value(i)
	case *array.Uint64:
		return a.Value(i)
	case *array.Float32:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return a.Value(i)
	case *array.Timestamp:
		// DuckDB's infinite timestamps are int64's largest and its
		// negation, of any unit: no instant is stored there.
		switch v := a.Value(i); v {
		case math.MaxInt64:
			return infinity
		case -math.MaxInt64:
			return "-" + infinity
		default:
			return v.ToTime(a.DataType().(*arrow.TimestampType).Unit)
		}
	case *array.Date32:
		// DuckDB's infinite dates are int32's largest and its negation.
		switch v := a.Value(i); v {
		case math.MaxInt32:
			return infinity
		case -math.MaxInt32:
			return "-" + infinity
		default:
			return v.ToTime()
		}
	case *array.Date64:
		return a.Value(i).ToTime()
	case *array.Decimal128:
		t := a.DataType().(*arrow.Decimal128Type)
		return duckdb.Decimal{Width: uint8(t.Precision), Scale: uint8(t.Scale), Value: a.Value(i).BigInt()}
	case *array.Decimal256:
		// The read path's UHUGEINT (decimal256(39, 0)); Arrow's own text
		// of it has an exponent.
		t := a.DataType().(*arrow.Decimal256Type)
		return duckdb.Decimal{Width: uint8(t.Precision), Scale: uint8(t.Scale), Value: a.Value(i).BigInt()}
	}
	return col.ValueStr(i)
}

// infinity is how DuckDB prints an infinite timestamp or date (with a
// minus before it for -infinity), as formatCell does.
const infinity = "infinity"

// formatCell prints one value of a result: NULL, bytes quoted, times in
// UTC (a date alone at midnight), control characters escaped, and at most
// 120 bytes.
func formatCell(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		s = "NULL"
	case []byte:
		s = fmt.Sprintf("%q", x)
	case time.Time:
		// DuckDB DATE and TIMESTAMP values arrive as UTC times; a DATE
		// (or a TIMESTAMP at exactly midnight) prints as a date.
		s = x.UTC().Format("2006-01-02 15:04:05.999999")
		if x.Equal(x.Truncate(24 * time.Hour)) {
			s = x.UTC().Format(time.DateOnly)
		}
	default:
		s = fmt.Sprint(x)
	}
	s = cellEscapes.Replace(s)
	if len(s) > 120 {
		// Cut between characters: the first bytes of one alone are not
		// UTF-8, and no character of the value.
		cut := 117
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// commentedQueryIsArg ends the flags before an argument that begins with
// a SQL line comment ("-- why\nSELECT …", "--why\n…", "-----\n…"): the
// flag package would read it as a flag, but it names none a flag could
// have: its name (up to any "=") holds whitespace or begins with a dash
// (the flag package's bad syntax). No value of sql's flags (a tenant id,
// a path, a broker list) begins so.
func commentedQueryIsArg(args []string) []string {
	for i, a := range args {
		if a == "--" {
			return args
		}
		if isLineComment(a) {
			return slices.Concat(args[:i], []string{"--"}, args[i:])
		}
	}
	return args
}

// isLineComment reports whether a, beginning with two dashes, is no
// flag's: its name holds whitespace or begins with another dash.
func isLineComment(a string) bool {
	name, ok := strings.CutPrefix(a, "--")
	if !ok || name == "" {
		return false
	}
	name, _, _ = strings.Cut(name, "=")
	return strings.HasPrefix(name, "-") || strings.ContainsFunc(name, unicode.IsSpace)
}
