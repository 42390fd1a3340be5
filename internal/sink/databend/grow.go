package databend

import (
	"context"
	"fmt"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// addColumns brings a declared table that exists (desc is its DESC) up to
// the columns want: each declared column it lacks is added with ALTER
// TABLE … ADD COLUMN … NULL, nullable with no default, after the table's
// own columns, so the rows stored before read NULL (databend's
// tests/sqllogictests/suites/base/05_ddl/05_0028_ddl_alter_table_add_drop_column.test:
// "ADD COLUMN e int" on a table with rows, which then read NULL in it;
// interpreters/interpreter_table_add_column.rs, TableSchema::add_columns
// appending the field). COPY matches an NDJSON row's fields to the
// columns by name, so the added column's place does not matter, and a
// column no longer declared is left alone (it reads NULL in new rows:
// MISSING_FIELD_AS = FIELD_DEFAULT). A declared column of another type
// is a *schema.TypeChangedError; nothing is added then. Types compare as
// baseType reduces DESC's names (Nullable, aliases).
func (s *Sink) addColumns(ctx context.Context, ss *session, name, quoted string, want []column, desc *result) error {
	var have []schema.SinkColumn
	for _, row := range desc.Rows {
		if len(row) < 2 || row[0] == nil || row[1] == nil {
			continue
		}
		have = append(have, schema.SinkColumn{Name: *row[0], Type: baseType(*row[1])})
	}
	declared := make([]schema.SinkColumn, len(want))
	for i, c := range want {
		declared[i] = schema.SinkColumn{Name: c.name, Type: c.typ}
	}
	missing, err := schema.Missing(name, have, declared)
	if err != nil {
		return err
	}
	for _, c := range missing {
		if _, err := ss.query(ctx, addColumnSQL(quoted, c)); err != nil {
			return fmt.Errorf("add column %s %s to %s: %w", c.Name, c.Type, name, err)
		}
	}
	if len(missing) > 0 {
		s.log.Info("added the declared columns an existing table lacked; its older rows read null in them", "table", name, "columns", len(missing))
	}
	return nil
}

func addColumnSQL(quoted string, c schema.SinkColumn) string {
	return fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s NULL", quoted, sqltext.Ident(c.Name), c.Type)
}
