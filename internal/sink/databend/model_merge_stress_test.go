package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// Three processes merge one model (run's merge.every in two, a
// tracelake merge --every in the third) while loads commit raw rows on
// two partitions, each key's changes out of order (versions shuffled,
// deletes among them, some rows rejected), with replies lost after the
// work was done (a COMMIT's reply lost, the commit landing late, at
// any statement of anyone) and commits conflicting. Whatever merged
// twice or was retried, the model must end as one merger alone builds it
// from the raw table: each key's newest change, each reject once.
func TestModelMergedByThreeProcessesUnderFaultsEqualsOneMerger(t *testing.T) {
	if testing.Short() {
		t.Skip("merges under faults for about 30 s")
	}
	const seed = 1
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "b", Target: "b", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"k"}, Version: "v",
		Action: config.Action{Path: "$.op", Delete: []string{"d"}},
		Columns: config.Columns{{Name: "k", Path: "$.k", Type: "BIGINT"}, {Name: "v", Path: "$.v", Type: "BIGINT"},
			{Name: "x", Path: "$.x", Type: "BIGINT"}}}.WithDefaults("trace_raw")
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil { // the tables
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 24))
	var mu sync.Mutex
	roll := func(p float64) bool { mu.Lock(); defer mu.Unlock(); return rng.Float64() < p }
	const rows = 40
	versions := rng.Perm(rows) // no two changes share a version
	docs := make([]string, rows)
	for i := range docs {
		k, v := rng.IntN(6), versions[i]
		switch {
		case rng.IntN(5) == 0:
			docs[i] = fmt.Sprintf(`{"k": %d, "v": %d, "op": "d"}`, k, v)
		case rng.IntN(6) == 0:
			docs[i] = fmt.Sprintf(`{"k": %d, "v": %d, "op": "c", "x": "many"}`, k, v)
		default:
			docs[i] = fmt.Sprintf(`{"k": %d, "v": %d, "op": "c", "x": %d}`, k, v, i)
		}
	}
	srv.Set(func() {
		srv.DropReply = func(sql string) bool { return sql == "COMMIT" && roll(0.2) }
		srv.LateCommit = func() bool { return roll(0.3) }
		srv.LandLate = func(string) bool { return roll(0.3) }
		srv.CommitError = func() int {
			if roll(0.05) {
				return databendtest.CodeUnresolvableConflict
			}
			return 0
		}
	})
	var loaded atomic.Bool
	var wg sync.WaitGroup
	merged := make(chan struct{}, 3)
	wg.Go(func() {
		defer loaded.Store(true)
		next := map[int]int{}
		for i, doc := range docs {
			if i > 0 && roll(0.3) {
				<-merged // some merge commits between these loads
			}
			p := i % 2
			srv.AppendRow("trace_raw", databendtest.Row{"uuid": json.RawMessage(fmt.Sprintf(`"u%d"`, i)), "koffset": json.RawMessage(fmt.Sprint(next[p])),
				"kpartition": json.RawMessage(fmt.Sprint(p)), "raw_data": json.RawMessage(doc), "record_metadata": json.RawMessage(`{"topic": "t"}`)})
			next[p]++
		}
	})
	var merges atomic.Int64
	for range 3 {
		mg := merge.NewDatabendMerger(s, false)
		wg.Go(func() {
			for !loaded.Load() || merges.Load() < 6 {
				// A merge that fails changed nothing: the next one
				// merges its rows.
				if _, err := mg.Merge(ctx, m); err == nil {
					merges.Add(1)
					select {
					case merged <- struct{}{}:
					default:
					}
				}
			}
		})
	}
	wg.Wait()
	srv.Set(func() { srv.DropReply, srv.LateCommit, srv.CommitError, srv.LandLate = nil, nil, nil, nil })
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	wantAsOneMergerBuilds(t, srv, s, m, fmt.Sprintf("merged by three processes (%d merges)", merges.Load()))
}
