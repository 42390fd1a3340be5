package merge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// Changes of a model (updates and deletes, with a version or without:
// without, no "insert", whose replay README says is not yet right), some
// dead-lettered and some the model rejects, load on two partitions while
// merges, partial and whole replays and drops of the target come in a
// random order; with every dead letter replayed, a merge leaves the
// target with each key's latest good change and each rejected change in
// the rejects once.
func TestModelRandomLoadsReplaysAndDrops(t *testing.T) {
	for _, versioned := range []bool{true, false} {
		for seed := range randomSeeds(3) {
			t.Run(fmt.Sprint(versioned, seed), func(t *testing.T) { randomModelRun(t, uint64(seed), versioned) })
		}
	}
}

func randomModelRun(t *testing.T, seed uint64, versioned bool) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	l, m, mg := customersLoader(t, versioned)
	type ch struct {
		off    int64
		p      int32
		id, v  int
		action string
		name   string
		bad    bool
	}
	var all []ch
	dead := map[[2]int64]bool{} // (p, off) dead-lettered and not yet replayed
	ver := 0
	var log []string
	for step := 0; step < 40; step++ {
		switch k := rng.IntN(10); {
		case k < 5:
			files := []sink.File{}
			for p := int32(0); p < 2; p++ {
				n := rng.IntN(4)
				if n == 0 {
					continue
				}
				b := &sink.Batch{}
				rg := sink.Range{TopicPartition: sink.TopicPartition{Topic: testTopic, Partition: p}, First: l.next[p]}
				for range n {
					id := 2*rng.IntN(3) + int(p) // keys keep to a partition
					ver++
					c := ch{off: l.next[p], p: p, id: id, v: ver, action: "update", name: fmt.Sprintf("n%d", ver)}
					if rng.IntN(3) == 0 {
						c.action = "delete"
					}
					balance := "1"
					if rng.IntN(8) == 0 {
						c.bad, balance = true, `"lots"`
					}
					value := fmt.Appendf(nil, `{"action":%q,"id":%d,"v":%d,"name":%q,"balance":%s}`, c.action, c.id, c.v, c.name, balance)
					r := &kgo.Record{Topic: testTopic, Partition: p, Offset: l.next[p], Value: value}
					if rng.IntN(4) == 0 {
						b.DLQ = envelope.AppendDLQRow(b.DLQ, r, "a reason since fixed", envelope.StageDecode)
						rg.DLQ++
						dead[[2]int64{int64(p), c.off}] = true
					} else {
						var uid [16]byte
						l.ids.Next(&uid)
						b.Rows = envelope.AppendRawRow(b.Rows, r, &uid, envelope.ValueVerbatim)
						rg.Records++
					}
					b.MaxLine = max(b.MaxLine, len(value)+500)
					all = append(all, c)
					l.next[p]++
					log = append(log, fmt.Sprintf("%+v dead=%v", c, dead[[2]int64{int64(p), c.off}]))
				}
				rg.Last = l.next[p] - 1
				b.Ranges = []sink.Range{rg}
				f, err := l.s.Stage(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			if len(files) > 0 {
				if _, err := l.s.Load(ctx, files); err != nil {
					t.Fatal(err)
				}
			}
		case k < 8:
			mustMerge(t, mg, m)
			log = append(log, "merge")
		case k < 9:
			where := ""
			if rng.IntN(2) == 0 {
				where = fmt.Sprintf(`"offset" %% 2 = %d`, rng.IntN(2))
			}
			if _, err := l.s.Replay(ctx, duckdb.ReplayOptions{Where: where, Replayed: LowerWatermarks([]config.Model{m})}); err != nil {
				t.Fatal(err)
			}
			log = append(log, "replay "+where)
		default:
			if _, err := l.db().Exec(`DROP TABLE IF EXISTS customers`); err != nil {
				t.Fatal(err)
			}
			log = append(log, "drop target")
		}
	}
	if _, err := l.s.Replay(ctx, duckdb.ReplayOptions{Replayed: LowerWatermarks([]config.Model{m})}); err != nil {
		t.Fatal(err)
	}
	mustMerge(t, mg, m)
	// The reference: per key, the latest good change (by version, which
	// follows the offsets of a key's partition).
	latest := map[int]ch{}
	var rejects []string
	for _, c := range all {
		if c.bad {
			if c.action != "delete" {
				rejects = append(rejects, fmt.Sprintf("%d|%d", c.p, c.off))
				continue
			}
		}
		latest[c.id] = c
	}
	var want []string
	for id, c := range latest {
		if c.action != "delete" {
			want = append(want, fmt.Sprintf("%d|%s", id, c.name))
		}
	}
	slices.Sort(want)
	slices.Sort(rejects)
	fail := false
	if got := dump(t, l.db(), `SELECT id, name FROM customers ORDER BY id`); !slices.Equal(got, want) {
		fail = true
		t.Errorf("target:\n got %q\nwant %q", got, want)
	}
	if got := dump(t, l.db(), `SELECT "partition", "offset" FROM customers_rejects ORDER BY ALL`); !slices.Equal(got, rejects) {
		fail = true
		t.Errorf("rejects:\n got %q\nwant %q", got, rejects)
	}
	if got := dump(t, l.db(), `SELECT count(*) FROM trace_raw_dlq`); !slices.Equal(got, []string{"0"}) {
		fail = true
		t.Errorf("dlq: %v", got)
	}
	if fail {
		for _, s := range log {
			t.Log(s)
		}
	}
}
