package iceberg_test

import (
	"context"
	"slices"
	"testing"
)

// Two processes load one table, partition 0 and partition 1 (Kafka's
// cooperative-sticky assignment keeps a running process's partitions,
// and its read offsets, across a rebalance). Another engine rolls the
// table back past their last load (offsets 10-19 of both partitions);
// the user sets the positions back as the error says and restarts one
// process first (a rolling restart). Its first load lists the
// rolled-back snapshot in tracelake.rollback-checked. The other process,
// still running, reads partition 1 from 20 on, where it was: its next
// load must still be refused (README: a running process stops at its
// next load), not commit 20-29 over position 10 and skip 10-19 for good.
func TestRollbackStillStopsAProcessNotRestartedAfterAnotherCommitsTheRecovery(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ps := prepared(t, dir, 2)
	a, b := ps[0], ps[1] // partitions 0 and 1
	load(t, a, batch(0, 0, 9))
	load(t, b, batch(1, 0, 9))
	load(t, a, batch(0, 10, 19), batch(1, 10, 19)) // before a rebalance moved partition 1 to b
	if err := openSink(t, dir, false).RollBackRaw(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The documented recovery: the positions of the current snapshot.
	for _, key := range []string{"tracelake.position.traces.0", "tracelake.position.traces.1"} {
		if err := a.SetTableProperty(ctx, key, "10"); err != nil {
			t.Fatal(err)
		}
	}
	r := openSink(t, dir, false) // a, restarted first
	if err := r.Prepare(ctx); err != nil {
		t.Fatalf("start with the positions set back: %v", err)
	}
	load(t, r, batch(0, 10, 19))

	// b was not restarted yet: its records of partition 1 go on from 20.
	_, _, err := tryLoad(t, b, batch(1, 20, 29))
	if err == nil {
		t.Errorf("the running process's load after the rollback and another process's recovery: committed; want the rollback reported")
	}
	if got := stored(t, r, false)[1]; slices.Contains(got, 20) && !slices.Contains(got, 10) {
		t.Errorf("partition 1 offsets %v: 10-19 skipped for good, under positions past them", got)
	}
}
