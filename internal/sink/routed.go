package sink

import "github.com/tracelake/tracelake/internal/schema"

// TableRows are a batch's rows of one routed table: a changelog table of a
// source database's table (kafka.format debezium, canal or maxwell), which
// the sink creates on first sight and gives the columns its rows bring.
// Each row holds the source's columns, then the changelog's own
// (cdc.LogColumns), then the coordinates (schema.Coordinates), as NDJSON
// of internal/schema; a null column is left out of its row.
type TableRows struct {
	Table string
	// Source is the source table the rows come from (for a sharded table,
	// the first shard seen in the batch): what the sink's registry of
	// routed tables records when it creates Table.
	Source SourceTable
	// Columns are the source's columns the rows hold, in the order they
	// were first seen; the changelog's and the coordinates follow.
	Columns []Column
	Rows    []byte
	has     map[string]struct{} // Columns' names
}

// SourceTable names a table of a source database.
type SourceTable struct{ Database, Schema, Name string }

// Column is a routed table's column: its logical type and, for a Decimal,
// its precision and scale (0 and 0: not known; the sink keeps the exact
// text then).
type Column struct {
	Name             string
	Type             schema.Type
	Precision, Scale int
}

// RoutedTo returns the rows of table in the batch, adding them (empty,
// from source) on first use. A batch holds one entry per routed table
// whatever the count of records routed there.
func (b *Batch) RoutedTo(table string, source SourceTable) *TableRows {
	if i, ok := b.routed[table]; ok {
		return &b.Routed[i]
	}
	if b.routed == nil {
		b.routed = map[string]int{}
	}
	b.routed[table] = len(b.Routed)
	b.Routed = append(b.Routed, TableRows{Table: table, Source: source})
	return &b.Routed[len(b.Routed)-1]
}

// RoutedFile is a staged routed table's rows.
type RoutedFile struct {
	Table   string
	Source  SourceTable
	Columns []Column
	Path    string
}

// Router is a Sink that loads routed tables (Batch.Routed). The pipeline
// asks it, once per table and process, which columns a table already has,
// so that a row whose column changed type is dead-lettered before its
// load instead of failing the load of every table in it.
type Router interface {
	// ColumnType is c's type in the sink's words, as RoutedColumns names
	// a table's columns' types (c.Name is ignored).
	ColumnType(c Column) string
	// RoutedColumns returns the columns routed table has (name → type),
	// in a map the caller owns; empty when the table does not exist yet.
	// It asks no database: the sink knows its routed tables from Prepare
	// on and from its own loads.
	RoutedColumns(table string) map[string]string
	// RoutedSources returns every routed table the sink has, with the
	// source table it was created for (the registry's), in a map the
	// caller owns: a table keeps its name from one process to the next.
	RoutedSources() map[string]SourceTable
}

// AddColumn adds c to the table's columns unless it holds one of that
// name already.
func (t *TableRows) AddColumn(c Column) {
	if _, ok := t.has[c.Name]; ok {
		return
	}
	if t.has == nil {
		t.has = map[string]struct{}{}
	}
	t.has[c.Name] = struct{}{}
	t.Columns = append(t.Columns, c)
}
