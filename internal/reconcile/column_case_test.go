package reconcile

import (
	"context"
	"testing"
)

// rowHash (reconcile.go) looks a column's type up by its exact name, but
// DuckDB's names ignore case: a column given as --columns amount (or a
// key amount) of a table that names it Amount is hashed as plain text,
// and DECIMAL(12,2) 1.50 against DECIMAL(18,4) 1.5000 comes out
// DIFFERENT, where the same tables compared over their own names are
// EQUAL (TestCompareHashesEqualValuesOfCompatibleTypesEqual).
func TestCompareColumnNamedInAnotherCaseIsCanonical(t *testing.T) {
	db := duck(t, `CREATE TABLE a (k INTEGER, "Amount" DECIMAL(12,2))`, "INSERT INTO a VALUES (1, 1.5), (2, 10)",
		`CREATE TABLE b (k INTEGER, "Amount" DECIMAL(18,4))`, "INSERT INTO b VALUES (1, 1.5), (2, 10)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}, Columns: []string{"k", "amount"}})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Equal {
		t.Errorf("--columns k,amount over Amount DECIMAL(12,2) and DECIMAL(18,4) of equal values: DIFFERENT (%d differ), want EQUAL", r.Differ)
	}
}
