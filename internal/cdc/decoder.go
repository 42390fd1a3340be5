// Package cdc decodes database change events read from Kafka — Debezium
// (MySQL and PostgreSQL connectors, JSON with or without schemas), Canal's
// flat messages and Maxwell's JSON — into routed, typed changes: for each
// row, the source table and the changelog and modelled tables it is routed
// to, the operation, the primary-key columns, the row with each column's
// logical type (internal/schema) and its value as the sinks' NDJSON holds
// it, the source position and time. The pipeline's ChangelogDecoder
// routes its changes to changelog tables (kafka.format debezium, canal or
// maxwell), and Beats keeps the heartbeats among them for the done marks.
package cdc

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/tracelake/tracelake/internal/envelope"
)

// Decoder turns Kafka records of one format into Changes. Safe for
// concurrent use; it remembers each source table it has seen (its route
// and column names), so its memory grows with the count of source tables,
// not of records.
type Decoder struct {
	format Format
	router router
	// unavailable is Debezium's placeholder for a value it did not read.
	unavailable placeholder
	// fields holds Debezium's field lists between records (*[]field).
	fields sync.Pool
	// canalTypes holds the parsed types of Canal's messages by their
	// text; shared with the decoders Fresh makes, the types being the
	// text's alone.
	canalTypes *canalTypeCache
}

// NewDecoder returns a decoder configured by o.
func NewDecoder(o Options) (*Decoder, error) {
	switch o.Format {
	case FormatDebezium, FormatCanal, FormatMaxwell:
	default:
		return nil, fmt.Errorf("format %q: want %s, %s or %s", o.Format, FormatDebezium, FormatCanal, FormatMaxwell)
	}
	d := &Decoder{format: o.Format, canalTypes: newCanalTypeCache(canalTypesBytes)}
	var err error
	if d.unavailable, err = newPlaceholder(o.UnavailablePlaceholder); err != nil {
		return nil, err
	}
	if d.router.log, err = parseTemplate(cmpOr(o.LogTemplate, DefaultLogTemplate)); err != nil {
		return nil, fmt.Errorf("changelog table name: %w", err)
	}
	if d.router.model, err = parseTemplate(cmpOr(o.ModelTemplate, DefaultModelTemplate)); err != nil {
		return nil, fmt.Errorf("model table name: %w", err)
	}
	if d.router.shards, err = compileShards(o.Shards); err != nil {
		return nil, err
	}
	d.router.tables, d.router.owners, d.router.modelClaims = map[string]*Table{}, map[string]string{}, map[string]bool{}
	return d, nil
}

// Format is the format d decodes.
func (d *Decoder) Format() Format { return d.format }

// Fresh returns a decoder of d's options that has seen no table and
// claims no name: a decoder for another purpose (the dead letters' tables,
// read beside the merges) whose routes do not change d's.
func (d *Decoder) Fresh() *Decoder {
	n := &Decoder{format: d.format, unavailable: d.unavailable, canalTypes: d.canalTypes}
	n.router.log, n.router.model, n.router.shards = d.router.log, d.router.model, d.router.shards
	n.router.tables, n.router.owners, n.router.modelClaims = map[string]*Table{}, map[string]string{}, map[string]bool{}
	return n
}

// Registered is a changelog table's entry in the registry an earlier
// process wrote: its source table, the Debezium servers (source.name) its
// changes came from, joined by commas ("" when not known: the table's
// changes are taken as any server's), and its model's name (made by a merge, or named by the
// templates when the table was created; "" when not known, a table of a
// release that did not record it not merged yet): while the templates
// name that model for the source table, its changes go on into the
// registered table, whatever cdc.log_table names now.
type Registered struct{ Database, Schema, Table, Server, Model string }

