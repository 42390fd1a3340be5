package merge

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
)

// Two changes of one key with the same version on two partitions (two
// producers stamping a second-resolution time, a key moved to another
// partition): merged in two rounds the change merged last gives the row,
// while a rebuild keeps the change of the higher partition (latestOrder)
// and a rebuild in chunks of offsets the one of the later chunk, so
// `merge --rebuild` and `reconcile --model` give and report other rows
// than the merges did, and merge.chunk changes what a rebuild holds.
//
// One order everywhere: version, then partition, then offset (latestOrder).
// Each key's deciding change's coordinates are kept beside the target
// (<target>_deciding), so a merge compares an incoming change with it as a
// rebuild compares the two in one increment.
func TestVersionTieAcrossPartitionsRebuildsAsMerged(t *testing.T) {
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
	if got, want := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`), []string{"from p1"}; !slices.Equal(got, want) {
		t.Errorf("key 1 holds %q, want the tie of the higher partition %q", got, want)
	}
	rebuiltAsMerged(t, l, mg, m, 0, 2)
}

// rebuiltAsMerged checks that key 1 of the customers model rebuilt in
// chunks of each of chunks offsets (0: one slice) holds what the merges
// gave it.
func rebuiltAsMerged(t *testing.T, l *rawLoader, mg *Merger, m config.Model, chunks ...int64) {
	t.Helper()
	merged := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`)
	eachRebuild(t, mg, m, chunks, func(tx *sql.Tx, rebuilt string, chunk int64) {
		if got := dump(t, tx, `SELECT name FROM `+rebuilt+` WHERE id = 1`); !slices.Equal(got, merged) {
			t.Errorf("key 1 rebuilt (chunks of %d offsets, 0: one slice) holds %q, merged in two rounds %q", chunk, got, merged)
		}
	})
}

// eachRebuild rebuilds m beside its target in chunks of each of chunks
// offsets (0: one slice; Merger.Check) and checks each with check, given
// the rebuilt target's name.
func eachRebuild(t *testing.T, mg *Merger, m config.Model, chunks []int64, check func(tx *sql.Tx, rebuilt string, chunk int64)) {
	t.Helper()
	for _, chunk := range chunks {
		if err := mg.Check(context.Background(), m, chunk, func(tx *sql.Tx, rebuilt string) error {
			check(tx, rebuilt, chunk)
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
	l, m, mg := customersLoader(t, true)
	l.add(1, change{id: 1, v: 5, action: "delete", name: "deleted on p1", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	l.add(0, change{id: 1, v: 5, action: "update", name: "from p0", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	if got := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`); len(got) != 0 {
		t.Errorf("key 1 holds %q, want it deleted by the tie of the higher partition", got)
	}
	rebuiltAsMerged(t, l, mg, m, 0, 1)
}

// A target merged before its table of deciding changes existed: the
// first merge after fills it with the target's and tombstones' keys at
// their versions, without coordinates, so a tie against such a row goes
// to the incoming change, as before; a rebuild gives every key its
// coordinates, and the ties go by partition again.
func TestVersionTieAgainstRowMergedBeforeCoordinates(t *testing.T) {
	ctx := context.Background()
	l, m, mg := customersLoader(t, true)
	l.add(1, change{id: 1, v: 5, action: "update", name: "from p1", balance: "1"}.json())
	l.add(1, change{id: 2, v: 3, action: "delete", name: "", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	if _, err := l.db().Exec(`DROP TABLE customers` + DecidingSuffix); err != nil {
		t.Fatal(err)
	}
	l.add(0, change{id: 1, v: 5, action: "update", name: "from p0", balance: "1"}.json())
	l.flush()
	mustMerge(t, mg, m)
	if got, want := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`), []string{"from p0"}; !slices.Equal(got, want) {
		t.Errorf("a tie against a row merged without coordinates: %q, want the incoming change's %q", got, want)
	}
	if got, want := dump(t, l.db(), `SELECT id, version, tl_partition, tl_offset FROM customers`+DecidingSuffix),
		[]string{"1|5|0|0", "2|3|<nil>|<nil>"}; !slices.Equal(got, want) {
		t.Errorf("deciding changes after the fill and a merge: %q, want %q", got, want)
	}
	if _, err := mg.Rebuild(ctx, m, 0); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, l.db(), `SELECT id, version, tl_partition, tl_offset FROM customers`+DecidingSuffix),
		[]string{"1|5|1|0", "2|3|1|1"}; !slices.Equal(got, want) {
		t.Errorf("deciding changes after a rebuild: %q, want %q", got, want)
	}
	if got, want := dump(t, l.db(), `SELECT name FROM customers WHERE id = 1`), []string{"from p1"}; !slices.Equal(got, want) {
		t.Errorf("rebuilt: %q, want the higher partition's %q", got, want)
	}
}
