package merge

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// toastPlaceholder is Debezium's default placeholder for a value it did
// not read, as a text column's value.
const toastPlaceholder = `"__debezium_unavailable_value"`

// pgToast writes Debezium PostgreSQL change events of shop.public.docs
// (id int32 key, v text, doc text), with the JsonConverter's schema
// wrapper or without.
type pgToast struct {
	l       *changeLoader
	schemas bool
	// partition is the Kafka partition the events are queued on.
	partition int32
	// commit is the LSN of the last commit before the events' transaction
	// (the first of source.sequence); the event's own LSN when zero.
	commit int
}

// event queues a change at LSN lsn: op and the row image (the before
// image for a delete) with doc's JSON value as given (toastPlaceholder
// for a value Debezium did not read).
func (e pgToast) event(op string, lsn, id int, v, doc string) {
	e.l.t.Helper()
	row := fmt.Sprintf(`{"id":%d,"v":%q,"doc":%s}`, id, v, doc)
	before, after := "null", row
	if op == "d" {
		before, after = row, "null"
	}
	payload := fmt.Sprintf(`{"before":%s,"after":%s,"op":%q,"ts_ms":1700000000001,`+
		`"source":{"connector":"postgresql","name":"pg","db":"shop","schema":"public","table":"docs","lsn":%d,"sequence":"[\"%d\",\"%d\"]","ts_ms":1700000000000}}`,
		before, after, op, lsn, cmp.Or(e.commit, lsn), lsn)
	key := fmt.Sprintf(`{"id":%d}`, id)
	if e.schemas {
		fs := []fld{{"id", "int32", "", ""}, {"v", "string", "", ""}, {"doc", "string", "", ""}}
		st := structOf("pg.public.docs.Value", fs)
		payload = `{"schema":{"type":"struct","name":"pg.public.docs.Envelope","fields":[` + st[:len(st)-1] + `,"field":"before"},` +
			st[:len(st)-1] + `,"field":"after"},{"type":"struct","field":"source","fields":[]},{"type":"string","field":"op"}]},"payload":` + payload + `}`
		key = `{"schema":` + structOf("pg.public.docs.Key", fs[:1]) + `,"payload":` + key + `}`
	}
	e.l.rawKey(e.partition, "pg.public.docs", key, payload)
}

