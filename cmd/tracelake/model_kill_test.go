package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A model (key, version, deletes, rejects) merged by run's merge.every
// while changes keep arriving, with `tracelake run` killed (SIGKILL) at
// random moments, merges in flight among them: a merge is one DuckDB
// transaction (target, rejects, tombstones, watermark), so a kill
// between its target's write and its watermark's leaves neither. At the
// end the model holds each key's newest change exactly (from the
// producer's record of what it sent), no key deleted last comes back,
// and each rejected change is held once.
func TestLongModelMergesKilledAtRandomMomentsHoldTheNewestChangePerKey(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("builds and runs the binary; long: run with -run '^TestLong' without -race")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 3)
	cfgPath := writeConfig(t, cluster, "group: modelkill, session_timeout: 6s, rebalance_timeout: 6s", `workers: 2
batch: {max_records: 50, max_interval: 50ms}
load: {max_files: 2, max_interval: 50ms}
merge:
  every: 30ms
  models:
    - name: kv
      key: [k]
      version: v
      action: {path: $.op, delete: [d]}
      columns:
        k: {path: $.k, type: BIGINT}
        v: {path: $.v, type: BIGINT}
        x: {path: $.x, type: BIGINT}`)
	const keys, changes = 50, 6000
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 24))
	want := map[int]int{} // key → x of its newest change; absent: deleted or never made
	version := map[int]int{}
	rejected := 0
	change := func(i int) *kgo.Record {
		k := rng.IntN(keys)
		// Versions go up per key, but a change now and then carries a
		// version older than the key's newest (a late retry upstream):
		// it must change nothing.
		v := version[k] + 1 + rng.IntN(3)
		late := version[k] > 2 && rng.IntN(10) == 0
		if late {
			v = version[k] - 1 - rng.IntN(2)
		}
		var value string
		switch {
		case rng.IntN(8) == 0:
			value = fmt.Sprintf(`{"k": %d, "v": %d, "op": "d"}`, k, v)
			if !late {
				delete(want, k)
				version[k] = v
			}
		case rng.IntN(12) == 0: // rejected: x is no BIGINT; it changes nothing
			value = fmt.Sprintf(`{"k": %d, "v": %d, "x": "many"}`, k, v)
			rejected++
		default:
			value = fmt.Sprintf(`{"k": %d, "v": %d, "x": %d}`, k, v, i)
			if !late {
				want[k] = i
				version[k] = v
			}
		}
		return &kgo.Record{Topic: testTopic, Key: fmt.Appendf(nil, "%d", k), Value: []byte(value)}
	}
	sent := 0
	produce := func(n int) error {
		for end := sent + n; sent < end; {
			recs := make([]*kgo.Record, 0, 200)
			for ; sent < end && len(recs) < 200; sent++ {
				recs = append(recs, change(sent))
			}
			if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := produce(changes / 2); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- produce(changes / 2) }()
	killAtRandomMoments(t, bin, cfgPath, 5)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if rep := runUntilIdle(t, bin, cfgPath); !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
	db, err := sql.Open("duckdb", filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var wantKV []string
	for k := range keys {
		if x, ok := want[k]; ok {
			wantKV = append(wantKV, fmt.Sprintf("%d|%d", k, x))
		}
	}
	wantRows(t, db, `SELECT k, x FROM kv ORDER BY k`, wantKV...)
	// Each rejected change once.
	wantRows(t, db, `SELECT count(*), count(DISTINCT (topic, "partition", "offset")) FROM kv_rejects`, fmt.Sprintf("%d|%d", rejected, rejected))
}
