package iceberg_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
)

// expireAll has another engine expire every snapshot of every table but
// the current one (its expire_snapshots with retain_last 1), the
// rolled-back ones included.
func expireAll(t *testing.T, dir string) {
	t.Helper()
	time.Sleep(20 * time.Millisecond) // the snapshots' age, not a wait for anything
	if err := openSink(t, dir, false).ExpireAsAnotherEngine(context.Background(), 10*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
}

// A running process last saw the snapshot of its third load; another
// engine rolls the table back to the second and an expiry removes the
// third (on no branch) before the process's next load. The process can
// no longer walk back to the snapshot it saw, and the rolled-back load is
// gone from the metadata: its next load went on from where it read,
// committing 30-39 on top of the rollback, and 20-29 were skipped for
// good. It must stop, the table untouched, and so must a start.
func TestRollbackIsReportedAfterTheSeenSnapshotExpired(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := rolledBackTable(t, dir)
	expireAll(t, dir)
	_, files, err := tryLoad(t, s, batch(0, 30, 39))
	wantRolledBack(t, "the load after a rollback whose snapshots expired", err)
	s.Discard(files)
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19)) {
		t.Errorf("raw offsets %v after the refused load, want 0-19 (the rollback's)", got)
	}
	wantRolledBack(t, "a start after a rollback whose snapshots expired", openSink(t, dir, false).Prepare(ctx))
}

// The same with the table rolled back to a snapshot that is not a
// load's (another engine's DELETE): the branch's kept snapshots record
// no position, so only the process that saw the later snapshot can tell,
// by the branch's sequence number gone back.
func TestRollbackToAnotherEnginesSnapshotIsReportedAfterTheSeenSnapshotExpired(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9), batch(0, 10, 19))
	other := openSink(t, dir, false)
	if err := other.DeleteRaw(ctx, 0, 5); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 20, 29))
	if err := other.RollBackRaw(ctx, 1); err != nil {
		t.Fatal(err)
	}
	expireAll(t, dir)
	_, files, err := tryLoad(t, s, batch(0, 30, 39))
	if err == nil || !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "was rolled back") {
		t.Fatalf("the load after a rollback to another engine's snapshot, the rolled-back load expired: %v; want the rollback reported", err)
	}
	s.Discard(files)
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19, 5)) {
		t.Errorf("raw offsets %v after the refused load, want 0-19 but 5 (the rollback's)", got)
	}
}

// No rollback, and the snapshot a process last saw expired under
// another process's commits (expiry keeps the current one only): its
// next load must go on, and so must a start; a position set forward by
// hand (records skipped on purpose) is not taken for a rolled-back load.
func TestExpiryAloneIsNoRollback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ps := prepared(t, dir, 2)
	a, b := ps[0], ps[1]
	load(t, a, batch(0, 0, 9))
	for i := range int64(3) {
		load(t, b, batch(1, i*10, i*10+9))
	}
	expireAll(t, dir)
	load(t, a, batch(0, 10, 19))
	if err := a.SetTableProperty(ctx, "tracelake.position.traces.1", "40"); err != nil {
		t.Fatal(err)
	}
	if err := openSink(t, dir, false).Prepare(ctx); err != nil {
		t.Errorf("start after an expiry and a position set forward: %v; want it to start", err)
	}
	if got := stored(t, a, false); !slices.Equal(got[0], seq(0, 19)) || !slices.Equal(got[1], seq(0, 29)) {
		t.Errorf("offsets %v, want 0-19 of partition 0, 0-29 of partition 1", got)
	}
}

// tracelake's own expiry after a rollback to another engine's snapshot
// (a DELETE's, whose summary records no position): removing the
// rolled-back load left nothing to tell of it, and a start then went on
// from the positions as they were, skipping 20-29 for good. The expiry
// must leave a table rolled back past tracelake's loads as it is, saying
// why, until the rollback is dealt with; the start then reports it.
func TestExpiryKeepsTheLoadsOfARollbackNotDealtWith(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9), batch(0, 10, 19))
	if err := s.DeleteRaw(ctx, 0, 5); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 20, 29))
	if err := s.RollBackRaw(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the snapshots' age, not a wait for anything
	_, err := s.Expire(ctx, 10*time.Millisecond, 1)
	if err == nil || !strings.Contains(err.Error(), "rolled back") {
		t.Errorf("expiry of a table rolled back past a load: %v; want it refused, naming the rollback", err)
	}
	err = openSink(t, dir, false).Prepare(ctx)
	if err == nil || !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "was rolled back") {
		t.Errorf("start after the expiry: %v; want the rollback reported", err)
	}
}
