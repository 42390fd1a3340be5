package cdc

import (
	"strconv"
	"sync/atomic"

	"github.com/tracelake/tracelake/internal/schema"
)

// Op is what a Change does. Insert, Update, Delete and Read carry a row;
// the others are events about the table, with no row.
type Op uint8

// The operations. The zero Op is never returned.
const (
	// Insert is a row created at the source: Debezium "c", Canal INSERT,
	// Maxwell insert.
	Insert Op = iota + 1
	// Update replaces the row of its key: Debezium "u", Canal UPDATE,
	// Maxwell update.
	Update
	// Delete removes the row of its key; its Columns are the row as it was
	// (Debezium's before image; Canal's and Maxwell's data), so the key can
	// be found.
	Delete
	// Read is a row of a snapshot (Debezium "r", Maxwell bootstrap-insert):
	// it states the row as of its position, like an upsert.
	Read
	// SchemaChange is a DDL statement (Canal isDdl, Maxwell table-alter and
	// its kin): Statement holds its text; the row types of the table's next
	// changes say what it did.
	SchemaChange
	// Truncate empties the table (Debezium "t", Canal TRUNCATE; a DROP TABLE:
	// Canal ERASE, Maxwell table-drop).
	Truncate
	// SnapshotStart and SnapshotEnd frame a Maxwell bootstrap of the table
	// (bootstrap-start, bootstrap-complete).
	SnapshotStart
	SnapshotEnd
)

var opNames = [...]string{
	Insert: "insert", Update: "update", Delete: "delete", Read: "read",
	SchemaChange: "schema_change", Truncate: "truncate",
	SnapshotStart: "snapshot_start", SnapshotEnd: "snapshot_end",
}

// String is the operation's name as a changelog row can store it.
func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// HasRow says whether changes of o carry a row image.
func (o Op) HasRow() bool { return o >= Insert && o <= Read }

// Change is one change of one source row, or one event about a source
// table (Op.HasRow false), decoded from a Kafka record.
//
// A Change may alias the record's value: Column.Value and Statement point
// into it where the source's text is already the value's NDJSON text (a
// 12 MB string is not copied). The caller keeps the value unmodified while
// it uses the Change, and the Change is overwritten by the next Decode
// that reuses it (Decoder.Decode).
type Change struct {
	Op Op
	// Table is where the change comes from and goes to; shared by every
	// change of the same source table, never modified.
	Table *Table
	// Key names the primary-key columns in key order; nil when the source
	// names none (a table without a primary key, a Maxwell message without
	// primary_key_columns or its Kafka key).
	Key []string
	// Columns is the row in the source's column order: the row after the
	// change, or before it for a Delete. Nil when !Op.HasRow().
	Columns []Column
	// Before is an Update's row before the change where the source sends
	// it (Debezium's before; Canal's and Maxwell's data with old laid over
	// it), so that a changed key can be seen; empty otherwise.
	Before []Column
	// Position is where the change is in its source's log.
	Position Position
	// SourceTime is when the change was made at the source, in
	// microseconds since the Unix epoch; 0 when the source does not say.
	// Debezium: source.ts_us, else source.ts_ms; Canal: es; Maxwell: ts
	// (whole seconds).
	SourceTime int64
	// Statement is a SchemaChange's DDL text, JSON-unescaped.
	Statement []byte

	// arena holds the values that are not the source's text (decoded
	// decimals, timestamps); reused by the next Decode.
	arena []byte
}

// Table is a source table and the tables its changes are routed to.
type Table struct {
	// Database, Schema and Name name the source table as the source does
	// (the shard, for a sharded table). Schema is PostgreSQL's schema
	// (Debezium source.schema), "" for MySQL.
	Database, Schema, Name string
	// Log and Model are the routed changelog and modelled table names:
	// lowercase [a-z0-9_], the same for every shard of a logical table
	// (Options.Shards), distinct for distinct logical tables.
	Log, Model string

	// shard: a shard rule maps the source table to its logical table.
	shard bool

	// servers are the Debezium servers (source.name) whose changes of
	// the table were decoded in this process, after those the registry
	// records for its changelog table when an earlier process created it
	// (Decoder.Claim): fromOtherServers.
	servers atomic.Pointer[serverSet]

	// key is the key (its column names) of the table's latest Debezium
	// change with a row decoded in this process, nil before one: a
	// tombstone keyed otherwise is not the table's (debeziumTombstone).
	key atomic.Pointer[[]string]

	// cols interns its column names, types Canal's type names, defaults
	// its columns' defaults (Column.Default).
	cols, types, defaults names
}

// Column is one column of a row.
type Column struct {
	Name string
	Type schema.Type
	// Precision and Scale of a Decimal, 0 and 0 when the source does not
	// say (inferred, or Debezium's VariableScaleDecimal).
	Precision, Scale int
	// SourceType is the type as the source names it: Debezium's logical
	// name (io.debezium.time.Date) or else its schema type (int64), Canal's
	// mysqlType (decimal(10,2)) or, without one, "sqlType N" (java.sql.Types).
	// "" when the type was inferred from the
	// value (Debezium without schemas, Maxwell): then an integral number
	// is Int64, any other number Decimal (Float64 with an exponent), and a
	// null String, so one column's type can differ between rows and the
	// consumer widens it.
	SourceType string
	// Value is the value as the NDJSON of internal/schema holds it (see its
	// Type); nil for null.
	Value []byte
	// SourceText is the JSON string the source wrote a time as
	// (Debezium's time.precision.mode=isostring: IsoDate, IsoTimestamp
	// and IsoTime) or a BIT(n)'s bits as (Debezium's Bits, base64), nil
	// for any other value. A release before ac48d7f (times) or before
	// 2026-12-07 (bits) took them for strings, so a changelog table it
	// made holds them in text columns, which take this text rather than
	// the typed Value.
	SourceText []byte
	// Default is the value (as Value holds one) the source gives a row
	// that does not hold the column: Debezium's schema default, which a
	// column added with ALTER TABLE … ADD COLUMN … DEFAULT fills every
	// existing row with, without a change of them; "" for none.
	Default string
	// KeepNull says a null of the column is written as one though it
	// has no Default now: its changelog column may have one (the source
	// dropped the column's default since it added it), which a row
	// without the column reads (set by the pipeline).
	KeepNull bool
	// Unavailable says the source did not read the column's value
	// (Debezium's placeholder: a PostgreSQL TOAST value an update, or a
	// delete, left unchanged, under REPLICA IDENTITY DEFAULT; the create
	// of an update that changed the primary key too): Value is nil, and
	// the model takes the value the key's latest earlier change gave, or
	// a create's old key's (the changelog row names the column in
	// UnavailableColumn).
	Unavailable bool

	// from, to locate a value written to the change's arena until the
	// arena stops growing (settle).
	from, to int32
}
