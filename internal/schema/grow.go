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
