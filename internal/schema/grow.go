package schema

import (
	"errors"
	"fmt"
)

// SinkColumn is a column as a sink sees it: its name and its type in the
// sink's own words, written the same way for a table's columns and for
// the declared ones so that the sink's types compare as strings.
type SinkColumn struct{ Name, Type string }

// TypeChangedError is a declared column that a table has with another
// type. tracelake never casts a column in place: the rows already stored
// would change meaning, and a load of the declared type may not fit the
// old one. The user decides (rename the table, or change the column with
// the engine's own ALTER).
type TypeChangedError struct {
	Table, Column string
	Have, Want    string // the sink's type names
}

func (e *TypeChangedError) Error() string {
	return fmt.Sprintf("table %s has column %s as %s, but it is declared %s: tracelake does not change a column's type (rename or alter the table yourself)",
		e.Table, e.Column, e.Have, e.Want)
}

// Missing compares the columns a table has with those declared for it
// (want) and returns, in want's order, the declared columns the table
// lacks: what a sink adds (nullable, so that the rows stored before read
// null) when a release declares more columns than the one that created
// the table. A column the table has that want does not (declared once,
// since dropped, or added by the user) is left alone: loads name their
// columns, so it stays null in new rows, and it must therefore be
// nullable, which every column tracelake creates is. A declared column
// present with another type is a TypeChangedError, one per column,
// joined.
func Missing(table string, have, want []SinkColumn) ([]SinkColumn, error) {
	types := make(map[string]string, len(have))
	for _, c := range have {
		types[c.Name] = c.Type
	}
	var add []SinkColumn
	var errs []error
	for _, c := range want {
		typ, ok := types[c.Name]
		switch {
		case !ok:
			add = append(add, c)
		case typ != c.Type:
			errs = append(errs, &TypeChangedError{Table: table, Column: c.Name, Have: typ, Want: c.Type})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return add, nil
}

// exactCopies are declared columns that hold another column's value
// exactly where that one rounds it (time_unix_nano is time to the
// nanosecond), declared by a later release than that column.
var exactCopies = map[string]bool{"time_unix_nano": true, "start_time_unix_nano": true, "observed_time_unix_nano": true}

// InContentKey says whether a column is part of the key that identifies
// a row by its content (a log record's, a point's: the dedup model's).
// The exact copies are not: the column they copy already is, and a row
// stored before they were declared (null in them) and its copy stored
// after (a client's retry across the upgrade) must share a key, as must
// the keys made before the upgrade and those made after.
func InContentKey(col string) bool { return !exactCopies[col] }
