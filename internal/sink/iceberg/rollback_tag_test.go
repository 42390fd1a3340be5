package iceberg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// An engine's tag on a snapshot tracelake loaded (an audit tag, a
// month-end tag) keeps that snapshot through expiry while the branch's
// snapshots between it and those kept are removed: the tagged load is no
// longer reached walking back from the current snapshot, but it was
// never rolled back. A restart must start, not stop ingest as if loads
// had been committed on top of a rollback.
func TestATaggedLoadAfterExpiryIsNoRollback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9))
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Catalog().CommitTable(ctx, raw, nil, []table.Update{
		table.NewSetSnapshotRefUpdate("audit-2026-12", tbl.CurrentSnapshot().SnapshotID, table.TagRef, 0, 0, 0),
	}); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 10, 19))
	load(t, s, batch(0, 20, 29))
	time.Sleep(20 * time.Millisecond)
	if _, err := s.Expire(ctx, 10*time.Millisecond, 1); err != nil {
		t.Fatal(err)
	}
	if err := openSink(t, dir, false).Prepare(ctx); err != nil {
		t.Errorf("start after an expiry with a tagged load kept: %v; want it to start (nothing was rolled back)", err)
	}
	load(t, s, batch(0, 30, 39))
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 39)) {
		t.Errorf("raw offsets %v, want 0-39", got)
	}
}
