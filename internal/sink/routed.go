package sink

import (
	"slices"

	"github.com/tracelake/tracelake/internal/schema"
)

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
	// Defaults are the source's column defaults by column name, each a
	// value as a row holds it (cdc.Column.Default): a row that does not
	// hold such a column (a change from before the source's ALTER TABLE
	// … ADD COLUMN … DEFAULT) reads the default there, as the source's
	// rows do; a row holds a null of such a column as null. The first
	// default seen of a column (SetDefault).
	Defaults map[string]string
	Rows     []byte
	has      map[string]int // Columns' indexes by name
}

// SourceTable names a table of a source database.
type SourceTable struct {
	Database, Schema, Name string
	// Server is the Debezium servers (source.name) whose changes of the
	// table were seen, joined by commas in the order seen, "" when the
	// changes name none or the format has no such name.
	Server string
	// Model is the model of the changelog table: the one its merges
	// made (the registry's model_table) or, before its first merge, the
	// one the templates named when the table was created; "" for a table
	// of a release that did not record that, not merged yet. The
	// pipeline sets it to the model the templates name, which the sink
	// records with a table it creates.
	Model string
}

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
		t := &b.Routed[i]
		if source.Server != t.Source.Server {
			// The table's servers grew since its first row of the
			// batch (they only grow): the load registers them all.
			t.Source.Server = source.Server
		}
		return t
	}
	if b.routed == nil {
		b.routed = map[string]int{}
	}
	b.routed[table] = len(b.Routed)
	b.Routed = append(b.Routed, TableRows{Table: table, Source: source})
	return &b.Routed[len(b.Routed)-1]
}

// SchemaTopic is a topic that carried a Debezium server's schema change
// messages (its DDL: DROP TABLE, DROP DATABASE), whatever its name: the
// connector names it as the server, but an SMT (RegexRouter) or a topic
// naming strategy may route it elsewhere.
type SchemaTopic struct{ Server, Topic string }

// SawSchemaTopic records that a record of topic was a schema change
// message of server (cdc.Decoder.SchemaChangeServer), once per batch.
func (b *Batch) SawSchemaTopic(server, topic string) {
	t := SchemaTopic{Server: server, Topic: topic}
	if !slices.Contains(b.SchemaTopics, t) {
		b.SchemaTopics = append(b.SchemaTopics, t)
	}
}

// RoutedFile is a staged routed table's rows: Path is the batch's file of
// routed rows, which holds every routed table's rows of the batch (each
// line names its table), so several RoutedFiles of one batch share it.
type RoutedFile struct {
	Table    string
	Source   SourceTable
	Columns  []Column
	Defaults map[string]string // TableRows.Defaults
	Path     string
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
	// ColumnOf is the logical type of a routed table's column of type typ
	// (in the sink's words, as RoutedColumns gives it), false for a type
	// the sink does not make. The sink's text type is text (a Decimal of
	// unknown precision): it holds a String's values and a decimal's
	// exact text alike. A change whose column's type the table's holds
	// (Column.Holds) loads as it is; one whose type holds the table's
	// widens the column at its load.
	ColumnOf(typ string) (Column, bool)
	// Widenable says why a column of routed table cannot be widened, nil
	// when it can (a table not created yet can); an error wrapping
	// ErrTransient when it could not tell.
	Widenable(table string) error
}

// AddColumn adds c to the table's columns, or, when they hold one of that
// name already, makes its type the narrowest that holds both (Join): the
// sink reads every row of the batch with it. Two types without one (the
// router's checks admit none) keep the first.
func (t *TableRows) AddColumn(c Column) {
	if i, ok := t.has[c.Name]; ok {
		if j, ok := Join(t.Columns[i], c); ok {
			t.Columns[i] = j
		}
		return
	}
	if t.has == nil {
		t.has = map[string]int{}
	}
	t.has[c.Name] = len(t.Columns)
	t.Columns = append(t.Columns, c)
}

// SetDefault records the source's default of column name (a value as a
// row holds it; TableRows.Defaults), the first one seen: the rows from
// before the column took the default of the ADD COLUMN, not one the
// source set later (ALTER COLUMN … SET DEFAULT), whose changes come
// after.
func (t *TableRows) SetDefault(name, value string) {
	if t.Defaults == nil {
		t.Defaults = map[string]string{}
	}
	if _, ok := t.Defaults[name]; !ok {
		t.Defaults[name] = value
	}
}

