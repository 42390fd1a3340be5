package merge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// decidingVersion renders version n (ties: equal n) of one type in
// spellings that cast to one value, so the model sees ties the text does
// not show.
type decidingVersion struct {
	typ    string
	render func(rng *rand.Rand, n int) string
	bad    string // a JSON value that does not cast ("" for none)
}

var decidingVersions = []decidingVersion{
	{"BIGINT", func(_ *rand.Rand, n int) string { return fmt.Sprint(n) }, `"x"`},
	{"VARCHAR", func(_ *rand.Rand, n int) string { return fmt.Sprintf(`"v%03d"`, n) }, ""},
	{"TIMESTAMP", func(rng *rand.Rand, n int) string {
		return []string{`"2026-01-01 00:00:%02d"`, `"2026-01-01T00:00:%02d"`, `"2026-01-01 00:00:%02d.000"`}[rng.IntN(3)]
	}, `"not a time"`},
	{"DECIMAL(10,2)", func(rng *rand.Rand, n int) string {
		return []string{`%d`, `"%d.00"`, `%d.0`}[rng.IntN(3)]
	}, `"1.234"`},
	{"DOUBLE", func(rng *rand.Rand, n int) string {
		if n == 0 {
			return []string{`0`, `-0.0`, `"-0"`}[rng.IntN(3)]
		}
		return fmt.Sprintf(`%d.5`, n-1)
	}, `"abc"`},
}

// A model with a composite key and a version of each of several types,
// its changes (ties across partitions, deletes and re-inserts, rows
// rejected for a null key part or a bad or null version, Kafka
// tombstones skipped) merged in random rounds, some of which fail after
// their MERGE (rolled back), some changes dead-lettered and replayed
// later by `dlq replay` (the watermark lowered, what follows merged
// again), the model renamed midway (its target kept, every change merged
// again): the target holds each key's newest change by (version,
// partition, offset), and rebuilds (one slice, chunks) equal it.
func TestDecidingRoundsReplaysFailuresEqualRebuild(t *testing.T) {
	for _, dv := range decidingVersions {
		for seed := range randomSeeds(2) {
			t.Run(fmt.Sprint(dv.typ, "/", seed), func(t *testing.T) {
				decidingRounds(t, uint64(seed), dv)
			})
		}
	}
}

func decidingModel(typ string) config.Model {
	return config.Model{
		Name: "accounts", Target: "accounts", Key: []string{"id", "region"}, Version: "version",
		Action: config.Action{Path: "$.action"},
		Columns: config.Columns{
			{Name: "id", Path: "$.id", Type: "BIGINT"},
			{Name: "region", Path: "$.region", Type: "VARCHAR"},
			{Name: "name", Path: "$.name", Type: "VARCHAR"},
			{Name: "version", Path: "$.v", Type: typ},
		},
	}.WithDefaults("trace_raw")
}

