package merge

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// splitEvent is one record of a randomized history: a change of key k
// (op: Maxwell's type, or Debezium's op letter; "T" a Debezium tombstone,
// "gap" a record compaction removed) at binlog position pos (0: none),
// or a truncation (k 0), on partition p.
type splitEvent struct {
	p   int32
	op  string
	pos int
	k   int
}

// The model of a changelog table is a function of its changes, not of
// how merge rounds cut them: random histories (changes with and without
// a position, deletes, Debezium tombstones with and without their
// deletes, truncations on any partition, partitions read at different
// paces) are merged at once, one record a round, and in random rounds,
// and must make the model the history itself gives (expectedModel),
// computed apart from the merge's SQL. A few seeds only (each history is
// merged three ways, ~1s a way): the cases that broke have tests of
// their own (bootstrap_truncations_test.go).
func TestChangelogModelWhicheverRoundsRandomized(t *testing.T) {
	seeds := int64(randomSeeds(3))
	for _, format := range []cdc.Format{cdc.FormatMaxwell, cdc.FormatDebezium} {
		for seed := int64(0); seed < seeds; seed++ {
			r := rand.New(rand.NewSource(seed))
			events := interleave(r, randomHistory(r, format, 12))
			cuts := map[string][]bool{"at once": make([]bool, len(events)), "one a round": make([]bool, len(events)), "random": make([]bool, len(events))}
			for i := range events {
				cuts["one a round"][i] = true
				cuts["random"][i] = r.Intn(2) == 0
			}
			want := expectedModel(events)
			for _, name := range []string{"at once", "one a round", "random"} {
				if got := mergeHistory(t, format, events, cuts[name]); !slices.Equal(got, want) {
					t.Errorf("%s seed %d, %s rounds %v:\nhistory %v\n got %q\nwant %q (from the history)", format, seed, name, cuts[name], events, got, want)
				}
			}
		}
	}
}

// randomHistory is n records in source order, positions rising: three
// keys, two partitions (a Debezium key's changes on one, as Debezium
// keys its records; Maxwell's anywhere, producer_partition_by random).
func randomHistory(r *rand.Rand, format cdc.Format, n int) []splitEvent {
	var out []splitEvent
	for i, at := 0, 100; i < n; i, at = i+1, at+10 {
		k := r.Intn(3) + 1
		p := int32(r.Intn(2))
		if format == cdc.FormatDebezium {
			p = int32(k % 2)
		}
		truncation := splitEvent{int32(r.Intn(2)), "t", at, 0}
		switch x := r.Intn(10); {
		case format == cdc.FormatMaxwell && x < 3:
			out = append(out, splitEvent{p, "bootstrap-insert", 0, k})
		case format == cdc.FormatMaxwell && x < 5:
			out = append(out, splitEvent{p, "update", at, k})
		case format == cdc.FormatMaxwell && x < 6:
			out = append(out, splitEvent{p, "delete", at, k})
		case format == cdc.FormatMaxwell && x < 8:
			truncation.op = "table-drop"
			out = append(out, truncation)
		case format == cdc.FormatMaxwell:
			out = append(out, splitEvent{p, "insert", at, k})
		case x < 3:
			out = append(out, splitEvent{p, "u", at, k})
		case x < 4: // flattened by ExtractNewRecordState: no position
			out = append(out, splitEvent{p, "u", 0, k})
		case x < 6:
			out = append(out, splitEvent{p, "d", at, k}, splitEvent{p, "T", 0, k})
		case x < 7:
			out = append(out, splitEvent{p, "gap", 0, k}, splitEvent{p, "T", 0, k})
		case x < 8:
			out = append(out, truncation)
		default:
			out = append(out, splitEvent{p, "c", at, k})
		}
	}
	return out
}

// interleave is the order a consumer reads events in: each partition's
// in order, the partitions at random paces.
func interleave(r *rand.Rand, events []splitEvent) []splitEvent {
	queues := map[int32][]splitEvent{}
	for _, e := range events {
		queues[e.p] = append(queues[e.p], e)
	}
	var out []splitEvent
	for len(queues[0])+len(queues[1]) > 0 {
		p := int32(r.Intn(2))
		if len(queues[p]) == 0 {
			p = 1 - p
		}
		out = append(out, queues[p][0])
		queues[p] = queues[p][1:]
	}
	return out
}

