package duckdb

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// DB runs statements and queries: a database or a transaction.
type DB interface {
	Querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// AddColumns brings an existing table up to the columns want (a declared
// table's, TypedColumns, or a model's target built from it): each column
// of want the table lacks is added with ALTER TABLE … ADD COLUMN, after
// the table's own columns and nullable without a default, so the rows
// stored before read NULL (DuckDB fills an added column with its
// default, NULL without one: the ALTER TABLE statement's documentation,
// "ADD COLUMN"; src/storage/data_table.cpp, the DataTable constructor
// that adds a column). A column whose type is not want's is a
// *schema.TypeChangedError and nothing is added; a column the table has
// that want lacks is left alone (see schema.Missing). Loads insert by
// name, so the added columns' place at the end does not matter. It
// returns the columns added (none when the table is up to date, so a
// second start changes nothing). The table must exist.
//
// A JSON column added here is compressed as DuckDB picks, whatever
// JSONCompression says: DuckDB's ADD COLUMN takes no USING COMPRESSION.
func AddColumns(ctx context.Context, db DB, table string, want []Column) ([]Column, error) {
	have, err := TableColumns(ctx, db, table)
	if err != nil {
		return nil, err
	}
	if len(have) == 0 {
		return nil, fmt.Errorf("add columns to %s: the table does not exist", table)
	}
	return addMissing(ctx, db, table, have, want)
}

// addMissing adds the columns of want that have, the table's columns,
// lacks (AddColumns).
func addMissing(ctx context.Context, db DB, table string, have, want []Column) ([]Column, error) {
	missing, err := schema.Missing(table, SinkColumns(have), SinkColumns(want))
	if err != nil {
		return nil, err
	}
	added := make([]Column, 0, len(missing))
	for _, c := range missing {
		q := fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s", sqltext.Name(table), sqltext.Ident(c.Name), c.Type)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return added, fmt.Errorf("add column %s %s to %s: %w", c.Name, c.Type, table, err)
		}
		added = append(added, Column(c))
	}
	return added, nil
}

// SinkColumns are cols as a sink's columns (schema.SinkColumn): how the
// read path and the schema checks take a table's declared columns.
func SinkColumns(cols []Column) []schema.SinkColumn {
	out := make([]schema.SinkColumn, len(cols))
	for i, c := range cols {
		out[i] = schema.SinkColumn(c)
	}
	return out
}

// ensureDeclared creates a declared table (Options.Typed, Options.Derived)
// with its columns, or adds those a table created by an older release
// lacks.
func (s *Sink) ensureDeclared(ctx context.Context, table string, t *schema.Table) error {
	want := TypedColumns(t)
	have, err := TableColumns(ctx, s.db, table)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		return s.ensure(ctx, table, want)
	}
	added, err := AddColumns(ctx, s.db, table, want)
	if len(added) > 0 {
		s.log.Info("added the declared columns an existing table lacked; its older rows read null in them", "table", table, "columns", names(added))
	}
	return err
}

// ensureGrown creates a table of tracelake's with want, or adds the
// columns of want an existing one (made by an older release) lacks, then
// checks it as ensure does: the dead-letter table, which gained headers
// and create_time.
func (s *Sink) ensureGrown(ctx context.Context, table string, want []Column) error {
	have, err := TableColumns(ctx, s.db, table)
	if err != nil {
		return err
	}
	if len(have) > 0 {
		added, err := addMissing(ctx, s.db, table, have, want)
		if len(added) > 0 {
			s.log.Info("added the columns an existing table lacked; its older rows read null in them", "table", table, "columns", names(added))
		}
		if err != nil {
			return err
		}
	}
	return s.ensure(ctx, table, want)
}

func names(cols []Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Name
	}
	return out
}
