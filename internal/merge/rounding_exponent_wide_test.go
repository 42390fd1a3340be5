package merge

import (
	"slices"
	"testing"
)

// A number with an exponent is checked for a fraction its DECIMAL column
// would round to 38 digits (README), but the check cast it to one DECIMAL
// of the column's integer digits: into DECIMAL(38,2) that holds no more
// fraction than the column, and the texts "1.234e0" and "1.2345678125E7"
// were stored rounded (1.23, 12345678.13)
// without a reject; into DECIMAL(18,2) a fraction past 22 digits (1e-30)
// was stored as 0. Exact ones fit.
func TestModelRejectsAnExponentsFractionPastAnyDecimalsIntegerDigits(t *testing.T) {
	f := func(typ string, values []string, want, rejects []string) {
		t.Helper()
		l, m, mg := customersLoader(t, false)
		m.Columns[2].Type = typ
		for i, v := range values {
			l.add(0, []byte(`{"action":"insert","id":`+string(rune('1'+i))+`,"v":1,"name":"a","balance":`+v+`}`))
		}
		l.flush()
		mustMerge(t, mg, m)
		if got := dump(t, l.db(), `SELECT id, balance FROM customers ORDER BY id`); !slices.Equal(got, want) {
			t.Errorf("%s: rows %v, want %v (the rounded ones rejected)", typ, got, want)
		}
		if got := dump(t, l.db(), `SELECT reason FROM customers_rejects ORDER BY reason`); !slices.Equal(got, rejects) {
			t.Errorf("%s: rejects %q, want %q", typ, got, rejects)
		}
	}
	f("DECIMAL(38,2)", []string{`"1.234e0"`, `"1.2345678125E7"`, `125e-2`, `"1.5E+1"`, `"1.2345678E5"`},
		[]string{"3|1.25", "4|15", "5|123456.78"},
		[]string{
			"column balance: 1.2345678125E7 does not fit DECIMAL(38,2) without rounding",
			"column balance: 1.234e0 does not fit DECIMAL(38,2) without rounding",
		})
	f("DECIMAL(18,2)", []string{`1e-30`, `"2.5e-1"`},
		[]string{"2|0.25"},
		[]string{"column balance: 1e-30 does not fit DECIMAL(18,2) without rounding"})
}
