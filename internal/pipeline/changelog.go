package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// ChangelogDecoder is the RowDecoder of database change events
// (kafka.format debezium, canal or maxwell): each change a cdc.Decoder
// makes of a record becomes a row of its source table's changelog table
// (Batch.Routed), the record's rows numbered by kindex. A record with no
// change (a tombstone, a heartbeat, DDL) makes no row; its offset is
// still covered by the ledger. Safe for concurrent use by the workers.
type ChangelogDecoder struct {
	dec    *cdc.Decoder
	router sink.Router
	// Beats, when set, keeps the heartbeats among the changes.
	Beats *cdc.Beats
	// changes recycles Decode's slices (*[]cdc.Change).
	changes sync.Pool

	mu sync.Mutex
	// columns are, per changelog table seen by this process, its columns
	// by name as DuckDB folds it (sqltext.DuckDBFold), each with its name and its type (in the sink's
	// words): those the table had when first seen, and those this
	// process's batches added since.
	columns map[string]map[string]tableColumn
	// defaulted are, per changelog table seen by this process, its
	// columns (by folded name) that have or had a default: those the
	// table has with one when first seen (the router's, when it says)
	// and those a change gave one since. Their nulls are written as
	// nulls (cdc.Column.KeepNull): a row without the column reads its
	// changelog column's default, which stays after the source's DROP
	// DEFAULT.
	defaulted map[string]map[string]bool
	// typeNames caches the sink's type names.
	typeNames map[sink.Column]string
}

// NewChangelogDecoder returns the decoder of o's format routing to the
// tables of r.
func NewChangelogDecoder(o cdc.Options, r sink.Router) (*ChangelogDecoder, error) {
	dec, err := cdc.NewDecoder(o)
	if err != nil {
		return nil, err
	}
	// The changelog tables made by earlier processes own their names: a
	// source table routed to one of them and not its own is refused.
	for log, src := range r.RoutedSources() {
		dec.Claim(log, cdc.Registered{Database: src.Database, Schema: src.Schema, Table: src.Name, Server: src.Server, Model: src.Model})
	}
	return &ChangelogDecoder{dec: dec, router: r, columns: map[string]map[string]tableColumn{}, defaulted: map[string]map[string]bool{}, typeNames: map[sink.Column]string{}}, nil
}

// reserved are the column names of a changelog row that are not the
// source's.
var reserved = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range append(cdc.LogColumns, schema.Coordinates...) {
		m[c.Name] = true
	}
	m[cdc.UnavailableColumn] = true
	return m
}()

// appendOneLine appends the JSON value v with its line breaks as spaces:
// outside a string's escapes, where JSON has no raw control character,
// they are whitespace between tokens (a message's object passed through
// as it was written), and a row is one line.
func appendOneLine(dst, v []byte) []byte {
	for {
		i := bytes.IndexByte(v, '\n')
		if i < 0 {
			return append(dst, v...)
		}
		dst = append(append(dst, v[:i]...), ' ')
		v = v[i+1:]
	}
}

// AppendRows implements RowDecoder.
func (d *ChangelogDecoder) AppendRows(b *sink.Batch, r *kgo.Record) (int, error) {
	p, _ := d.changes.Get().(*[]cdc.Change)
	if p == nil {
		p = new([]cdc.Change)
	}
	defer d.changes.Put(p)
	if d.Beats.SeeMessage(r.Topic, r.Value) {
		return 0, nil // a heartbeat message: time passing, no change
	}
	changes, err := d.dec.Decode((*p)[:0], r.Topic, r.Key, r.Value)
	*p = changes
	if err == nil {
		err = d.admit(changes)
	}
	if err != nil || !slices.ContainsFunc(changes, func(c cdc.Change) bool { return c.Op.HasRow() }) {
		// No row (a DDL, a drop, a tombstone, transaction metadata, or a
		// message dead-lettered): a Debezium schema change message marks
		// its topic as its server's schema change topic, whatever its
		// name, which the load records for the done marks (MarkReady: its
		// DROP TABLE holds the server's tables back while it has records
		// to load, and a dead letter of no table there holds them all).
		if server, ok := d.dec.SchemaChangeServer(r.Value); ok && server != "" {
			b.SawSchemaTopic(server, r.Topic)
		}
	}
	if err != nil {
		return 0, err
	}
	rows := 0
	for i := range changes {
		c := &changes[i]
		if c.Op.Letter() == 0 {
			continue
		}
		d.Beats.See(r.Topic, c)
		t := b.RoutedTo(c.Table.Log, sink.SourceTable{Database: c.Table.Database, Schema: c.Table.Schema, Name: c.Table.Name, Server: c.Table.Server(), Model: c.Table.Model})
		if old := oldKey(c); old != nil {
			// Canal and Maxwell send an update of a row's primary key
			// as one update of the new key (Debezium as a delete and a
			// create): the old key's row goes with a delete of its own,
			// at the same position and before it, of its key columns
			// (the other columns' old values are no row's).
			start := len(t.Rows)
			t.Rows = d.appendRow(t, c, old, cdc.Delete, r, rows)
			b.MaxLine = max(b.MaxLine, len(t.Rows)-start)
			b.RoutedBytes += int64(len(t.Rows) - start)
			rows++
		}
		start := len(t.Rows)
		t.Rows = d.appendRow(t, c, c.Columns, c.Op, r, rows)
		b.RoutedBytes += int64(len(t.Rows) - start)
		b.MaxLine = max(b.MaxLine, len(t.Rows)-start)
		rows++
	}
	return rows, nil
}

