package iceberg_test

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// Several processes load one table in turn. Another engine rolls the
// table back one snapshot, to a's last load, dropping c's (partition 2,
// offsets 0-9): the positions keep c's 10, ahead of the data. a's next
// load must be refused before it commits (README: "a running tracelake
// run at its next load, before any table of the load commits"): the
// table's branch descends from the snapshot a last saw, but a load
// committed after that snapshot is gone. Committed, a's load lands on
// top of the rollback, carrying position 10 of partition 2 with it: the
// next start reports loads on top (records skipped, a manual repair),
// and whichever process is given partition 2 reads it from 10.
func TestRollbackToTheSnapshotAProcessLastSawStopsItsNextLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ps := prepared(t, dir, 2)
	a, c := ps[0], ps[1]
	load(t, a, batch(0, 0, 9))
	load(t, c, batch(2, 0, 9))
	if err := openSink(t, dir, false).RollBackRaw(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, _, err := tryLoad(t, a, batch(0, 10, 19))
	if err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Errorf("a's load after a rollback past c's load: %v; want the rollback reported", err)
	}
	if got := stored(t, a, false)[0]; !slices.Equal(got, seq(0, 9)) {
		t.Errorf("partition 0 offsets %v, want 0-9: nothing committed on top of the rollback", got)
	}
}