// An update that left a TOAST value unchanged (REPLICA IDENTITY DEFAULT)
// holds Debezium's placeholder for it: the model keeps the value the
// key's latest earlier change gave, from the same round (several changes
// of one key, in source order) or from the model's row, and a model
// built again from the changelog table holds the same rows. The other
// columns are the update's.
func TestToastedColumnKeepsItsEarlierValue(t *testing.T) {
	for _, schemas := range []bool{false, true} {
		t.Run(fmt.Sprintf("schemas=%v", schemas), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l, schemas: schemas}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			// One round: insert, then two updates that did not read doc.
			e.event("c", 100, 1, "a", `"big1"`)
			e.event("u", 110, 1, "b", toastPlaceholder)
			e.event("u", 120, 1, "c", toastPlaceholder)
			// Key 2: an update that sets doc, then one that did not read it.
			e.event("c", 130, 2, "a", `"big2"`)
			e.event("u", 140, 2, "b", `"big2b"`)
			e.event("u", 150, 2, "c", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "1|c|big1", "2|c|big2b")
			// Next round: from the model's row.
			e.event("u", 200, 1, "d", toastPlaceholder)
			// Key 2 deleted and inserted again in the round: the new
			// insert's value, not the model's.
			e.event("d", 210, 2, "c", `null`)
			e.event("c", 220, 2, "new", `"big2c"`)
			e.event("u", 230, 2, "newer", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "1|d|big1", "2|newer|big2c")
			// A round of updates alone, each from the one before.
			e.event("u", 300, 1, "e", `"big1e"`)
			e.event("u", 310, 1, "f", toastPlaceholder)
			e.event("u", 320, 2, "g", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "1|f|big1e", "2|g|big2c")
			// The changelog table says which columns were not read.
			l.want(`SELECT v, coalesce(cdc_unavailable::VARCHAR, 'NULL') FROM cdc_shop_docs_log WHERE id = 1 ORDER BY cdc_position`,
				`a|NULL`, `b|["doc"]`, `c|["doc"]`, `d|["doc"]`, `e|NULL`, `f|["doc"]`)
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}

// The latest earlier change is by source order whatever the rounds: a
// snapshot read older than the model's row, merged in the round of the
// update, does not give its value. An update whose key no earlier change
// gives the value of (a key the changelog table never held, or whose
// last change was a delete) cannot be filled: its row holds the update's
// columns and NULL for the column not read, as a model built again does.
func TestToastedColumnWithoutEarlierValue(t *testing.T) {
	for _, schemas := range []bool{false, true} {
		t.Run(fmt.Sprintf("schemas=%v", schemas), func(t *testing.T) {
			l := newChangeLoader(t)
			e := pgToast{l: l, schemas: schemas}
			q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
			e.event("c", 100, 3, "a", `"v1"`)
			e.event("u", 200, 3, "b", `"v2"`)
			e.event("c", 100, 4, "a", `"gone"`)
			e.event("d", 200, 4, "a", `null`)
			l.flush()
			l.mustMerge()
			l.want(q, "3|b|v2")
			e.event("r", 150, 3, "old", `"snapshot"`) // read late, older than the model's row
			e.event("u", 250, 3, "c", toastPlaceholder)
			e.event("u", 300, 4, "back", toastPlaceholder) // after its delete
			e.event("u", 300, 5, "new", toastPlaceholder)  // never seen
			l.flush()
			l.mustMerge()
			l.want(q, "3|c|v2", "4|back|NULL", "5|new|NULL")
			l.rebuilt(q, "cdc_shop_docs")
			// A later change that sends the value mends the row.
			e.event("u", 400, 5, "newer", `"sent"`)
			e.event("u", 410, 5, "newest", toastPlaceholder)
			l.flush()
			l.mustMerge()
			l.want(q, "3|c|v2", "4|back|NULL", "5|newest|sent")
			l.rebuilt(q, "cdc_shop_docs")
		})
	}
}

// A delete whose before image holds the placeholder (REPLICA IDENTITY
// FULL keeps a TOAST value unread) deletes its key.
func TestToastedDeleteDeletes(t *testing.T) {
	l := newChangeLoader(t)
	e := pgToast{l: l, schemas: true}
	e.event("c", 100, 1, "a", `"big"`)
	e.event("c", 110, 2, "a", `"big"`)
	l.flush()
	l.mustMerge()
	e.event("d", 200, 1, "a", toastPlaceholder)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v, doc FROM cdc_shop_docs ORDER BY id`, "2|a|big")
	l.rebuilt(`SELECT id, v, doc FROM cdc_shop_docs ORDER BY id`, "cdc_shop_docs")
}

// Random histories of five keys on two partitions (a key's changes on
// one, in source order, as Debezium writes them): creates, updates that
// send doc or leave it unread, deletes, some changes delivered twice,
// merged in rounds cut at random. After each round the model holds what
// the source holds, doc being the value of the key's latest change that
// sent it (NULL where an update left it unread right after the key's
// delete or with no change before), and a model built again from the
// changelog table holds the same. TRACELAKE_RANDOM_SEEDS runs more seeds.
func TestToastedRandomRoundsMatchTheSource(t *testing.T) {
	for seed := range randomSeeds(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomToastRun(t, uint64(seed)) })
	}
}

func randomToastRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	l := newChangeLoader(t)
	e := pgToast{l: l, schemas: seed%2 == 1}
	type state struct {
		live   bool
		v, doc string
	}
	source := map[int]*state{}
	q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
	want := func() []string {
		var out []string
		for id := 1; id <= 5; id++ {
			if s := source[id]; s != nil && s.live {
				out = append(out, fmt.Sprintf("%d|%s|%s", id, s.v, s.doc))
			}
		}
		return out
	}
	lsn, merged := 100, false
	for i := range 60 {
		id := 1 + rng.IntN(5)
		s := source[id]
		if s == nil {
			s = &state{doc: "NULL"}
			source[id] = s
		}
		lsn += 10
		v, doc := fmt.Sprintf("v%d", i), fmt.Sprintf("doc%d", i)
		op, sent := "u", `"`+doc+`"`
		switch r := rng.IntN(10); {
		case !s.live && r < 8:
			op = "c"
		case s.live && r < 2:
			op = "d"
		case r < 6:
			sent = toastPlaceholder // leaves doc as it was: NULL after a delete
			if !s.live {
				doc = "NULL"
			} else {
				doc = s.doc
			}
		}
		p := int32(id % 2) // a key's changes on one partition
		e.partition = p
		if op == "d" {
			e.event(op, lsn, id, s.v, `null`)
		} else {
			e.event(op, lsn, id, v, sent)
		}
		if rng.IntN(8) == 0 { // delivered twice
			dup := *l.pending[p][len(l.pending[p])-1]
			dup.Offset = l.next[p]
			l.next[p]++
			l.pending[p] = append(l.pending[p], &dup)
		}
		if op == "d" {
			s.live = false
		} else {
			s.live, s.v, s.doc = true, v, doc
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

// Updates that left a value unread, dead-lettered (as every release
// before 2026-12-07 did with them; here by a column of a reserved name,
// taken out of the dead letters before the replay), land with a replay
// after later changes of their keys merged: a key's replayed update older
// than its model row changes nothing, a newer one takes the value the
// key's earlier changes give.
func TestToastedUpdatesReplayed(t *testing.T) {
	l := newChangeLoader(t)
	e := pgToast{l: l}
	deadLetter := func() { // the last event queued
		r := l.pending[0][len(l.pending[0])-1]
		r.Value = []byte(strings.Replace(string(r.Value), `"doc":`, `"KOFFSET":1,"doc":`, 1))
	}
	q := `SELECT id, v, coalesce(doc, 'NULL') FROM cdc_shop_docs ORDER BY id`
	e.event("c", 100, 1, "a", `"big1"`)
	e.event("c", 100, 2, "a", `"big2"`)
	e.event("u", 110, 1, "b", toastPlaceholder)
	deadLetter()
	e.event("u", 120, 1, "c", toastPlaceholder)
	deadLetter()
	e.event("u", 110, 2, "b", toastPlaceholder)
	deadLetter()
	e.event("u", 200, 2, "sent", `"big2b"`)
	l.flushDeadLettering()
	l.mustMerge()
	l.want(q, "1|a|big1", "2|sent|big2b")
	if _, err := l.s.DB().Exec(`UPDATE cdc_dlq SET "value" = encode(replace(decode("value"), '"KOFFSET":1,', ''))`); err != nil {
		t.Fatal(err)
	}
	res, err := l.s.Replay(context.Background(), duckdb.ReplayOptions{Decode: l.dec.AppendRows, Replayed: l.merger.LowerWatermarks})
	if err != nil || res.Loaded != 3 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	l.mustMerge()
	l.want(q, "1|c|big1", "2|sent|big2b")
	l.rebuilt(q, "cdc_shop_docs")
}
