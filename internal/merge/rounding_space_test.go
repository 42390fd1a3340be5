package merge

import (
	"slices"
	"testing"
)

// DuckDB's cast to a number trims every white space character (tab, line
// feed, carriage return), not only spaces: a JSON string "\t1.5" or
// "1.5\n" into BIGINT was stored as 2, the fraction check reading only
// spaces around the digits.
func TestModelRejectsAFractionBetweenWhiteSpace(t *testing.T) {
	l, m, mg := customersLoader(t, false)
	l.add(0, []byte(`{"action":"insert","id":1,"v":"\t1.5","name":"a","balance":1}`))
	l.add(0, []byte(`{"action":"insert","id":2,"v":"1.5\n","name":"b","balance":"1.239\r\n"}`))
	l.add(0, []byte(`{"action":"insert","id":3,"v":"\t2.0\n","name":"c","balance":"\t1.50\n"}`))
	l.flush()
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, version, balance FROM customers`), []string{"3|2|1.5"}; !slices.Equal(got, want) {
		t.Errorf("rows: %v, want %v (the rounded ones rejected)", got, want)
	}
	if got := dump(t, l.db(), `SELECT count(*) FROM customers_rejects`); !slices.Equal(got, []string{"2"}) {
		t.Errorf("rejects: %v, want 2", got)
	}
}