// mergeHistory loads events, merging after each event cut says, and
// returns the model's rows.
func mergeHistory(t *testing.T, format cdc.Format, events []splitEvent, cut []bool) []string {
	t.Helper()
	l := newFormatLoader(t, format)
	l.topic = "dbserver1.db.orders"
	for i, e := range events {
		value := fmt.Sprintf("e%d", i)
		switch {
		case format == cdc.FormatMaxwell:
			position, data := "", ""
			if e.pos > 0 {
				position = fmt.Sprintf("binlog.000001:%d", e.pos)
			}
			if e.k > 0 {
				data = fmt.Sprintf(`{"id":%d,"name":%q}`, e.k, value)
			}
			l.raw(e.p, "maxwell", maxwellOrders(e.op, position, data))
		case e.op == "T":
			l.tombstone(e.p, fmt.Sprintf(`{"id":%d}`, e.k))
		case e.op == "gap":
			l.next[e.p]++
		case e.op == "t":
			l.change(e.p, "orders", "t", e.pos, nil)
		default:
			pos := e.pos
			if pos == 0 {
				pos = -1 // none
			}
			l.change(e.p, "orders", e.op, pos, row(e.k, value), "id")
		}
		if cut[i] && len(l.pending) > 0 {
			l.flush()
			l.mustMerge()
		}
	}
	if len(l.pending) > 0 {
		l.flush()
	}
	l.mustMerge()
	if format == cdc.FormatMaxwell {
		return dump(t, l.s.DB(), `SELECT id, name FROM cdc_test_orders ORDER BY id`)
	}
	return dump(t, l.s.DB(), `SELECT id, v FROM cdc_db_orders ORDER BY id`)
}

// expectedModel is the model the history gives, computed from the
// events in the order the consumer read them (not by the merge): per
// key, the latest change in source order that no truncation removes,
// unless it is a delete. Source order is the position, then the Kafka
// partition and offset (the merge's tie-break); a change without a
// position sorts below every position. A truncation removes the changes
// at a lower position and those without one that it follows in their
// partition. A live change without a position (a Debezium tombstone, a
// flattened change; no read) has the greatest position of its key's
// changes before it in its partition that the latest truncation does
// not place below it (none without one).
func expectedModel(events []splitEvent) []string {
	type change struct {
		p, i, pos int // partition, index in the read order, position (-1: none)
		op, value string
	}
	floor := -1 // the latest truncation's position
	for _, e := range events {
		if (e.op == "t" || e.op == "table-drop") && e.pos > floor {
			floor = e.pos
		}
	}
	var changes []change
	for i, e := range events {
		c := change{p: int(e.p), i: i, pos: e.pos, op: e.op, value: fmt.Sprintf("e%d", i)}
		if c.pos == 0 {
			c.pos = -1
		}
		if c.pos < 0 && e.op != "bootstrap-insert" && e.op != "gap" {
			for _, b := range changes {
				if b.p == c.p && events[b.i].k == e.k && b.op != "t" && b.op != "table-drop" && b.pos >= floor && b.pos > c.pos {
					c.pos = b.pos
				}
			}
		}
		if e.op != "gap" {
			changes = append(changes, c)
		}
	}
	truncated := func(c change) bool {
		for _, tr := range changes {
			if tr.op != "t" && tr.op != "table-drop" {
				continue
			}
			if c.pos >= 0 && (c.pos < tr.pos || c.pos == tr.pos && c.p == tr.p && c.i < tr.i) || c.pos < 0 && c.p == tr.p && c.i < tr.i {
				return true
			}
		}
		return false
	}
	later := func(a, b change) bool { // a after b in source order
		if a.pos != b.pos {
			return a.pos > b.pos
		}
		if a.p != b.p {
			return a.p > b.p
		}
		return a.i > b.i
	}
	latest := map[int]change{}
	for _, c := range changes {
		k := events[c.i].k
		if k == 0 || truncated(c) {
			continue
		}
		if b, ok := latest[k]; !ok || later(c, b) {
			latest[k] = c
		}
	}
	var out []string
	for k := 1; k <= 3; k++ {
		if c, ok := latest[k]; ok && c.op != "d" && c.op != "delete" && c.op != "T" {
			out = append(out, fmt.Sprintf("%d|%s", k, c.value))
		}
	}
	return out
}
