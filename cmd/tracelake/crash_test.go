package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// A `tracelake run` child is killed with SIGKILL at random moments while
// records keep arriving, and restarted each time; at the end every message
// is present exactly once and verify reports no gap and no duplicate.
func TestCrashKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	cfgPath := writeConfig(t, cluster, "group: crash, session_timeout: 6s, rebalance_timeout: 6s", `workers: 2
batch: {max_records: 500, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}`)

	const first, during = 30_000, 30_000
	if err := tracegen.Produce(context.Background(), prod, testTopic, first, 1, nil); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, testTopic, during, 2, nil) }()

	// The DuckDB file is the child's alone while it runs; its /metrics
	// says when the first load committed.
	firstLoad := regexp.MustCompile(`(?m)^tracelake_loads_total [1-9]`)
	killAfterFirstLoad(t, bin, cfgPath, func(run *child) bool { return firstLoad.MatchString(run.get("/metrics")) })
	killAtRandomMoments(t, bin, cfgPath, 5)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}

	rep := runUntilIdle(t, bin, cfgPath)
	rows, dlq := rep.Totals()
	if !rep.OK || rows+dlq != first+during || dlq != 0 {
		t.Fatalf("after kills: ok=%v rows=%d dlq=%d problems=%v, want %d rows", rep.OK, rows, dlq, rep.Problems, first+during)
	}
	for _, p := range rep.Partitions {
		if p.Gaps != 0 || p.Duplicates != 0 || p.Overlaps != 0 || p.Lag != 0 {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
	}
}

// killAfterFirstLoad starts `tracelake run` and kills it with SIGKILL as
// soon as loaded reports the first load, so that at least one kill lands
// in the middle of ingesting (on a slow machine the first load can come
// later than all the random kill moments).
func killAfterFirstLoad(t *testing.T, bin, cfgPath string, loaded func(run *child) bool) {
	t.Helper()
	run := startRun(t, bin, cfgPath, "run first")
	deadline := time.Now().Add(2 * time.Minute)
	for !loaded(run) {
		if time.Now().After(deadline) {
			t.Fatalf("nothing loaded within 2 minutes\n%s", run.log)
		}
		time.Sleep(20 * time.Millisecond) // polling the sink for the first load
	}
	if err := run.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = run.cmd.Wait()
}

// killAtRandomMoments starts `tracelake run` kills times and kills each
// with SIGKILL at a random moment from just after its assignment to well
// into loading: the kill moment is the point of the crash tests.
func killAtRandomMoments(t *testing.T, bin, cfgPath string, kills int) {
	t.Helper()
	killAtRandomMomentsAfter(t, bin, cfgPath, kills, assignedMark)
}

// killAtRandomMomentsAfter is killAtRandomMoments counting from the log
// line mark instead of the assignment.
func killAtRandomMomentsAfter(t *testing.T, bin, cfgPath string, kills int, mark string) {
	t.Helper()
	killAtRandomMomentsThen(t, bin, cfgPath, kills, mark, nil)
}

// killAtRandomMomentsThen is killAtRandomMomentsAfter calling after (if
// not nil) once each killed run has exited, before the next starts: the
// moment to check what a kill left on disk.
func killAtRandomMomentsThen(t *testing.T, bin, cfgPath string, kills int, mark string, after func(kill int)) {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("kill moments from seed %d", seed)
	for i := range kills {
		cmd := startRunUntil(t, bin, cfgPath, fmt.Sprintf("run %d", i), mark).cmd
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if after != nil {
			after(i)
		}
	}
}

// Change capture under SIGKILL: Debezium changes (inserts, updates and
// deletes of 30 tables' rows, each key on one partition in source order)
// keep arriving while `tracelake run` lands them, moves them into their
// changelog tables and merges the models every 200ms, and is killed at
// random moments and restarted. At the end verify reports no gap and no
// duplicate, nothing is left in the landing table, and every model holds
// exactly the source's final state.
func TestCDCCrashKill9ModelsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	cfgPath := writeConfig(t, cluster, "format: debezium, group: cdccrash, session_timeout: 6s, rebalance_timeout: 6s", `workers: 2
batch: {max_records: 300, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
merge: {every: 200ms}
cdc: {distribute_every: 100ms}`)
	const tables, keys, changes = 30, 40, 12_000
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	state := map[string]map[int]string{} // table → id → v, as the source has it
	pos := 0
	change := func() *kgo.Record {
		table := fmt.Sprintf("t%02d", rng.IntN(tables))
		id := rng.IntN(keys)
		if state[table] == nil {
			state[table] = map[int]string{}
		}
		pos++
		v, had := state[table][id]
		op, before, after := "c", "null", ""
		switch {
		case had && rng.IntN(4) == 0:
			op, before, after = "d", fmt.Sprintf(`{"id":%d,"v":%q}`, id, v), "null"
			delete(state[table], id)
		case had:
			op = "u"
			fallthrough
		default:
			v = fmt.Sprintf("v%d", pos)
			after = fmt.Sprintf(`{"id":%d,"v":%q}`, id, v)
			state[table][id] = v
		}
		value := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"connector":"mysql","db":"inv","table":%q,"file":"mysql-bin.000001","pos":%d,"row":0,"ts_ms":1700000000000},"op":%q,"ts_ms":1700000000000}`,
			before, after, table, pos, op)
		return &kgo.Record{Topic: testTopic, Key: fmt.Appendf(nil, `{"id":%d}`, id), Value: []byte(value)}
	}
	produce := func(n int) error {
		for sent := 0; sent < n; sent += 500 {
			recs := make([]*kgo.Record, 0, 500)
			for range min(500, n-sent) {
				recs = append(recs, change())
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
	firstMerge := regexp.MustCompile(`(?m)^tracelake_merge_raw_rows_total\{[^}]*\} [1-9]`)
	killAfterFirstLoad(t, bin, cfgPath, func(run *child) bool { return firstMerge.MatchString(run.get("/metrics")) })
	killAtRandomMoments(t, bin, cfgPath, 5)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	db := cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT count(*) FROM cdc_landing`, "0")
	wantRows(t, db, `SELECT count(*) FROM cdc_dlq`, "0")
	// Every change once in its changelog table, at its own coordinates.
	var counts []string
	for table := range state {
		counts = append(counts, `SELECT ktopic, kpartition, koffset FROM cdc_inv_`+table+`_log`)
	}
	wantRows(t, db, `SELECT count(*), count(DISTINCT (ktopic, kpartition, koffset)) FROM (`+strings.Join(counts, " UNION ALL ")+`)`,
		fmt.Sprintf("%d|%d", changes, changes))
	for table, rows := range state {
		var want []string
		for id := range keys {
			if v, ok := rows[id]; ok {
				want = append(want, fmt.Sprintf("%d|%s", id, v))
			}
		}
		wantRows(t, db, `SELECT id, v FROM cdc_inv_`+table+` ORDER BY id`, want...)
	}
}
