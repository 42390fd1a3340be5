package schema

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestMissing(t *testing.T) {
	f := func(have, want, add []SinkColumn, changed []TypeChangedError) {
		t.Helper()
		got, err := Missing("t", have, want)
		var gotChanged []TypeChangedError
		if err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var tc *TypeChangedError
				if !errors.As(e, &tc) {
					t.Fatalf("error %v is not a TypeChangedError", e)
				}
				gotChanged = append(gotChanged, *tc)
			}
		}
		if !reflect.DeepEqual(got, add) || !reflect.DeepEqual(gotChanged, changed) {
			t.Fatalf("Missing(%v, %v) = %v, %v; want %v, %v", have, want, got, gotChanged, add, changed)
		}
	}
	a, b, c := SinkColumn{"a", "BIGINT"}, SinkColumn{"b", "VARCHAR"}, SinkColumn{"c", "BIGINT"}
	// The same columns: nothing to do.
	f([]SinkColumn{a, b}, []SinkColumn{a, b}, nil, nil)
	// The table lacks declared columns: added in the declared order,
	// whatever the table's order.
	f([]SinkColumn{b}, []SinkColumn{c, a, b}, []SinkColumn{c, a}, nil)
	// A column no longer declared is left alone.
	f([]SinkColumn{a, b, c}, []SinkColumn{a}, nil, nil)
	// A changed type is an error naming the table, the column and both
	// types, and nothing is added.
	f([]SinkColumn{{"a", "INTEGER"}, {"b", "JSON"}}, []SinkColumn{a, b, c}, nil,
		[]TypeChangedError{{"t", "a", "INTEGER", "BIGINT"}, {"t", "b", "JSON", "VARCHAR"}})
}

func TestTypeChangedErrorNamesEverything(t *testing.T) {
	err := (&TypeChangedError{Table: "otel_spans", Column: "flags", Have: "VARCHAR", Want: "BIGINT"}).Error()
	for _, s := range []string{"otel_spans", "flags", "VARCHAR", "BIGINT"} {
		if !strings.Contains(err, s) {
			t.Fatalf("%q does not name %s", err, s)
		}
	}
}
