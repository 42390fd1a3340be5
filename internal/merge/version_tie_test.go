package merge

import (
	"context"
	"database/sql"
	"slices"
	"testing"
)

// Two changes of one key with the same version on two partitions (two
// producers stamping a second-resolution time, a key moved to another
// partition): merged in two rounds the change merged last gives the row,
// while a rebuild keeps the change of the higher partition (latestOrder)
// and a rebuild in chunks of offsets the one of the later chunk, so
// `merge --rebuild` and `reconcile --model` give and report other rows
// than the merges did, and merge.chunk changes what a rebuild holds.
//
// Not fixed: the target does not keep which change (partition, offset)
// gave its row, so a merge cannot break a tie by the order a rebuild
// uses. The choice made here: one order everywhere, version then
// partition then offset, with each key's deciding change's coordinates
// kept beside the target (a table like the tombstones); that table also
// fixes a replayed insert (README, "Not yet right").
func TestVersionTieAcrossPartitionsRebuildsAsMerged(t *testing.T) {
	ctx := context.Background()
	l, m, mg := customersLoader(t, true)
	l.add(1, change{id: 1, v: 5, action: "update", name: "from p1", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	for id := 2; id <= 4; id++ { // the tie of p0 at offset 3, a chunk of 2 after p1's
		l.add(0, change{id: id, v: 1, action: "update", name: "other", balance: "1"}.json())
	}
	l.add(0, change{id: 1, v: 5, action: "update", name: "from p0", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	merged := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`)
	for _, chunk := range []int64{0, 2} {
		if err := mg.Check(ctx, m, chunk, func(tx *sql.Tx, rebuilt string) error {
			if got := dump(t, tx, `SELECT name FROM `+rebuilt+` WHERE id = 1`); !slices.Equal(got, merged) {
				t.Errorf("key 1 rebuilt (chunks of %d offsets, 0: one slice) holds %q, merged in two rounds %q", chunk, got, merged)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// A delete and an update of one key with the same version on two
// partitions, the delete (of the higher partition) merged first: the
// tombstone keeps only the delete's version, the update ties with it and
// brings the row back, while a rebuild, ordering the two by partition,
// keeps the key deleted.
func TestVersionTieWithDeleteRebuildsAsMerged(t *testing.T) {
	ctx := context.Background()
	l, m, mg := customersLoader(t, true)
	l.add(1, change{id: 1, v: 5, action: "delete", name: "deleted on p1", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	l.add(0, change{id: 1, v: 5, action: "update", name: "from p0", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	merged := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`)
	if err := mg.Check(ctx, m, 0, func(tx *sql.Tx, rebuilt string) error {
		if got := dump(t, tx, `SELECT name FROM `+rebuilt+` WHERE id = 1`); !slices.Equal(got, merged) {
			t.Errorf("key 1 rebuilt holds %q, merged in two rounds %q", got, merged)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