// oldKey is the key columns before an update that changes its row's
// primary key (a key column's value in Change.Before, where the source
// sends it, differs from the value after), nil for any other change.
func oldKey(c *cdc.Change) []cdc.Column {
	if c.Op != cdc.Update || len(c.Before) == 0 {
		return nil
	}
	changed := false
	for _, k := range c.Key {
		if !bytes.Equal(column(c.Before, k).Value, column(c.Columns, k).Value) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	key := make([]cdc.Column, len(c.Key))
	for i, k := range c.Key {
		key[i] = column(c.Before, k)
	}
	return key
}

// column is the column of cols named name, the zero Column (a null of
// unknown type, written as none) for none.
func column(cols []cdc.Column, name string) cdc.Column {
	for i := range cols {
		if cols[i].Name == name {
			return cols[i]
		}
	}
	return cdc.Column{}
}

// admit checks that every typed column of the changes has a type that
// the type its table has (or that an earlier change gave it in this
// process) holds, or that holds it (sink.Column.Holds: the column is
// widened), that its value fits its type, and records the columns they
// add or widen. Any other change of type refuses the record, which is
// dead-lettered with the reason, and adds nothing: the other tables go
// on, and so does this one with the records that fit it.
//
// Names are compared as DuckDB compares column names, ignoring the case
// of ASCII letters (sqltext.DuckDBFold; "é" and "É" are two names): a
// source column that differs only in case from a changelog column or
// from another column of the table (KOFFSET, ID beside id, price after
// Price) would fail the CREATE or ALTER TABLE of the whole load at every
// retry, so its record is refused instead.
func (d *ChangelogDecoder) admit(changes []cdc.Change) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	type added struct {
		table, lower string
		column       tableColumn
	}
	var adds []added
	for i := range changes {
		c := &changes[i]
		if c.Op.Letter() == 0 {
			continue
		}
		have := d.tableColumns(c.Table.Log)
		check := func(col *cdc.Column) error {
			if !typed(col) {
				// A null of an inferred type (a change without its
				// schema) of a column that has or had a default, of the
				// table's name: the row writes it (appendRow).
				if col.Value == nil && d.defaulted[c.Table.Log][sqltext.DuckDBFold(col.Name)] && have[sqltext.DuckDBFold(col.Name)].name == col.Name {
					col.KeepNull = true
				}
				return nil
			}
			if !utf8.ValidString(col.Name) {
				return fmt.Errorf("source table %s has a column named %s, which is not UTF-8 text", sourceName(c.Table), strconv.QuoteToASCII(col.Name))
			}
			if col.Name == "" || strings.IndexByte(col.Name, 0) >= 0 {
				// MySQL and PostgreSQL refuse both in an identifier, and
				// DuckDB's SQL cannot name such a column: creating the
				// changelog table would fail the load of every table.
				return fmt.Errorf("source table %s has a column named %s, which no database names a column", sourceName(c.Table), strconv.QuoteToASCII(col.Name))
			}
			// As DuckDB folds names, ASCII letters alone: "é" and "É"
			// are two columns to it, and Go's Unicode lower case took
			// them for one, dead-lettering every change of the table.
			lower := sqltext.DuckDBFold(col.Name)
			switch dflt := d.defaulted[c.Table.Log]; {
			case col.Default != "":
				dflt[lower] = true
			case dflt[lower]:
				col.KeepNull = true
			}
			if reserved[lower] {
				return fmt.Errorf("source table %s has a column %s, a name the changelog table %s uses for its own (DuckDB's column names ignore case)", sourceName(c.Table), col.Name, c.Table.Log)
			}
			if err := col.Fits(); err != nil {
				return fmt.Errorf("column %s of source table %s%s: %w", col.Name, sourceName(c.Table), sourceType(col), err)
			}
			typ := d.typeName(col)
			was, ok := have[lower]
			for _, a := range adds {
				if a.table == c.Table.Log && a.lower == lower {
					was, ok = a.column, true
				}
			}
			if ok && was.name != col.Name {
				return fmt.Errorf("column %s of source table %s is %s in the changelog table %s: DuckDB's column names ignore case, so they cannot be two columns",
					col.Name, sourceName(c.Table), was.name, c.Table.Log)
			}
			if !ok {
				adds = append(adds, added{c.Table.Log, lower, tableColumn{col.Name, typ}})
				return nil
			}
			if col.SourceText != nil && was.typ != typ {
				// A time the source wrote as text, in a column of text: a
				// release before ac48d7f made it so (it took Debezium's
				// isostring times for strings), and the column goes on
				// holding the source's text, neither a timestamp it cannot
				// hold (every change of the table dead-lettered after the
				// upgrade) nor a time of day's µs among the times' text.
				if h, known := d.router.ColumnOf(was.typ); known && h.Text() {
					col.Type, col.Precision, col.Scale, col.Value = schema.String, 0, 0, col.SourceText
					typ = d.typeName(col)
				}
			}
			if col.SourceType != "" && col.SourceText == nil && was.typ != typ {
				if h, known := d.router.ColumnOf(was.typ); known && h.Text() {
					textInto(col)
					typ = d.typeName(col)
				}
			}
			if col.SourceType == "" && was.typ != typ {
				if h, known := d.router.ColumnOf(was.typ); known {
					inferredInto(col, h, d.dec.Format() == cdc.FormatMaxwell)
					typ = d.typeName(col)
				}
			}
			if was.typ == typ {
				return nil
			}
			to, err := d.widen(c.Table.Log, was.typ, sinkColumn(col), slices.Contains(c.Key, col.Name))
			if err != nil {
				return fmt.Errorf("column %s of source table %s is %s in the changelog table %s, and this change makes it %s: %w",
					col.Name, sourceName(c.Table), was.typ, c.Table.Log, typ, err)
			}
			if to != was.typ {
				// Widened (INTEGER to BIGINT, DECIMAL(10,2) to
				// DECIMAL(12,2), an integer to a decimal's text) at
				// this change's load; later changes of the narrower
				// type fit.
				adds = append(adds, added{c.Table.Log, lower, tableColumn{col.Name, to}})
			}
			return nil
		}
		for j := range c.Columns {
			if err := check(&c.Columns[j]); err != nil {
				return err
			}
		}
		// An update of the key also writes the old key's delete
		// (AppendRows): its key columns go through the same checks.
		for _, col := range oldKey(c) {
			if err := check(&col); err != nil {
				return err
			}
		}
	}
	for _, a := range adds {
		d.columns[a.table][a.lower] = a.column
	}
	return nil
}

