package iceberg

import (
	"context"
	"fmt"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/schema"
)

// addColumns brings a table tracelake created (raw, dead-letter, a
// declared table, a derived or dedup table) up to the columns want: each
// column of want the table lacks is added by schema evolution, optional,
// so the data files written before (which have no such field id) read
// null in it (the Iceberg spec, "Schema Evolution": "Default values are
// not supported for new columns; a new column is null for rows written
// before it"; iceberg-go table/update_schema.go AddColumn assigns the
// next field id). It goes after the table's columns; writes map columns
// by name (arrowSchema), so its place does not matter. A column of
// another type is a *schema.TypeChangedError and nothing is added; a
// column the table has that want lacks is left alone (diffSchema then
// requires it optional). Another process adding the same columns at the
// same time makes the commit fail; the table is read again and, if it
// has them now, that is success.
func (s *Sink) addColumns(ctx context.Context, tbl *table.Table, want *iceberggo.Schema) (*table.Table, error) {
	missing, err := schema.Missing(name(tbl.Identifier()), sinkColumns(tbl.Schema()), sinkColumns(want))
	if err != nil || len(missing) == 0 {
		return tbl, err
	}
	txn := tbl.NewTransaction()
	update := txn.UpdateSchema(true, false)
	names := make([]string, len(missing))
	for i, c := range missing {
		f, _ := want.FindFieldByName(c.Name)
		update = update.AddColumn([]string{c.Name}, f.Type, f.Doc, false, nil)
		names[i] = c.Name
	}
	err = update.Commit()
	var updated *table.Table
	if err == nil {
		updated, err = txn.Commit(ctx)
	}
	if err != nil {
		if again, lerr := s.cat.LoadTable(ctx, tbl.Identifier()); lerr == nil {
			if left, merr := schema.Missing(name(tbl.Identifier()), sinkColumns(again.Schema()), sinkColumns(want)); merr == nil && len(left) == 0 {
				return again, nil
			}
		}
		return nil, fmt.Errorf("add columns %v to %s: %w", names, name(tbl.Identifier()), err)
	}
	s.log.Info("added the declared columns an existing table lacked; its older rows read null in them", "table", name(tbl.Identifier()), "columns", names)
	return updated, nil
}

// sinkColumns are a schema's top-level columns with Iceberg's type names
// (long, string, timestamptz, decimal(18, 12)…).
func sinkColumns(sc *iceberggo.Schema) []schema.SinkColumn {
	fields := sc.Fields()
	out := make([]schema.SinkColumn, len(fields))
	for i, f := range fields {
		out[i] = schema.SinkColumn{Name: f.Name, Type: f.Type.String()}
	}
	return out
}
