package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// A `tracelake run` child is killed with SIGKILL at random moments while
// records keep arriving, and restarted each time; at the end every message
// is present exactly once and verify reports no gap and no duplicate.
func TestCrashKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
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
	}
}
