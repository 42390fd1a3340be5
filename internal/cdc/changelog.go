package cdc

import "github.com/tracelake/tracelake/internal/schema"

// The columns a changelog row holds after the source's columns (and
// before the coordinates, schema.Coordinates).
const (
	// OpColumn is the operation as Debezium writes it: c, u, d, r
	// (snapshot read) or t (truncate).
	OpColumn = "cdc_op"
	// PositionColumn is Position's text: it sorts as the source's log.
	PositionColumn = "cdc_position"
	// SourceTimeColumn is SourceTime, null when the source does not say.
	SourceTimeColumn = "cdc_source_time"
	// KeyColumn is the primary key's column names, a JSON array; null
	// when the source names none.
	KeyColumn = "cdc_key"
)

// UnavailableColumn names, in a changelog row, the source's columns
// whose values the source did not read (Column.Unavailable), a JSON array;
// null when it read them all. The column is not among LogColumns: a
// changelog table gains it with its first such row, so a table without
// any, and its merges, are as they were.
const UnavailableColumn = "cdc_unavailable"

// LogColumns are the changelog's own columns, in order.
var LogColumns = []schema.Column{
	{Name: OpColumn, Type: schema.String}, {Name: PositionColumn, Type: schema.String},
	{Name: SourceTimeColumn, Type: schema.Timestamp}, {Name: KeyColumn, Type: schema.JSON},
}

// Letter is the operation's letter in a changelog row (OpColumn), 0 for
// an event that makes no row (DDL, snapshot marks).
func (o Op) Letter() byte {
	switch o {
	case Insert:
		return 'c'
	case Update:
		return 'u'
	case Delete:
		return 'd'
	case Read:
		return 'r'
	case Truncate:
		return 't'
	}
	return 0
}
