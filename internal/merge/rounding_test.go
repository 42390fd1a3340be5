package merge

import (
	"slices"
	"testing"
)

// A model column of an integer or DECIMAL type takes a number only as it
// is: DuckDB's cast rounds a fraction the type cannot hold (1.5 into
// BIGINT is 2, 1.239 into DECIMAL(18,2) is 1.24), so a wrong value was
// stored without a reject and the version 1.5 beat the version 2 it
// rounded to. Such a row is rejected with the reason; a number the type
// holds exactly (1.0, 1.50, 2e1) is taken.
func TestModelRejectsAFractionItsColumnWouldRound(t *testing.T) {
	l, m, mg := customersLoader(t, true)
	l.add(0, []byte(`{"action":"insert","id":1,"v":1.5,"name":"a","balance":1}`))
	l.add(0, []byte(`{"action":"insert","id":2,"v":1,"name":"b","balance":1.239}`))
	l.add(0, []byte(`{"action":"insert","id":3.0,"v":2e1,"name":"c","balance":1.50}`))
	l.flush()
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, version, balance FROM customers`), []string{"3|20|1.5"}; !slices.Equal(got, want) {
		t.Errorf("rows: %v, want %v (the rounded ones rejected)", got, want)
	}
	want := []string{
		"0|column balance: 1.239 does not fit DECIMAL(18,2) without rounding",
		"0|column version: 1.5 does not fit BIGINT without rounding",
	}
	if got := dump(t, l.db(), `SELECT "partition", reason FROM customers_rejects`); !slices.Equal(got, want) {
		t.Errorf("rejects: %q, want %q", got, want)
	}
}