// textInto retypes col, a typed value in a column of text, as text where
// it has one: a null, which every column holds, and a DOUBLE as the
// number's text the source wrote (Java's Double.toString, NaN and the
// infinities as they are). A release before 2026-12-07 read the
// JsonConverter's float and double as an unknown type, a string: it
// loaded only the changes whose value was null, which made the column
// text, and after the upgrade every change of the table, a null's too,
// was dead-lettered as a DOUBLE no VARCHAR holds. Any other type is left
// to widen.
func textInto(col *cdc.Column) {
	switch {
	case col.Value == nil:
	case col.Type == schema.Float64:
		if col.Value[0] != '"' {
			col.Value = append(append(append(make([]byte, 0, len(col.Value)+2), '"'), col.Value...), '"')
		}
	default:
		return
	}
	col.Type, col.Precision, col.Scale = schema.String, 0, 0
}

// inferredInto retypes col, a value of a source without types (cdc's
// infer: Debezium without schemas, Maxwell) that is not of its column's
// type h, as the value of h it is:
//
//   - a number, as its exact text, in a DOUBLE column (one a Debezium
//     schema typed, or a release before 2026-12-06 made of a number with an
//     exponent): the number the source wrote, which Java's Double.toString
//     made and reads back as the same double, as the column's others;
//   - a string, number or boolean in a JSON column, of Maxwell (bare): a
//     JSON document, which Maxwell writes bare (JsonColumnDef.asJSON: a
//     RawJSONString), so a MySQL JSON column made JSON by an object also
//     brings "text", 5 and true. Debezium without schemas writes a JSON
//     column's document as its text in a string (io.debezium.data.Json):
//     such a string in a column a schema made JSON is not a string
//     document, and taken for one, {"a":1} was stored as the string
//     "{\"a\":1}"; it stays dead-lettered, as before;
//   - an integer that fits an INTEGER column (one a Debezium schema typed
//     int32), as an INTEGER: Kafka Connect's key and value converters are
//     configured apart, and a tombstone's key without its schema beside
//     values with theirs widened the key column to BIGINT, a type the
//     source never had (a larger integer still widens it).
func inferredInto(col *cdc.Column, h sink.Column, bare bool) {
	switch {
	case col.Value == nil:
	case h.Type == schema.Int32 && col.Type == schema.Int64:
		if _, err := strconv.ParseInt(string(col.Value), 10, 32); err == nil {
			col.Type = schema.Int32
		}
	case h.Type == schema.Float64 && col.Type == schema.Decimal:
		col.Type, col.Value = schema.Float64, col.Value[1:len(col.Value)-1]
	case h.Type == schema.JSON && col.Type != schema.JSON && bare:
		if col.Type == schema.Decimal {
			col.Value = col.Value[1 : len(col.Value)-1] // a number's text, quoted
		}
		col.Type = schema.JSON
	}
}

