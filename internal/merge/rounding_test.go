package merge

import (
	"slices"
	"testing"
)

// A model column of an integer type takes a number only as it is:
// DuckDB's cast rounds a fraction away (1.5 into BIGINT is 2, "1_0.5" is
// 11, "1.5e0" is 2), so a wrong value was stored without a reject and the
// version 1.5 beat the version 2 it rounded to. Such a row is rejected
// with the reason, the number written as sent; a number the type holds exactly (1.0,
// 2e1, " 3 ") is taken. A DECIMAL column rounds to its scale, as SQL's
// assignment does and as its declared scale asks (1.239 into
// DECIMAL(18,2) is 1.24, whatever way the number is written).
func TestModelRejectsAFractionItsIntegerColumnWouldRound(t *testing.T) {
	l, m, mg := customersLoader(t, true)
	for _, line := range []string{
		`{"action":"insert","id":1,"v":1.5,"name":"a","balance":1}`,
		`{"action":"insert","id":2,"v":1,"name":"b","balance":1.239}`,
		`{"action":"insert","id":3.0,"v":2e1,"name":"c","balance":1.50}`,
		`{"action":"insert","id":4,"v":"1_0.5","name":"d","balance":"1_0.239"}`,
		`{"action":"insert","id":5,"v":"1.5e0","name":"e","balance":"1.234e0"}`,
		`{"action":"insert","id":6,"v":2,"name":"f","balance":1E-20}`,
		`{"action":"insert","id":" 7 ","v":"3","name":"g","balance":"1.2_3_9"}`,
	} {
		l.add(0, []byte(line))
	}
	l.flush()
	mustMerge(t, mg, m)
	want := []string{"2|1|1.24", "3|20|1.5", "6|2|0", "7|3|1.24"}
	if got := dump(t, l.db(), `SELECT id, version, balance FROM customers ORDER BY id`); !slices.Equal(got, want) {
		t.Errorf("rows: %v, want %v (the rounded integers rejected, decimals rounded to their scale)", got, want)
	}
	rejects := []string{
		"column version: 1.5 does not fit BIGINT without rounding",
		"column version: 1.5e0 does not fit BIGINT without rounding",
		"column version: 1_0.5 does not fit BIGINT without rounding",
	}
	if got := dump(t, l.db(), `SELECT reason FROM customers_rejects ORDER BY 1`); !slices.Equal(got, rejects) {
		t.Errorf("rejects: %q, want %q", got, rejects)
	}
}