// Claim tells the decoder that the changelog table log exists and holds
// the changes of source table src (a table created by
// an earlier process): another source table routed to the same name is
// then refused, as it is when both are seen by this decoder, instead of
// mixing its changes into log; so is one whose changelog table would take
// the name of log's model. A name claimed or routed already keeps its
// owner, except that a changelog table claimed takes its name back from
// a model's claim.
func (d *Decoder) Claim(log string, src Registered) {
	d.router.claim(log, src)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Decode appends the changes of one Kafka record (its topic, key and
// value) to dst and returns it: zero for a record that holds none (a
// Kafka tombstone of a table not known, a Debezium heartbeat or
// logical-decoding message), one
// per row for Canal's messages of many rows, in their order. Changes in
// dst[len(dst):cap(dst)] are reused: pass dst[:0] of the last call's
// result to decode without allocating once warm.
//
// A record that cannot be decoded leaves dst as it was and returns an
// *Error.
func (d *Decoder) Decode(dst []Change, topic string, key, value []byte) (out []Change, err error) {
	n := len(dst)
	defer func() {
		// A record that makes decoding panic is a bad record, not a reason
		// to stop the pipeline at every restart.
		if p := recover(); p != nil {
			out, err = dst[:n], d.errorf("decoding it failed: %v", p)
		}
	}()
	if isNull(bytes.TrimSpace(value)) {
		if d.format == FormatDebezium {
			return d.debeziumTombstone(dst, topic, key)
		}
		return dst, nil // no change event: Canal and Maxwell send none
	}
	if !validJSON(value) {
		return dst, d.errorf("the value is not valid JSON")
	}
	value = value[envelope.SkipJSONSpace(value, 0):]
	if value[0] != '{' {
		return dst, d.errorf("the value is not a JSON object")
	}
	switch d.format {
	case FormatCanal:
		out, err = d.canal(dst, value)
	case FormatMaxwell:
		out, err = d.maxwell(dst, key, value)
	default:
		out, err = d.debezium(dst, topic, key, value)
	}
	if err != nil {
		return dst[:n], err
	}
	for i := n; i < len(out); i++ {
		if c := &out[i]; c.Op == Truncate && c.Table.shard {
			// The logical table's model holds every shard's rows and does
			// not say which shard each came from: applied, the truncation
			// would remove the other shards' rows too.
			return dst[:n], &Error{Reason: fmt.Sprintf("a truncation of %s, one shard of %s: the model holds every shard's rows and cannot tell this shard's, "+
				"so it is not applied (the shard's rows stay in the model until they change; reconcile --source finds them; delete this dead letter to let the table's done marks go on)",
				c.Table.source(), c.Table.Model), Log: c.Table.Log, SourceTime: c.SourceTime}
		}
	}
	return out, nil
}

// dropDatabase appends a truncation at pos, of source time us, of every
// table of database db the decoder knows: seen by it, or claimed (whose
// changes an earlier process saw). A DROP DATABASE drops them all, and
// the source names none of them in it: Maxwell's database-drop and
// Debezium's DROP DATABASE (a schema change of the database alone) name
// the database. A table whose changes the decoder has not seen yet stays
// out; the sources write a database's changes and its drop on one
// partition, in log order, unless told to partition otherwise (Maxwell's
// producer_partition_by other than database; Debezium's topic per table).
//
// keep, when not nil, says which of them the drop is of (Debezium's: not
// the tables of another server's database of that name).
func (d *Decoder) dropDatabase(dst []Change, db []byte, pos Position, us int64, keep func(*Table) bool) ([]Change, error) {
	tables, err := d.router.tablesOf(string(db))
	if err != nil {
		return dst, routeError(err)
	}
	for _, t := range tables {
		if keep != nil && !keep(t) {
			continue
		}
		dst = truncation(dst, t, pos, us)
	}
	return dst, nil
}

// truncation appends a truncation of t at pos, of source time us: a drop
// of the table, which leaves the rows changed before it out of its model.
func truncation(dst []Change, t *Table, pos Position, us int64) []Change {
	dst, c := next(dst)
	c.Op, c.Table, c.Position, c.SourceTime = Truncate, t, pos, us
	return dst
}

// Error is a record that cannot be decoded. It is permanent: the record
// goes to the dead-letter table with Reason.
type Error struct {
	// Reason is one sentence: "not a Debezium change event: op is
	// missing".
	Reason string
	// Claimed: the record is a change of a source table whose changelog
	// or model name another source table holds (see Decoder.Claim).
	Claimed bool
	// Log and SourceTime, when Log is set: the record is a change of that
	// changelog table at that source time (0: unknown) that cannot be
	// applied (a truncation of one shard), which holds back that table's
	// done marks alone.
	Log        string
	SourceTime int64
}

func (e *Error) Error() string { return e.Reason }

var formatNames = map[Format]string{FormatDebezium: "Debezium", FormatCanal: "Canal", FormatMaxwell: "Maxwell"}

func (d *Decoder) errorf(format string, args ...any) *Error {
	return &Error{Reason: "not a " + formatNames[d.format] + " change event: " + fmt.Sprintf(format, args...)}
}

// maxReuse bounds the arena a reused Change keeps: one 12 MB row must not
// pin 12 MB per slot.
const maxReuse = 1 << 20

// next appends a Change to dst, reusing the one past its end.
func next(dst []Change) ([]Change, *Change) {
	if len(dst) == cap(dst) {
		dst = append(dst, Change{})
		return dst, &dst[len(dst)-1]
	}
	dst = dst[:len(dst)+1]
	c := &dst[len(dst)-1]
	arena := c.arena[:0]
	if cap(arena) > maxReuse {
		arena = nil
	}
	*c = Change{Key: c.Key[:0], Columns: c.Columns[:0], Before: c.Before[:0], arena: arena}
	return dst, c
}

// source names the source table as the source does: database.table, or
// database.schema.table.
func (t *Table) source() string {
	if t.Schema != "" {
		return t.Database + "." + t.Schema + "." + t.Name
	}
	return t.Database + "." + t.Name
}

// keyNames appends the interned key names to c.Key.
func (t *Table) keyNames(c *Change, names [][]byte) {
	hint := 0
	for _, n := range names {
		c.Key = append(c.Key, t.cols.intern(n, &hint))
	}
}

// columnName returns a member's key unescaped (a copy only if escaped).
func columnName(key []byte) []byte {
	if bytes.IndexByte(key, '\\') < 0 {
		return key
	}
	quoted := make([]byte, 0, len(key)+2)
	quoted = append(append(append(quoted, '"'), key...), '"')
	name, _ := unquote(nil, quoted)
	return name
}

// text returns JSON string v's content, unescaped; nil if v is not a
// string.
func text(v []byte) []byte {
	if !isString(v) {
		return nil
	}
	s, _ := unquote(nil, v)
	return s
}

// Route returns the tables a source table's changes go to, as Decode
// routes them: for a merger, which finds the source tables in the
// registry of changelog tables and names their models.
func (d *Decoder) Route(database, schemaName, table string) (*Table, error) {
	return d.router.route([]byte(database), []byte(schemaName), []byte(table))
}
