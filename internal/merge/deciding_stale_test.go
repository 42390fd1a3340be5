package merge

import (
	"testing"
)

// A release from before <target>_deciding (gone back to for a while, as
// docs/OPERATIONS.md allows) merges a versioned model's target and
// tombstones and leaves the table of deciding changes as it was. Back on
// this release, that table still says live at its old version a key the
// earlier release deleted at a newer one: a change between the two
// versions, arriving late, is newer than the stale deciding change and
// re-creates the row, while the tombstone (and a rebuild) keeps the key
// deleted.
func TestDecidingStaleAfterEarlierReleaseKeepsDeleteDeleted(t *testing.T) {
	l, m, mg := customersLoader(t, true)
	db := l.db()
	l.add(0, change{id: 1, v: 3, action: "update", name: "v3", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	// The earlier release's merge of the delete: everything this one does
	// but the table of deciding changes, left as it was.
	if _, err := db.Exec(`CREATE TABLE kept AS SELECT * FROM customers` + DecidingSuffix); err != nil {
		t.Fatal(err)
	}
	l.add(0, change{id: 1, v: 7, action: "delete", name: "", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	if _, err := db.Exec(`DROP TABLE customers` + DecidingSuffix + `; ALTER TABLE kept RENAME TO customers` + DecidingSuffix); err != nil {
		t.Fatal(err)
	}
	l.add(1, change{id: 1, v: 5, action: "update", name: "v5, late", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	if got := dump(t, db, `SELECT name FROM customers WHERE id = 1`); len(got) != 0 {
		t.Errorf("key 1 deleted at version 7 holds %q after a change of version 5, want it deleted", got)
	}
	rebuiltAsMerged(t, l, mg, m, 0)
}
