package merge

import (
	"slices"
	"testing"
)

// README, "Models": an `insert` inserts only if the key is absent (a
// replayed insert never overwrites). Two inserts of one key merged one at
// a time keep the first; landed in one increment they must too — the
// result may not depend on when the merge ran.
func TestTwoInsertsOfAKeyInOneIncrementKeepTheFirst(t *testing.T) {
	// One at a time.
	l1, m1, mg1 := customersLoader(t, false)
	l1.add(0, change{id: 1, action: "insert", name: "first", balance: "1"}.json())
	l1.flush()
	mustMerge(t, mg1, m1)
	l1.add(0, change{id: 1, action: "insert", name: "second", balance: "2"}.json())
	l1.flush()
	mustMerge(t, mg1, m1)
	oneAtATime := dump(t, l1.db(), `SELECT id, name FROM customers`)
	// Both in one increment.
	l2, m2, mg2 := customersLoader(t, false)
	l2.add(0, change{id: 1, action: "insert", name: "first", balance: "1"}.json())
	l2.add(0, change{id: 1, action: "insert", name: "second", balance: "2"}.json())
	l2.flush()
	mustMerge(t, mg2, m2)
	together := dump(t, l2.db(), `SELECT id, name FROM customers`)
	want := []string{"1|first"}
	if !slices.Equal(oneAtATime, want) || !slices.Equal(together, want) {
		t.Errorf("merged one at a time: %v; in one increment: %v; want %v both ways (a later insert never overwrites)", oneAtATime, together, want)
	}
}

// README: "a delete and a re-insert between two merges give the re-inserted
// row, as merged one at a time". delete, insert "second", insert "third"
// merged one at a time give "second" (the third insert finds the key), and
// so must one increment holding all three.
func TestDeleteThenTwoInsertsInOneIncrementKeepTheFirstInsert(t *testing.T) {
	l, m, mg := customersLoader(t, false)
	l.add(0, change{id: 1, action: "insert", name: "first", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	l.add(0, change{id: 1, action: "delete", balance: "0"}.json())
	l.add(0, change{id: 1, action: "insert", name: "second", balance: "2"}.json())
	l.add(0, change{id: 1, action: "insert", name: "third", balance: "3"}.json()) // a replayed/duplicate insert: never overwrites
	l.flush()
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT id, name FROM customers`), []string{"1|second"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (as merged one change at a time)", got, want)
	}
}
