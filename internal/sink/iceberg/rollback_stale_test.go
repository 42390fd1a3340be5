package iceberg_test

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// Two processes load one table, a partition 0 and b partition 1; b's
// load of 10-19 is the table's last when another engine rolls it back
// past both processes' second loads. The user sets the positions back
// as the error says and restarts a first (a rolling restart): its first
// load lists the rolled-back snapshots in tracelake.rollback-checked.
// b, not restarted yet, reads partition 1 on from 20: its next load must
// be refused (README: a running process stops at its next load), not
// pass because another process's recovery listed the snapshots, and
// commit 20-29 over position 10, skipping 10-19 for good.
func TestRollbackCheckedByAnotherProcessDoesNotLetAStaleOneGoOn(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ps := prepared(t, dir, 2)
	a, b := ps[0], ps[1]
	load(t, a, batch(0, 0, 9))
	load(t, b, batch(1, 0, 9))
	load(t, a, batch(0, 10, 19))
	load(t, b, batch(1, 10, 19))
	if err := openSink(t, dir, false).RollBackRaw(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"tracelake.position.traces.0", "tracelake.position.traces.1"} {
		if err := a.SetTableProperty(ctx, key, "10"); err != nil {
			t.Fatal(err)
		}
	}
	r := openSink(t, dir, false) // a, restarted
	if err := r.Prepare(ctx); err != nil {
		t.Fatalf("start with the positions set back: %v", err)
	}
	load(t, r, batch(0, 10, 19))

	_, _, err := tryLoad(t, b, batch(1, 20, 29))
	if err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Errorf("the stale process's load: %v; want the rollback reported", err)
	}
	if got := stored(t, r, false)[1]; !slices.Equal(got, seq(0, 9)) {
		t.Errorf("partition 1 offsets %v, want 0-9 (10-19 to be loaded again from the positions set back)", got)
	}
}
