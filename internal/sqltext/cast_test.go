package sqltext

import "testing"

// Every integer and DECIMAL type a model may name, in DuckDB's or
// Databend's spelling, is checked for a rounded fraction; other types are
// not. Databend's INT16/INT32/INT64 and UINT* were not, so a model on
// Databend with such a column still stored 1.5 as 2.
func TestFractionLostKnowsTheExactTypes(t *testing.T) {
	f := func(typ string, scale int, exact bool) {
		t.Helper()
		got, ok := exactScale(typ)
		if ok != exact || exact && got != scale {
			t.Errorf("exactScale(%q) = %d, %v; want %d, %v", typ, got, ok, scale, exact)
		}
		if (FractionLost("x", typ, "regexp_matches") != "") != exact {
			t.Errorf("FractionLost of %q: checked %v, want %v", typ, !exact, exact)
		}
	}
	for _, typ := range []string{"BIGINT", "integer", "HUGEINT", "UBIGINT", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"} {
		f(typ, 0, true)
	}
	f("DECIMAL(12, 2)", 2, true)
	f("numeric(10,4)", 4, true)
	f("DECIMAL", 3, true)
	f("DECIMAL(9)", 0, true)
	for _, typ := range []string{"DOUBLE", "VARCHAR", "BOOLEAN", "TIMESTAMP", "INTEGER[]", "JSON", "FLOAT64"} {
		f(typ, 0, false)
	}
}