// widen is the type, in the sink's words, a column of table of type
// have takes for c's values (sink.Widen): have itself when it holds
// them. An error says why it cannot: no type holds both, a number would
// go into a key column of text, or the table cannot be altered.
func (d *ChangelogDecoder) widen(table, have string, c sink.Column, key bool) (string, error) {
	h, ok := d.router.ColumnOf(have)
	if !ok {
		return "", fmt.Errorf("%s is not a type tracelake makes, and it changes no other", have)
	}
	to, ok := sink.Widen(h, c)
	if !ok {
		return "", errors.New("no type holds every value of both exactly, and tracelake widens a column's type but changes it no other way (rename or alter the table yourself; the changes dead-lettered meanwhile stay in the dead-letter table)")
	}
	if key && to.Text() && !(h.Text() && c.Text()) {
		// As text, 7 and "007" (or a number and the same number written
		// another way) are two keys of what the source has as one.
		return "", errors.New("the column is part of the primary key, whose numbers as text would not compare as the source's (dead-lettered rather than one row made two)")
	}
	if to == h {
		return have, nil
	}
	if err := d.router.Widenable(table); err != nil {
		return "", fmt.Errorf("it would widen the column to %s, but %w", d.router.ColumnType(to), err)
	}
	return d.router.ColumnType(to), nil
}

// defaultsRouter is a sink.Router that says which columns of a routed
// table have a default (the duckdb sink's, read with its routed tables).
type defaultsRouter interface {
	RoutedDefaulted(table string) []string
}

// tableColumn is a changelog table's column: its name as the table
// spells it and its type in the sink's words.
type tableColumn struct{ name, typ string }

// tableColumns returns the columns of the changelog table by folded
// name (sqltext.DuckDBFold), reading them from the router on first sight. Called with mu held.
func (d *ChangelogDecoder) tableColumns(table string) map[string]tableColumn {
	have := d.columns[table]
	if have == nil {
		have = map[string]tableColumn{} // a table not created yet: empty
		for name, typ := range d.router.RoutedColumns(table) {
			have[sqltext.DuckDBFold(name)] = tableColumn{name, typ}
		}
		d.columns[table] = have
		dflt := map[string]bool{}
		if r, ok := d.router.(defaultsRouter); ok {
			for _, name := range r.RoutedDefaulted(table) {
				dflt[sqltext.DuckDBFold(name)] = true
			}
		}
		d.defaulted[table] = dflt
	}
	return have
}

// typed says whether a column's type is known: a value's, or a null's
// the source declares. A null of an inferred type (Debezium without
// schemas, Maxwell) says nothing, and the row leaves it out.
func typed(c *cdc.Column) bool { return c.Value != nil || c.SourceType != "" }

