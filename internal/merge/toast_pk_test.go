package merge

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// An UPDATE that changes a row's primary key and leaves a TOAST value
// unchanged: Debezium's PostgreSQL connector sends it as a delete of the
// old key and a create of the new one
// (RelationalChangeRecordEmitter.emitUpdateAsPrimaryKeyChangeRecord),
// both at the update's LSN, the create's row holding the placeholder for
// the value the update did not read (its new tuple did not carry it), the
// delete's before image the old key alone (REPLICA IDENTITY DEFAULT).
// The new key's row holds the create's columns and the old key's value
// of doc, whether the two changes merge together or the delete first
// (the keys on two partitions), and a model built again holds the same.
func TestToastedPrimaryKeyChange(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			e.partition = 1
			e.event("c", 100, 1, "a", `"big1"`)
			e.event("u", 110, 1, "b", toastPlaceholder)
			e.partition = 0
			e.event("c", 100, 4, "a", `"big4"`)
			l.flush()
			l.mustMerge()
			// UPDATE docs SET id = 2, v = 'c' WHERE id = 1 at LSN 200;
			// UPDATE docs SET id = 3 WHERE id = 4 at LSN 210.
			e.partition = 1
			e.event("d", 200, 1, "", `null`)
			e.partition = 0
			e.event("d", 210, 4, "", `null`)
			if split {
				l.flush()
				l.mustMerge()
				l.want(q)
			}
			e.partition = 0
			e.event("c", 200, 2, "c", toastPlaceholder)
			e.partition = 1
			e.event("c", 210, 3, "a", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "2|c|big1", "3|a|big4")
			l.rebuilt(q, "cdc_shop_docs")
			// Key 2 changed again to 5, then an update that did not read
			// doc, in one round or two: the value goes along the chain.
			e.partition = 0
			e.event("d", 300, 2, "", `null`)
			e.partition = 1
			e.event("c", 300, 5, "d", toastPlaceholder)
			if split {
				l.flush()
				l.mustMerge()
				l.want(q, "3|a|big4", "5|d|big1")
			}
			e.event("u", 310, 5, "e", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "3|a|big4", "5|e|big1")
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}

// Random histories of six keys (a key's changes on its own partition)
// with creates, updates that send doc or leave it unread, deletes,
// primary-key changes that leave doc unread (a delete of the old key and
// a create of the new at one LSN, on their two partitions), some records
// delivered twice, merged in rounds cut at random: after each round the
// model holds what the source holds, and a rebuild the same. Some
// transactions change several rows' keys.
// TRACELAKE_RANDOM_SEEDS runs more seeds.
func TestToastedPrimaryKeyChangesRandom(t *testing.T) {
	for seed := range randomSeeds(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomToastKeysRun(t, uint64(seed)) })
	}
}

func randomToastKeysRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	l := newChangeLoader(t)
	e := pgToast{l: l}
	type state struct {
		live   bool
		v, doc string
	}
	const keys = 6
	source := map[int]*state{}
	for id := 1; id <= keys; id++ {
		source[id] = &state{doc: "NULL"}
	}
	q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
	want := func() []string {
		var out []string
		for id := 1; id <= keys; id++ {
			if s := source[id]; s.live {
				out = append(out, fmt.Sprintf("%d|%s|%s", id, s.v, s.doc))
			}
		}
		return out
	}
	queue := func(op string, lsn, id int, v, doc string) {
		e.partition = int32(id % 2)
		e.event(op, lsn, id, v, doc)
		if rng.IntN(10) == 0 { // delivered twice
			p := e.partition
			dup := *l.pending[p][len(l.pending[p])-1]
			dup.Offset = l.next[p]
			l.next[p]++
			l.pending[p] = append(l.pending[p], &dup)
		}
	}
	// move changes a live row's key to a free one, leaving doc unread.
	move := func(lsn, id, to int, v string) {
		queue("d", lsn, id, "", `null`)
		queue("c", lsn, to, v, toastPlaceholder)
		*source[to] = state{true, v, source[id].doc}
		source[id].live = false
	}
	lsn, merged := 100, false
	for i := range 80 {
		if rng.IntN(8) == 0 {
			// One transaction changing up to three rows' keys, a row
			// perhaps twice (UPDATE docs SET id = … over many rows, or
			// statements in turn): the changes share the last commit's
			// LSN and have LSNs of their own.
			e.commit = lsn
			for range 1 + rng.IntN(3) {
				id, to := 1+rng.IntN(keys), 1+rng.IntN(keys)
				if source[id].live && !source[to].live {
					lsn += 10
					move(lsn, id, to, fmt.Sprintf("v%d", i))
				}
			}
			e.commit = 0
			continue
		}
		id := 1 + rng.IntN(keys)
		s := source[id]
		lsn += 10
		v, doc := fmt.Sprintf("v%d", i), fmt.Sprintf("doc%d", i)
		to := 1 + rng.IntN(keys)
		switch r := rng.IntN(10); {
		case !s.live:
			queue("c", lsn, id, v, `"`+doc+`"`)
			*s = state{true, v, doc}
		case r < 2:
			queue("d", lsn, id, s.v, `null`)
			s.live = false
		case r < 5 && !source[to].live:
			// UPDATE docs SET id = to, v = v WHERE id = id.
			move(lsn, id, to, v)
		case r < 7:
			queue("u", lsn, id, v, toastPlaceholder)
			s.v = v
		default:
			queue("u", lsn, id, v, `"`+doc+`"`)
			s.v, s.doc = v, doc
		}
		if rng.IntN(6) == 0 {
			l.flush()
			l.mustMerge()
			merged = true
			l.want(q, want()...)
		}
	}
	l.flush()
	l.mustMerge()
	l.want(q, want()...)
	if merged {
		l.rebuilt(q, "cdc_shop_docs")
	}
}

// A primary-key change with tombstones.on.delete (Debezium's default):
// the old key's delete, its tombstone (no position) and the new key's
// create on another partition, then an update of the new key that did
// not read doc, merged with a round cut after each: the new key holds
// the old key's doc every way, and when built again. The tombstone is a
// delete of the old key too, and must not stand for it or hide it.
func TestToastedPrimaryKeyChangeWithTombstone(t *testing.T) {
	for cut := range 5 {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			steps := []func(){
				func() { e.event("c", 100, 1, "a", `"big1"`) },
				func() { e.event("d", 200, 1, "", `null`) },
				func() { l.topic = "pg.public.docs"; l.tombstone(0, `{"id":1}`); l.topic = "" },
				func() { e.partition = 1; e.event("c", 200, 2, "b", toastPlaceholder) },
				func() { e.event("u", 300, 2, "c", toastPlaceholder) },
			}
			for i, step := range steps {
				step()
				if i == cut {
					l.flush()
					l.mustMerge()
				}
			}
			l.flush()
			l.mustMerge()
			l.want(`SELECT count(*) FROM cdc_shop_docs_log WHERE cdc_op = 'd' AND cdc_position IS NULL`, "1")
			l.want(q, "2|c|big1")
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}
