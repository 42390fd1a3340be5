package iceberg_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// The dead-letter table rolled back alone past two loads (dead letters 13
// and 23), its position set back as told (to 10). The recovery reads the
// partition again from 10; its first load (10-19) commits the dead letter
// 13, and the process stops (a crash, a deploy, the partition handed to a
// process started since). The next start must go on reading the
// partition again from the dead-letter table's position (20), not from
// the main table's (30): else the dead letter 23 is lost for good.
func TestRollbackOfTheDeadLetterTableRecoversItsRowsAcrossARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rollBackDLQAfter(t, dir, 2, batch(0, 0, 9, 3), batch(0, 10, 19, 13), batch(0, 20, 29, 23))
	tp := sink.TopicPartition{Topic: "traces", Partition: 0}
	r := recoverAsTold(t, dir)
	pos, err := r.Positions(ctx, []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if pos[tp] != 10 {
		t.Fatalf("the recovery resumes from %d, want 10 (the dead-letter table's position set back)", pos[tp])
	}
	load(t, r, batch(0, 10, 19, 13))

	again := prepared(t, dir, 1)[0]
	pos, err = again.Positions(ctx, []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if pos[tp] != 20 {
		t.Errorf("a start in the middle of the recovery resumes from %d, want 20 (the dead-letter table's position)", pos[tp])
	}
	load(t, again, batch(0, pos[tp], 39, 3, 13, 23))
	if got := stored(t, again, true)[0]; !slices.Equal(got, []int64{3, 13, 23}) {
		t.Errorf("dead-letter offsets %v after the recovery, want 3, 13 and 23", got)
	}
	if got := stored(t, again, false)[0]; !slices.Equal(got, seq(0, 39, 3, 13, 23)) {
		t.Errorf("raw offsets %v after the recovery, want 0-39 but 3, 13 and 23, once", got)
	}
}

// The recovery's tail holds no dead letter: its loads still move the
// dead-letter table's position (an empty commit), so that the recovery
// ends where it passes the main table's position, and a start after it
// resumes from there rather than reading the partition again.
func TestRollbackOfTheDeadLetterTableEndsItsRecoveryWithoutDeadLetters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rollBackDLQAfter(t, dir, 1, batch(0, 0, 9, 3), batch(0, 10, 19, 13), batch(0, 20, 29))
	tp := sink.TopicPartition{Topic: "traces", Partition: 0}
	r := recoverAsTold(t, dir)
	load(t, r, batch(0, 10, 19, 13))
	load(t, r, batch(0, 20, 29))
	again := prepared(t, dir, 1)[0]
	pos, err := again.Positions(ctx, []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if pos[tp] != 30 {
		t.Errorf("a start after the recovery read past the main table's position resumes from %d, want 30", pos[tp])
	}
	if got := stored(t, again, true)[0]; !slices.Equal(got, []int64{3, 13}) {
		t.Errorf("dead-letter offsets %v after the recovery, want 3 and 13", got)
	}
}

// rollBackDLQAfter loads each of loads in turn, then rolls the
// dead-letter table alone back by n snapshots, as another engine would.
func rollBackDLQAfter(t *testing.T, dir string, n int, loads ...*sink.Batch) {
	t.Helper()
	s := prepared(t, dir, 1)[0]
	for _, b := range loads {
		load(t, s, b)
	}
	if err := openSink(t, dir, false).RollBackDLQ(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}
