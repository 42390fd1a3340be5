package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Done marks under SIGKILL: Debezium changes of three tables, their
// source times ten hours apart from first to last, keyed over four
// partitions, arrive while `tracelake run` lands, moves and merges them
// every 200ms and marks the hours done (cdc.ready_delay 0), and is
// killed at random moments (between a load and its move, a move and its
// merge, a merge and its marks) and restarted. After each kill no mark is
// ahead of its model: every change of a marked table with a source time
// before the marked hour's end is merged (the model's watermark is past
// its offset on its partition). At the end the hours whose changes have
// all loaded are marked.
func TestCDCCrashKill9MarksNeverAheadOfTheModel(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	cfgPath := writeConfig(t, cluster, "format: debezium, group: cdcmarks, session_timeout: 6s, rebalance_timeout: 6s", `workers: 2
batch: {max_records: 200, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
merge: {every: 200ms}
cdc: {distribute_every: 100ms, ready_delay: 0s}`)
	const tables, keys, changes, step = 3, 40, 6000, 6 * time.Second
	base := time.Now().UTC().Truncate(time.Hour).Add(-12 * time.Hour)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var mu sync.Mutex // all, appended to by the second half's producer
	var all []sentChange
	produce := func(from, n, per int, pause time.Duration) error {
		for first := from; first < from+n; first += per {
			time.Sleep(pause) // the source's pace, so that runs are killed while hours complete
			var recs []*kgo.Record
			for i := first; i < min(first+per, from+n); i++ {
				table, id := fmt.Sprintf("m%d", rng.IntN(tables)), rng.IntN(keys)
				at := base.Add(time.Duration(i) * step)
				recs = append(recs, &kgo.Record{Topic: testTopic, Key: fmt.Appendf(nil, `{"id":%d}`, id),
					Value: fmt.Appendf(nil, `{"before":null,"after":{"id":%d,"v":%d},"source":{"connector":"mysql","db":"inv","table":%q,"file":"mysql-bin.000001","pos":%d,"row":0,"ts_ms":%d},"op":"c","ts_ms":%d}`,
						id, i, table, i, at.UnixMilli(), at.UnixMilli())})
			}
			res := prod.ProduceSync(context.Background(), recs...)
			if err := res.FirstErr(); err != nil {
				return err
			}
			for _, r := range res {
				var v struct {
					Source struct {
						Table string `json:"table"`
						TsMs  int64  `json:"ts_ms"`
					} `json:"source"`
				}
				if err := json.Unmarshal(r.Record.Value, &v); err != nil {
					return err
				}
				mu.Lock()
				all = append(all, sentChange{model: "cdc_inv_" + v.Source.Table, at: time.UnixMilli(v.Source.TsMs).UTC(), partition: r.Record.Partition, offset: r.Record.Offset})
				mu.Unlock()
			}
		}
		return nil
	}
	if err := produce(0, changes/2, 500, 0); err != nil {
		t.Fatal(err)
	}
	check := func(db *sql.DB, when string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		checkMarksNotAhead(t, db, when, all)
	}
	produced := make(chan error, 1)
	go func() { produced <- produce(changes/2, changes/2, 100, time.Second) }()
	seed := uint64(time.Now().UnixNano())
	kill := rand.New(rand.NewPCG(seed, 3))
	t.Logf("kill moments from seed %d", seed)
	for i := range 6 {
		cmd := startRunUntil(t, bin, cfgPath, fmt.Sprintf("run %d", i), assignedMark).cmd
		time.Sleep(time.Duration(kill.IntN(2500)) * time.Millisecond) // the kill moment is the point
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		db, err := sql.Open("duckdb", filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
		if err != nil {
			t.Fatal(err)
		}
		check(db, fmt.Sprintf("after kill %d", i))
		db.Close()
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	db := cdcRun(t, bin, cfgPath)
	check(db, "at the end")
	last := base.Add(time.Duration(changes-1) * step)
	for m := range tables {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM tracelake_ready WHERE "table" = ? AND hour < ?`, fmt.Sprintf("cdc_inv_m%d", m), last.Add(-time.Hour).Truncate(time.Hour)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := int(last.Add(-time.Hour).Truncate(time.Hour).Sub(base) / time.Hour); n != want {
			t.Errorf("cdc_inv_m%d: %d hours marked before %s, want %d", m, n, last.Add(-time.Hour).Truncate(time.Hour), want)
		}
	}
}

// sentChange is a change a test produced: the model it goes to, its source
// time and its Kafka coordinates.
type sentChange struct {
	model     string
	at        time.Time
	partition int32
	offset    int64
}

// checkMarksNotAhead fails the test if a done mark in db is ahead of its
// model: a change of all, of a marked model, with a source time before the
// marked hour's end that the model has not merged (its watermark on the
// change's partition is not past the change's offset).
func checkMarksNotAhead(t *testing.T, db *sql.DB, when string, all []sentChange) {
	t.Helper()
	marked := map[string]time.Time{} // model → end of its last marked hour
	rows, err := db.Query(`SELECT "table", max(hour) FROM tracelake_ready GROUP BY ALL`)
	if err != nil {
		return // no mark yet
	}
	for rows.Next() {
		var table string
		var hour time.Time
		if err := rows.Scan(&table, &hour); err != nil {
			t.Fatal(err)
		}
		marked[table] = hour.Add(time.Hour)
	}
	rows.Close()
	merged := map[string]int64{} // model/partition → watermark
	rows, err = db.Query(`SELECT model, "partition", next_offset FROM tracelake_merge_watermarks`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var model string
		var p int32
		var next int64
		if err := rows.Scan(&model, &p, &next); err != nil {
			t.Fatal(err)
		}
		merged[fmt.Sprint(model, "/", p)] = next
	}
	rows.Close()
	t.Logf("%s: %d changes produced, marked up to %v", when, len(all), marked)
	for _, s := range all {
		end, ok := marked[s.model]
		if ok && s.at.Before(end) && merged[fmt.Sprint(s.model, "/", s.partition)] <= s.offset {
			t.Fatalf("%s: %s is marked done up to %s, but its change of %s (partition %d offset %d) is not merged (watermark %d)",
				when, s.model, end, s.at, s.partition, s.offset, merged[fmt.Sprint(s.model, "/", s.partition)])
		}
	}
}
