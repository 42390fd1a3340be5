package reconcile

import (
	"context"
	"testing"
)

// A key held several times on both sides was counted once per row of the
// join by key, so each side's copies multiplied the other's: a key three
// times left and twice right made 6 / 6 duplicates (of 4 and 3 rows),
// and its example was listed six times (`reconcile --left
// otel_spans --right otel_spans_dedup` over retried spans printed one key
// again and again). Each side's count is its own rows whose key it holds
// more than once; each key is one example.
func TestCompareDuplicatesCountedPerSide(t *testing.T) {
	db := duck(t, `CREATE TABLE l AS SELECT * FROM (VALUES ('x', 1), ('x', 1), ('x', 1), ('y', 2)) t(id, v)`,
		`CREATE TABLE r AS SELECT * FROM (VALUES ('x', 1), ('x', 1), ('y', 2)) t(id, v)`)
	rep, err := Compare(context.Background(), db, Spec{Left: "l", Right: "r", Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Equal || rep.DupLeft != 3 || rep.DupRight != 2 {
		t.Errorf("duplicates %d / %d (equal %v), want 3 / 2: each side's rows of a key it holds more than once", rep.DupLeft, rep.DupRight, rep.Equal)
	}
	if len(rep.Examples) != 1 || rep.Examples[0].Key != "x" {
		t.Errorf("examples %+v, want key x once", rep.Examples)
	}
}
