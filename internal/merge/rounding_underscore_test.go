package merge

import (
	"slices"
	"testing"
)

// DuckDB's cast of text to a number skips an underscore between digits
// ("1_0.5" AS BIGINT is 11), but the fraction check read digits alone:
// a number written with one went past it and was stored rounded
// (balance "1_0.239" as 10.24, v "1_0.5" as 11), where "10.239" and
// "10.5" are rejected.
func TestModelRejectsAFractionWrittenWithUnderscores(t *testing.T) {
	l, m, mg := customersLoader(t, false)
	l.add(0, []byte(`{"action":"insert","id":1,"v":1,"name":"a","balance":"1_0.239"}`))
	l.add(0, []byte(`{"action":"insert","id":2,"v":"1_0.5","name":"b","balance":1}`))
	l.add(0, []byte(`{"action":"insert","id":3,"v":1,"name":"c","balance":"1.2_3_9"}`))
	l.add(0, []byte(`{"action":"insert","id":4,"v":1,"name":"d","balance":2}`))
	l.flush()
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, version, balance FROM customers ORDER BY id`), []string{"4|1|2"}; !slices.Equal(got, want) {
		t.Errorf("rows: %v, want %v (the rounded ones rejected)", got, want)
	}
	want := []string{
		"column balance: 1.2_3_9 does not fit DECIMAL(18,2) without rounding",
		"column balance: 1_0.239 does not fit DECIMAL(18,2) without rounding",
		"column version: 1_0.5 does not fit BIGINT without rounding",
	}
	if got := dump(t, l.db(), `SELECT reason FROM customers_rejects ORDER BY reason`); !slices.Equal(got, want) {
		t.Errorf("rejects: %q, want %q", got, want)
	}
}