func decidingRounds(t *testing.T, seed uint64, dv decidingVersion) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 42))
	l := newRawLoader(t)
	m := decidingModel(dv.typ)
	mg := NewMerger(l.db(), slog.New(slog.DiscardHandler))
	type chg struct {
		id     int
		region string
		n      int // version; -1: rejected
		p      int32
		off    int64
		action string
		name   string
	}
	var good []chg
	type letter struct {
		p    int32
		off  int64
		msg  string
		good *chg
	}
	var dead []letter
	var log []string
	replay := func() {
		if len(dead) == 0 {
			return
		}
		for _, d := range dead {
			if _, err := l.db().Exec(`INSERT INTO trace_raw_dlq (topic, "partition", "offset", "key", "value", error, stage, add_time) VALUES (?, ?, ?, NULL, ?::BLOB, 'an old reason', 'decode', now())`,
				testTopic, d.p, d.off, d.msg); err != nil {
				t.Fatal(err)
			}
			if d.good != nil {
				good = append(good, *d.good)
			}
			log = append(log, fmt.Sprintf("replay p%d o%d", d.p, d.off))
		}
		if res, err := l.s.Replay(ctx, duckdb.ReplayOptions{Replayed: LowerWatermarks([]config.Model{m})}); err != nil || res.Loaded != int64(len(dead)) {
			t.Fatalf("replay: %+v %v", res, err)
		}
		dead = nil
	}
	renamed := false
	for round := range 30 {
		for range 1 + rng.IntN(5) {
			p := int32(rng.IntN(3))
			off := l.next[p]
			id := 1 + rng.IntN(2)
			region := []string{"a", "b"}[rng.IntN(2)]
			n := rng.IntN(4)
			action := []string{"update", "delete", "insert"}[rng.IntN(3)]
			name := fmt.Sprintf("p%d-o%d", p, off)
			vText := dv.render(rng, n)
			if dv.typ == "TIMESTAMP" || dv.typ == "DECIMAL(10,2)" {
				vText = fmt.Sprintf(vText, n)
			}
			regionText := fmt.Sprintf("%q", region)
			ok := true
			switch rng.IntN(10) {
			case 0:
				regionText, ok = "null", false
			case 1:
				vText, ok = "null", false
			case 2:
				if dv.bad != "" {
					vText, ok = dv.bad, false
				}
			case 3:
				l.add(p, nil) // a Kafka tombstone: skipped
				log = append(log, fmt.Sprintf("p%d o%d: kafka tombstone", p, off))
				continue
			}
			msg := fmt.Sprintf(`{"action":%q,"id":%d,"region":%s,"v":%s,"name":%q}`, action, id, regionText, vText, name)
			c := chg{id: id, region: region, n: n, p: p, off: off, action: action, name: name}
			log = append(log, fmt.Sprintf("p%d o%d: %s", p, off, msg))
			if rng.IntN(8) == 0 { // dead-lettered: a hole, replayed later
				l.next[p]++
				d := letter{p: p, off: off, msg: msg}
				if ok {
					d.good = &c
				}
				dead = append(dead, d)
				log[len(log)-1] += " (dead letter)"
				continue
			}
			l.add(p, []byte(msg))
			if ok {
				good = append(good, c)
			}
		}
		l.flush()
		switch rng.IntN(6) {
		case 0, 1:
			mustMerge(t, mg, m)
			log = append(log, "merge")
		case 2:
			failAfterMerge = func() error { return errors.New("injected") }
			_, err := mg.Merge(ctx, m)
			failAfterMerge = nil
			log = append(log, fmt.Sprint("merge failing after its MERGE: ", err)) // nil: nothing to merge
		case 3:
			replay()
		}
		if round == 20 && !renamed && rng.IntN(2) == 0 {
			m.Name = "accounts_renamed" // its target kept
			renamed = true
			log = append(log, "renamed")
		}
	}
	replay()
	mustMerge(t, mg, m)
	// Each key's newest good change by (version, partition, offset).
	type key struct {
		id     int
		region string
	}
	latest := map[key]chg{}
	for _, c := range good {
		k := key{c.id, c.region}
		b, seen := latest[k]
		if !seen || c.n > b.n || c.n == b.n && (c.p > b.p || c.p == b.p && c.off > b.off) {
			latest[k] = c
		}
	}
	var want []string
	for k, c := range latest {
		if c.action != "delete" {
			want = append(want, fmt.Sprintf("%d|%s|%s", k.id, k.region, c.name))
		}
	}
	slices.Sort(want)
	target := dump(t, l.db(), `SELECT id, region, name FROM accounts`)
	if !slices.Equal(target, want) {
		t.Errorf("merged in rounds: %q, want each key's newest change by (version, partition, offset) %q", target, want)
	}
	eachRebuild(t, mg, m, []int64{0, 1 + rng.Int64N(4)}, func(tx *sql.Tx, rebuilt string, chunk int64) {
		if got := dump(t, tx, `SELECT id, region, name FROM `+rebuilt); !slices.Equal(got, target) {
			t.Errorf("rebuilt in chunks of %d offsets: %q, merged in rounds: %q", chunk, got, target)
		}
	})
	if t.Failed() {
		for _, s := range log {
			t.Log(s)
		}
	}
}
