package sqltext

import "testing"

func TestVarcharLeavesKeepsTheShapeOfANestedType(t *testing.T) {
	for typ, want := range map[string]string{
		"INTEGER[]":                           "VARCHAR[]",
		"INTEGER[3]":                          "VARCHAR[3]",
		"STRUCT(a INTEGER, b DECIMAL(9,2)[])": "STRUCT(a VARCHAR, b VARCHAR[])",
		`STRUCT("a b" INTEGER, "c""d" STRUCT(e INT))`: `STRUCT("a b" VARCHAR, "c""d" STRUCT(e VARCHAR))`,
		"MAP(VARCHAR, INTEGER[])":                     "MAP(VARCHAR, VARCHAR[])",
		"STRUCT(w INTEGER)[][]":                       "STRUCT(w VARCHAR)[][]",
		"STRUCT(j JSON, n INTEGER)":                   "STRUCT(j JSON, n VARCHAR)",
	} {
		if got := VarcharLeaves(typ); got != want {
			t.Errorf("VarcharLeaves(%s) = %s, want %s", typ, got, want)
		}
	}
}

func TestDoubleLeavesTurnsOnlyIntegerLeavesDouble(t *testing.T) {
	f := func(typ, want string, wantOK bool) {
		t.Helper()
		if got, ok := doubleLeaves(typ); got != want || ok != wantOK {
			t.Errorf("doubleLeaves(%s) = %s, %v, want %s, %v", typ, got, ok, want, wantOK)
		}
	}
	f("INTEGER[]", "DOUBLE[]", true)
	f("VARCHAR[]", "VARCHAR[]", false)
	f("STRUCT(a BIGINT, b DECIMAL(9,2))[3]", "STRUCT(a DOUBLE, b DECIMAL(9,2))[3]", true)
	f("MAP(INTEGER, VARCHAR)", "MAP(INTEGER, VARCHAR)", false)
	f(`MAP(VARCHAR, STRUCT("x y" UBIGINT))`, `MAP(VARCHAR, STRUCT("x y" DOUBLE))`, true)
}
