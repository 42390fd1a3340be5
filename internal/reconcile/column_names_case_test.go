package reconcile

import (
	"context"
	"slices"
	"testing"
)

// Compare without --columns compares the columns both tables have, but
// it matched their names exactly, where DuckDB's names ignore case: a
// model's "amount" and a copy's "Amount" are one column to every query,
// yet it was left out of the comparison, and tables whose amounts differ
// in every row were reported EQUAL over the key alone.
func TestCompareColumnNamedInAnotherCaseOnEachSideIsCompared(t *testing.T) {
	db := duck(t, `CREATE TABLE a (k INTEGER, amount DECIMAL(12,2))`, "INSERT INTO a VALUES (1, 1.5), (2, 10)",
		`CREATE TABLE b (k INTEGER, "Amount" DECIMAL(12,2))`, "INSERT INTO b VALUES (1, 7), (2, 10)")
	r, err := Compare(context.Background(), db, Spec{Left: "a", Right: "b", Key: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Columns, []string{"k", "amount"}) {
		t.Errorf("columns compared: %q, want k and amount (b's Amount is amount to DuckDB)", r.Columns)
	}
	if r.Equal || r.Differ != 1 {
		t.Errorf("amount 1.5 against 7 for key 1: equal %v, %d keys differ; want DIFFERENT, 1", r.Equal, r.Differ)
	}
}
