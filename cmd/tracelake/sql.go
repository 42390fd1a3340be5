package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

func cmdSQL(ctx context.Context, args []string) error {
	fs := newFlagSet("sql")
	var cf configFlags
	cf.register(fs)
	tenant := fs.String("tenant", "", "every table with a tenant_id column (the OpenTelemetry tables, genai_operations) shows only this tenant's rows")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	if fs.NArg() != 1 {
		return usagef("sql: want one query argument, got %d", fs.NArg())
	}
	cfg, err := cf.loadFor(false)
	if err != nil {
		return err
	}
	if *tenant != "" {
		if err := tenancy.CheckTenant(*tenant); err != nil {
			return usagef("--tenant: %v", err)
		}
	}
	switch cfg.Sink.Type {
	case config.SinkIceberg:
		return queryIceberg(ctx, cfg, fs.Arg(0), *tenant)
	case config.SinkDuckDB:
		snk, err := openDuckDB(cfg)
		if err != nil {
			return err
		}
		defer snk.Close()
		if *tenant != "" {
			if err := restrictToTenant(ctx, snk.DB(), *tenant); err != nil {
				return err
			}
		}
		return printQuery(ctx, os.Stdout, snk.DB(), fs.Arg(0))
	}
	return fmt.Errorf("tracelake sql reads the duckdb and iceberg sinks; sink.type is %s (query Databend with its own client, e.g. bendsql)", cfg.Sink.Type)
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
		WHERE column_name = 'tenant_id' AND table_catalog = current_database() ORDER BY ALL`)
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
		views = append(views, fmt.Sprintf("CREATE TEMP VIEW %s AS SELECT * FROM %s.%s.%s WHERE tenant_id = %s",
			sqltext.Ident(name), sqltext.Ident(catalog), sqltext.Ident(schema), sqltext.Ident(name), sqltext.String(tenant)))
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

// printQuery runs q and prints the result as an aligned table.
func printQuery(ctx context.Context, w io.Writer, db *sql.DB, q string) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	n := 0
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(cols))
		for i, v := range vals {
			cells[i] = formatCell(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	tw.Flush()
	fmt.Fprintf(w, "(%d rows)\n", n)
	return nil
}

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
	s = strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