// Holds says whether every value of o's type is a value of c's, exactly
// and written the same, so that a column of c's type takes o's rows as
// they are, and a column of o's type may be widened to c's without
// changing a value or how it compares: a type holds itself; BIGINT and
// DOUBLE hold INTEGER; a Decimal of known precision holds the integers
// and Decimals of no more digits before and after the point; a Decimal
// of unknown precision, which sinks keep as its exact text, holds the
// integers (their digits) and Strings (text all). Nothing else: a known
// Decimal's text has its scale's zeros ("1.50", where a source's text may
// say "1.5000"), a double is exact neither as a Decimal nor as text, a
// number whose source column became a String changed meaning, not width,
// and a time, a boolean or JSON is no number.
func (c Column) Holds(o Column) bool {
	switch {
	case c.Type == o.Type && c.Precision == o.Precision && c.Scale == o.Scale:
		return true
	case c.Type == schema.String:
		return o.Text()
	case c.Text():
		// Integers go in as their digits, the same text whatever their
		// type (a DECIMAL(20,0) of an integer beyond BIGINT too).
		return o.Text() || o.Type == schema.Int32 || o.Type == schema.Int64 || o.KnownDecimal() && o.Scale == 0
	case c.Type == schema.Int64 || c.Type == schema.Float64:
		return o.Type == schema.Int32
	case c.Type == schema.Decimal:
		ci, cs, _ := c.digits()
		oi, os, ok := o.digits()
		return ok && oi <= ci && os <= cs
	}
	return false
}

// Widen is the type a column of type have becomes to take c's values
// too, if it may: have when it holds c; c when c holds have; for two
// numbers of which neither holds the other (BIGINT and DECIMAL(10,2)),
// the Decimal with the digits of both before and after the point
// (DECIMAL(21,2)), within 38 digits. A String never widens a column of
// numbers: see Holds.
func Widen(have, c Column) (Column, bool) {
	switch {
	case have.Holds(c):
		return have, true
	case c.Holds(have):
		return c, true
	}
	hi, hs, hok := have.digits()
	ci, cs, cok := c.digits()
	if !hok || !cok || max(hi, ci)+max(hs, cs) > maxDecimalDigits {
		return have, false
	}
	return Column{Name: have.Name, Type: schema.Decimal, Precision: max(hi, ci) + max(hs, cs), Scale: max(hs, cs)}, true
}

// Join is the narrowest type that holds both a and b, if one does, for
// rows of types a router admitted one after the other (Widen from the
// table's type) and that now load together without the ones between
// them: Widen either way, or text, which holds integers and Strings
// alike (a column widened from BIGINT to a decimal's text that then took
// strings).
func Join(a, b Column) (Column, bool) {
	if t, ok := Widen(a, b); ok {
		return t, true
	}
	if text := (Column{Name: a.Name, Type: schema.Decimal}); text.Holds(a) && text.Holds(b) {
		return text, true
	}
	return a, false
}

// maxDecimalDigits is the most digits a Decimal of known precision has
// (DuckDB's, Databend's and Iceberg's DECIMAL(38, s)).
const maxDecimalDigits = 38

// KnownDecimal says whether c is a Decimal of known precision and scale,
// which sinks store as DECIMAL(p,s); any other Decimal is its exact text.
func (c Column) KnownDecimal() bool {
	return c.Type == schema.Decimal && c.Precision >= 1 && c.Precision <= maxDecimalDigits && c.Scale >= 0 && c.Scale <= c.Precision
}

// Text says whether c's values are stored as text: a String's, or a
// Decimal's of unknown precision.
func (c Column) Text() bool {
	return c.Type == schema.String || c.Type == schema.Decimal && !c.KnownDecimal()
}

// digits are the most digits before and after the point a value of c's
// type has, for an integer or a Decimal of known precision.
func (c Column) digits() (before, after int, ok bool) {
	switch {
	case c.Type == schema.Int32:
		return 10, 0, true
	case c.Type == schema.Int64:
		return 19, 0, true
	case c.KnownDecimal():
		return c.Precision - c.Scale, c.Scale, true
	}
	return 0, 0, false
}
