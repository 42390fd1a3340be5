package databend

import (
	"context"
	"errors"
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
	added := 0
	for _, c := range missing {
		_, err := ss.query(ctx, addColumnSQL(quoted, c))
		var ce *codeError
		switch {
		case errors.As(err, &ce) && ce.code == addColumnExist:
			// Another process preparing at the same time (replicas
			// started together after an upgrade) added it after this
			// DESC: taken as added if it has the type wanted.
			if err := s.addedMeanwhile(ctx, ss, name, quoted, c); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("add column %s %s to %s: %w", c.Name, c.Type, name, err)
		default:
			added++
		}
	}
	if added > 0 {
		s.log.Info("added the declared columns an existing table lacked; its older rows read null in them", "table", name, "columns", added)
	}
	return nil
}

// addColumnExist is Databend's AddColumnExistError (common/exception
// exception_code.rs): ALTER TABLE … ADD COLUMN of a column the table has
// (expression/src/schema.rs TableSchema::add_columns).
const addColumnExist = 1108

// addedMeanwhile checks that column c, which an ALTER found the table
// already has, has the type wanted: a process of another release may
// have added it as something else.
func (s *Sink) addedMeanwhile(ctx context.Context, ss *session, name, quoted string, c schema.SinkColumn) error {
	desc, err := ss.query(ctx, "DESC "+quoted)
	if err != nil {
		return fmt.Errorf("describe table %s: %w", name, err)
	}
	for _, row := range desc.Rows {
		if len(row) < 2 || row[0] == nil || row[1] == nil || *row[0] != c.Name {
			continue
		}
		if typ := baseType(*row[1]); typ != c.Type {
			return &schema.TypeChangedError{Table: name, Column: c.Name, Have: typ, Want: c.Type}
		}
		return nil
	}
	return fmt.Errorf("add column %s %s to %s: Databend answers that it exists, and DESC does not show it", c.Name, c.Type, name)
}

func addColumnSQL(quoted string, c schema.SinkColumn) string {
	return fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s NULL", quoted, sqltext.Ident(c.Name), c.Type)
}
