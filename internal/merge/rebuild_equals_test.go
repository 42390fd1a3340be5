package merge

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// A model's changes drift as producers change (a key sent as 1 in one
// message and "1" in the next, keys past 2^53, a balance that turns into
// text or an object, a missing or empty key, versions that go back, tie
// within a partition or sit a step apart past 2^53), land on three
// partitions and are merged in rounds cut at random points: the target
// and the rejects equal a rebuild from scratch, in one slice and in
// random chunks, and with a version the target holds each key's highest
// good change. Without a version a key's changes stay on its partition:
// Kafka orders a key's changes only within one. With one they may go to
// any partition, ties too: a tie goes by partition, then offset, in a
// merge as in a rebuild (<target>_deciding).
func TestModelMergedInRoundsEqualsRebuild(t *testing.T) {
	for _, mode := range []struct {
		name                    string
		versioned, ties, across bool
	}{{"version", true, false, true}, {"version_ties", true, true, false}, {"version_ties_across", true, true, true}, {"no_version", false, false, false}} {
		for seed := range randomSeeds(4) {
			t.Run(fmt.Sprint(mode.name, "/", seed), func(t *testing.T) {
				roundsAgainstRebuild(t, uint64(seed), mode.versioned, mode.ties, mode.across)
			})
		}
	}
}

// roundsAgainstRebuild loads a random stream of changes (with ties,
// versions drawn from four; with across, each key's changes on any
// partition, else on its own), merging at random points, and compares
// the target and rejects with rebuilds.
func roundsAgainstRebuild(t *testing.T, seed uint64, versioned, ties, across bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	l, m, mg := customersLoader(t, versioned)
	// Keys as sent: the same key as a number and as a string, two keys a
	// step apart past 2^53 (a double holds them as one), and keys that
	// are no key (rejected).
	ids := []string{`1`, `"1"`, `9007199254740993`, `"9007199254740992"`, `null`, `""`}
	keyOf := map[string]string{`1`: "1", `"1"`: "1", `9007199254740993`: "9007199254740993", `"9007199254740992"`: "9007199254740992"}
	partitionOf := map[string]int32{"1": 0, "9007199254740993": 1, "9007199254740992": 2}
	balances := []string{`1`, `"2.5"`, `{"amount":3}`, `"lots"`} // the last two are rejected
	type change struct {
		key    string // "" when rejected for its key
		v      int64
		action string
		name   string
		bad    bool
	}
	var stream []change
	var log []string
	const base = 1 << 60 // versions a step apart here are one double
	for range 25 {
		for range rng.IntN(5) {
			id := ids[rng.IntN(len(ids))]
			key := keyOf[id]
			p := int32(rng.IntN(3))
			if k, ok := partitionOf[key]; ok && !across {
				p = k
			}
			v := int64(base + rng.IntN(1_000_000))
			if ties {
				v = base + int64(rng.IntN(4))
			}
			c := change{key: key, v: v, action: []string{"update", "delete", "insert"}[rng.IntN(3)]}
			c.name = fmt.Sprintf("p%d-o%d", p, l.next[p])
			bal := balances[rng.IntN(len(balances))]
			c.bad = key == "" || (c.action != "delete" && (bal == balances[2] || bal == balances[3]))
			msg := fmt.Sprintf(`{"action":%q,"id":%s,"v":%d,"name":%q,"balance":%s}`, c.action, id, c.v, c.name, bal)
			l.add(p, []byte(msg))
			stream = append(stream, c)
			log = append(log, msg)
		}
		l.flush()
		if rng.IntN(3) == 0 {
			mustMerge(t, mg, m)
			log = append(log, "merge")
		}
	}
	mustMerge(t, mg, m)
	target := dump(t, l.db(), `SELECT * FROM customers`)
	rejects := dump(t, l.db(), `SELECT topic, "partition", "offset", reason FROM customers_rejects`)
	if versioned && !ties {
		// Versions are distinct (a tie of two drawn from a million is
		// rare enough to stay out of the reference: skip the seed).
		latest := map[string]change{}
		seen := map[[2]any]bool{}
		for _, c := range stream {
			if c.bad {
				continue
			}
			if seen[[2]any{c.key, c.v}] {
				t.Skip("two changes of a key drew one version")
			}
			seen[[2]any{c.key, c.v}] = true
			if l, ok := latest[c.key]; !ok || c.v > l.v {
				latest[c.key] = c
			}
		}
		var want []string
		for k, c := range latest {
			if c.action != "delete" {
				want = append(want, fmt.Sprintf("%s|%s|%d", k, c.name, c.v))
			}
		}
		slices.Sort(want)
		if got := dump(t, l.db(), `SELECT id, name, version FROM customers`); !slices.Equal(got, want) {
			t.Errorf("target holds %q, want each key's highest good change %q", got, want)
		}
	}
	eachRebuild(t, mg, m, []int64{0, 1 + rng.Int64N(6)}, func(tx *sql.Tx, rebuilt string, chunk int64) {
		if got := dump(t, tx, `SELECT * FROM `+rebuilt); !slices.Equal(got, target) {
			t.Errorf("rebuilt in chunks of %d offsets: %q, merged in rounds: %q", chunk, got, target)
		}
		if got := dump(t, tx, `SELECT topic, "partition", "offset", reason FROM customers__check_rejects`); !slices.Equal(got, rejects) {
			t.Errorf("rejects rebuilt in chunks of %d offsets: %q, merged in rounds: %q", chunk, got, rejects)
		}
	})
	if t.Failed() {
		for _, s := range log {
			t.Log(s)
		}
	}
}