func (d *ChangelogDecoder) typeName(c *cdc.Column) string {
	k := sinkColumn(c)
	k.Name = ""
	name, ok := d.typeNames[k]
	if !ok {
		name = d.router.ColumnType(k)
		d.typeNames[k] = name
	}
	return name
}

func sinkColumn(c *cdc.Column) sink.Column {
	out := sink.Column{Name: c.Name, Type: c.Type}
	if c.Type == schema.Decimal {
		out.Precision, out.Scale = c.Precision, c.Scale
	}
	return out
}

// sourceType is the column's type as the source names it, for a reason,
// "" when it was inferred.
func sourceType(c *cdc.Column) string {
	if c.SourceType == "" {
		return ""
	}
	return " (" + c.SourceType + ")"
}

func sourceName(t *cdc.Table) string {
	if t.Schema != "" {
		return strconv.Quote(t.Database) + "." + strconv.Quote(t.Schema) + "." + strconv.Quote(t.Name)
	}
	return strconv.Quote(t.Database) + "." + strconv.Quote(t.Name)
}

// appendRow appends a changelog row of c, the index-th of record r, to
// t's rows, adding the columns it brings to t's: cols and op are c's
// (Columns and Op), or its row before an update of its key as a delete.
func (d *ChangelogDecoder) appendRow(t *sink.TableRows, c *cdc.Change, cols []cdc.Column, op cdc.Op, r *kgo.Record, index int) []byte {
	dst := append(t.Rows, '{')
	for j := range cols {
		col := &cols[j]
		if !typed(col) {
			if col.KeepNull {
				// A null of a column with a default, without a type: the
				// changelog table has the column (admit).
				dst = envelope.AppendString(dst, col.Name)
				dst = append(dst, ":null,"...)
			}
			continue
		}
		t.AddColumn(sinkColumn(col))
		if col.Default != "" {
			t.SetDefault(col.Name, col.Default)
		}
		if col.Value == nil && col.Default == "" && !col.KeepNull {
			continue // read as null
		}
		dst = envelope.AppendString(dst, col.Name)
		if col.Value == nil {
			// A null of a column with a default, or that had one
			// (KeepNull), written: a row without such a column is of a
			// change from before the column, and reads the default
			// (sink.TableRows.Defaults). Only such
			// nulls, so that the move counts the members of few rows
			// the slower way (duckdb's nonNullMembers).
			dst = append(dst, ":null,"...)
			continue
		}
		dst = appendOneLine(append(dst, ':'), col.Value)
		dst = append(dst, ',')
	}
	dst = appendUnavailable(t, dst, cols)
	dst = append(dst, `"`+cdc.OpColumn+`":"`...)
	dst = append(dst, op.Letter(), '"')
	if !c.Position.IsZero() {
		dst = append(dst, `,"`+cdc.PositionColumn+`":"`...)
		dst = append(c.Position.AppendText(dst), '"')
	}
	if c.SourceTime != 0 {
		dst = append(dst, `,"`+cdc.SourceTimeColumn+`":`...)
		dst = strconv.AppendInt(dst, c.SourceTime, 10)
	}
	if len(c.Key) > 0 {
		dst = append(dst, `,"`+cdc.KeyColumn+`":[`...)
		for i, k := range c.Key {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = envelope.AppendString(dst, k)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"`+schema.TopicColumn+`":`...)
	dst = envelope.AppendString(dst, r.Topic)
	dst = append(dst, `,"`+schema.PartitionColumn+`":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"`+schema.OffsetColumn+`":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"`+schema.IndexColumn+`":`...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	return append(dst, '}', '\n')
}

// appendUnavailable appends the member naming the columns of cols whose
// values the source did not read (cdc.UnavailableColumn), which the
// model's merge takes from the key's earlier change, and adds that column
// to t's; nothing when it read them all, the common case.
func appendUnavailable(t *sink.TableRows, dst []byte, cols []cdc.Column) []byte {
	n := 0
	for j := range cols {
		if !cols[j].Unavailable {
			continue
		}
		if n == 0 {
			t.AddColumn(sink.Column{Name: cdc.UnavailableColumn, Type: schema.JSON})
			dst = append(dst, `"`+cdc.UnavailableColumn+`":[`...)
		} else {
			dst = append(dst, ',')
		}
		dst = envelope.AppendString(dst, cols[j].Name)
		n++
	}
	if n > 0 {
		dst = append(dst, "],"...)
	}
	return dst
}
