package sqltext

import "testing"

// Every integer type a model may name, in DuckDB's or Databend's
// spelling, is checked for a rounded fraction; other types, DECIMAL
// among them (it rounds to its scale, as declared), are not. Databend's
// INT16/INT32/INT64 and UINT* were not, so a model on Databend with such
// a column still stored 1.5 as 2.
func TestFractionLostKnowsTheIntegerTypes(t *testing.T) {
	f := func(typ string, checked bool) {
		t.Helper()
		if (FractionLost("x", typ, "regexp_matches") != "") != checked {
			t.Errorf("FractionLost of %q: checked %v, want %v", typ, !checked, checked)
		}
	}
	for _, typ := range []string{"BIGINT", "integer", "HUGEINT", "UBIGINT", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"} {
		f(typ, true)
	}
	for _, typ := range []string{"DECIMAL(12, 2)", "numeric(10,4)", "DECIMAL", "DECIMAL(9)", "DOUBLE", "VARCHAR", "BOOLEAN", "TIMESTAMP", "INTEGER[]", "JSON", "FLOAT64"} {
		f(typ, false)
	}
}
