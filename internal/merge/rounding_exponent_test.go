package merge

import (
	"slices"
	"testing"
)

// A number with an exponent into a DECIMAL(p,s) column was not checked
// for a fraction past s: "1.234e0" into DECIMAL(18,2) was stored as 1.23,
// 1E-20 (a double DuckDB's JSON writes with an exponent) as 0.00, without
// a reject, where 1.234 was rejected. Exact ones fit.
func TestModelRejectsAnExponentsFractionItsDecimalWouldRound(t *testing.T) {
	l, m, mg := customersLoader(t, false)
	l.add(0, []byte(`{"action":"insert","id":1,"v":1,"name":"a","balance":"1.234e0"}`))
	l.add(0, []byte(`{"action":"insert","id":2,"v":1,"name":"b","balance":1E-20}`))
	l.add(0, []byte(`{"action":"insert","id":3,"v":1,"name":"c","balance":125e-2}`))
	l.add(0, []byte(`{"action":"insert","id":4,"v":1,"name":"d","balance":"1.5E+1"}`))
	l.flush()
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, balance FROM customers`), []string{"3|1.25", "4|15"}; !slices.Equal(got, want) {
		t.Errorf("rows: %v, want %v (the rounded ones rejected)", got, want)
	}
	want := []string{
		"column balance: 1.234e0 does not fit DECIMAL(18,2) without rounding",
		"column balance: 1e-20 does not fit DECIMAL(18,2) without rounding",
	}
	if got := dump(t, l.db(), `SELECT reason FROM customers_rejects`); !slices.Equal(got, want) {
		t.Errorf("rejects: %q, want %q", got, want)
	}
}
