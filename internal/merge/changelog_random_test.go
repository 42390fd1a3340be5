package merge

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// randomSeeds is how many seeds a randomized test runs:
// TRACELAKE_RANDOM_SEEDS, or n.
func randomSeeds(n int) int {
	if s, err := strconv.Atoi(os.Getenv("TRACELAKE_RANDOM_SEEDS")); err == nil && s > 0 {
		return s
	}
	return n
}

// Changes of two tables (inserts, updates, deletes, snapshot reads,
// truncations; on odd seeds a topic per table, each delete followed by its
// tombstone, some deletes compacted away) load, some dead-lettered, while
// moves, merges, partial and whole replays (each with a decoder of its
// own, as `dlq replay` has), restarts with the last records delivered
// again, changelog tables taken away and given back by hand and models
// dropped to be built again come in a random order; with every dead
// letter fixed and replayed and the tables back, a restart's move and a
// merge leave nothing landed or dead-lettered and each model holds the
// source's final rows. TRACELAKE_RANDOM_SEEDS runs more seeds (it found a
// table taken away before a restart registered twice).
func TestChangelogRandomLoadsMovesReplaysAndRestarts(t *testing.T) {
	for seed := range randomSeeds(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomChangelogRun(t, uint64(seed)) })
	}
}

func randomChangelogRun(t *testing.T, seed uint64) {
	sch := "" // the tables' schema
	if seed%4 == 2 {
		sch = "analytics."
	}
	topicPerTable := seed%2 == 1
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 99))
	dir := t.TempDir()
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) {
		o.DistributeEvery = time.Nanosecond
		o.Path, o.StageDir = filepath.Join(dir, "c.duckdb"), filepath.Join(dir, "stage")
		if sch != "" {
			o.Table = sch + "cdc"
		}
		opt = *o
	})
	tables := []string{"orders", "users"}
	state := map[string]map[int]string{}
	pos := 100
	renamed := map[string]bool{}
	var log []string
	var lastRecs []*kgo.Record
	for step := 0; step < 40; step++ {
		switch k := rng.IntN(10); {
		case k < 5: // a load of a few changes
			for range 1 + rng.IntN(4) {
				table := tables[rng.IntN(len(tables))]
				id := rng.IntN(4)
				p := int32(id % 2)
				if state[table] == nil {
					state[table] = map[int]string{}
				}
				pos++
				v, had := state[table][id]
				row := map[string]any{"id": id}
				op := "c"
				switch {
				case rng.IntN(12) == 0:
					op = "t"
					row = nil
					clear(state[table])
				case rng.IntN(10) == 0:
					op = "r"
					v = fmt.Sprintf("v%d", pos)
					row["v"] = v
					state[table][id] = v
				case had && rng.IntN(3) == 0:
					op = "d"
					row["v"] = v
					delete(state[table], id)
				default:
					if had {
						op = "u"
					}
					v = fmt.Sprintf("v%d", pos)
					row["v"] = v
					state[table][id] = v
				}
				if row != nil && rng.IntN(4) == 0 {
					row["KOFFSET"] = 1 // dead-lettered until fixed and replayed
				}
				if topicPerTable {
					ti := int32(slices.Index(tables, table))
					p = 2*ti + p
					l.topic = "dbserver1.db." + table
				}
				if op == "t" {
					l.change(p, table, op, pos, nil)
				} else if op == "d" && topicPerTable && rng.IntN(3) == 0 {
					l.next[p]++ // the delete, compacted away
				} else {
					l.change(p, table, op, pos, row, "id")
				}
				if op == "d" && topicPerTable {
					l.tombstone(p, fmt.Sprintf(`{"id":%d}`, id))
				}
				log = append(log, fmt.Sprintf("change %s p%d pos%d %s %v", table, p, pos, op, row))
			}
			lastRecs = nil
			for _, recs := range l.pending {
				lastRecs = append(lastRecs, recs...)
			}
			if _, err := l.s.Load(ctx, l.stageDeadLettering()); err != nil {
				t.Fatal(err)
			}
			log = append(log, "load")
		case k == 5 && rng.IntN(2) == 0: // a restart, then the last records delivered again
			l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
			log = append(log, "restart")
			if len(lastRecs) > 0 && rng.IntN(2) == 0 {
				for _, r := range lastRecs {
					l.pending[r.Partition] = append(l.pending[r.Partition], r)
				}
				if _, err := l.s.Load(ctx, l.stageDeadLettering()); err != nil {
					t.Fatal(err)
				}
				log = append(log, "redelivered")
			}
		case k < 6:
			l.s.Distribute(ctx) //nolint:errcheck
			log = append(log, "distribute")
		case k < 8:
			l.mergeAll()
			log = append(log, "merge")
		case k < 9: // fix the dead letters and replay some or all
			if _, err := l.s.DB().Exec(`UPDATE ` + sch + `cdc_dlq SET "value" = encode(replace(decode("value"), '"KOFFSET":1,', ''))`); err != nil {
				t.Fatal(err)
			}
			where := ""
			if rng.IntN(2) == 0 {
				where = fmt.Sprintf(`"offset" %% 2 = %d`, rng.IntN(2))
			}
			fresh, err := pipeline.NewChangelogDecoder(cdc.Options{Format: cdc.FormatDebezium}, l.s)
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.s.Replay(ctx, duckdb.ReplayOptions{Where: where, Decode: fresh.AppendRows, Replayed: l.merger.LowerWatermarks})
			if err != nil {
				t.Fatal(err)
			}
			log = append(log, fmt.Sprintf("replay %q %+v", where, res))
		case k < 10 && rng.IntN(3) == 0: // drop a model, to be built again
			table := tables[rng.IntN(len(tables))]
			q := fmt.Sprintf(`DROP TABLE IF EXISTS %scdc_db_%s`, sch, table)
			if rng.IntN(2) == 0 {
				q += fmt.Sprintf(`; DROP TABLE IF EXISTS %scdc_db_%s_tombstones`, sch, table)
			}
			if _, err := l.s.DB().Exec(q); err != nil {
				t.Fatal(err)
			}
			log = append(log, q)
		default: // break or mend a table
			table := tables[rng.IntN(len(tables))]
			name := sch + "cdc_db_" + table + "_log"
			var q string
			if renamed[table] {
				q = fmt.Sprintf(`ALTER TABLE %sx_%s RENAME TO %s`, sch, strings.TrimPrefix(name, sch), strings.TrimPrefix(name, sch))
			} else {
				q = fmt.Sprintf(`ALTER TABLE %s RENAME TO x_%s`, name, strings.TrimPrefix(name, sch))
			}
			if _, err := l.s.DB().Exec(q); err != nil {
				log = append(log, "rename failed: "+err.Error())
				continue
			}
			renamed[table] = !renamed[table]
			log = append(log, q)
		}
	}
	// Mend everything, replay everything, move and merge.
	for table, r := range renamed {
		if r {
			name := sch + "cdc_db_" + table + "_log"
			if _, err := l.s.DB().Exec(fmt.Sprintf(`ALTER TABLE %sx_%s RENAME TO %s`, sch, strings.TrimPrefix(name, sch), strings.TrimPrefix(name, sch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := l.s.DB().Exec(`UPDATE ` + sch + `cdc_dlq SET "value" = encode(replace(decode("value"), '"KOFFSET":1,', ''))`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Replay(ctx, duckdb.ReplayOptions{Decode: l.dec.AppendRows, Replayed: l.merger.LowerWatermarks}); err != nil {
		t.Fatal(err)
	}
	// A restart tries the tables that failed at once.
	l.s.Close()
	s2, err := duckdb.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s2.Close() })
	if err := s2.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	names, err := cdc.NewDecoder(cdc.Options{Format: cdc.FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	l.s, l.merger = s2, NewChangelogMerger(NewMerger(s2.DB(), slog.New(slog.DiscardHandler)), s2, names)
	if _, err := l.s.Distribute(ctx); err != nil {
		t.Fatalf("final move: %v", err)
	}
	if _, errs := l.mergeAll(); len(errs) > 0 {
		t.Fatalf("final merge: %v", errs)
	}
	fail := false
	check := func(q string, want []string) {
		got := dump(t, l.s.DB(), q)
		if !slices.Equal(got, want) {
			fail = true
			t.Errorf("%s:\n got %q\nwant %q", q, got, want)
		}
	}
	check(`SELECT count(*) FROM `+sch+`cdc_landing`, []string{"0"})
	check(`SELECT count(*) FROM `+sch+`cdc_dlq`, []string{"0"})
	for _, table := range tables {
		if state[table] == nil {
			continue
		}
		var want []string
		for id := range 4 {
			if v, ok := state[table][id]; ok {
				want = append(want, fmt.Sprintf("%d|%s", id, v))
			}
		}
		check(`SELECT id, v FROM `+sch+`cdc_db_`+table+` ORDER BY id`, want)
	}
	if fail {
		for _, s := range log {
			t.Log(s)
		}
	}
}
