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
