// Package schema declares typed tables as data: a name, columns with a
// logical type, and the source coordinates every row carries. A decoder
// writes rows of a declared table; each sink maps the logical types to its
// own and loads the rows fenced by the coordinates, as it does the raw table.
package schema

import "math"

// Type is a column's logical type; each sink names its own.
type Type int

// The logical types. Rows carry them in NDJSON as: String and JSON as JSON
// text (JSON columns hold any JSON value), Int32/Int64 as numbers,
// Float64 as a number or the strings "NaN", "Infinity", "-Infinity",
// Bool as true/false, Timestamp as microseconds since the Unix epoch (UTC)
// or one of the infinities (TimestampInfinity),
// Decimal (dollars: 18 digits, 12 after the point) as a string of its exact
// decimal text. Any column may be null.
const (
	String Type = iota
	Int32
	Int64
	Float64
	Bool
	Timestamp
	JSON
	Decimal
)

// TimestampInfinity and TimestampNegativeInfinity are the Timestamp values
// of infinity and -infinity: int64's largest and its negation, past every
// instant a Timestamp column holds. Change capture writes them for
// PostgreSQL's infinite dates and timestamps; the DuckDB sink, the only one
// change capture loads into, reads them as its 'infinity' and '-infinity'
// where it moves changelog rows. No other decoder writes them.
const (
	TimestampInfinity         = math.MaxInt64
	TimestampNegativeInfinity = -math.MaxInt64
)

// Column is a column of a declared table.
type Column struct {
	Name string
	Type Type
}

// Table is a declared table.
type Table struct {
	// Name is the default table name (configurable).
	Name string
	// Columns in order; the coordinates (Coordinates) follow them.
	Columns []Column
	// Tenant and Time name the columns a sink partitions by, where it
	// partitions (Iceberg: tenant, then the day of the event time); ""
	// for none.
	Tenant, Time string
}

// The coordinates of a row: the Kafka record it came from and its index
// among the rows that record made (one OTLP message holds many spans). The
// ledger fences by (topic, partition, offset); verify counts rows per
// partition and finds an (offset, index) stored twice.
const (
	TopicColumn     = "ktopic"
	PartitionColumn = "kpartition"
	OffsetColumn    = "koffset"
	IndexColumn     = "kindex"
)

// Coordinates are the columns every declared table ends with.
var Coordinates = []Column{
	{TopicColumn, String}, {PartitionColumn, Int32}, {OffsetColumn, Int64}, {IndexColumn, Int32},
}

// AllColumns returns the table's columns followed by the coordinates.
func (t *Table) AllColumns() []Column {
	return append(append(make([]Column, 0, len(t.Columns)+len(Coordinates)), t.Columns...), Coordinates...)
}
