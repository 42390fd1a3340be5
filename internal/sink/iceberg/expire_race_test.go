package iceberg_test

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
)

// Another engine (Spark, Trino) tags a snapshot the expiry is removing,
// or branches from it, after the expiry read the table and before its
// commit. Iceberg's requirements cannot assert that no ref was added,
// and the catalog applies the removal to its current metadata, which
// drops the new ref with the snapshot. The expiry must not then delete
// the snapshot's files, and must not report success.
func TestExpireKeepsTheFilesOfARefAddedDuringItsCommit(t *testing.T) {
	for _, ref := range []table.RefType{table.TagRef, table.BranchRef} {
		for _, cat := range []string{"sql", "rest"} {
			t.Run(string(ref)+"/"+cat, func(t *testing.T) {
				ctx := context.Background()
				s := openSink(t, t.TempDir(), false)
				if cat == "rest" {
					rest := icebergtest.StartREST(t, s.Catalog(), "token")
					s = openREST(t, rest.URL, "tracelake", "token")
				}
				before, tagged := compactedTwoLoads(t, s)
				raw, _ := s.Identifiers()
				s.SetBeforeMaintenanceCommit(func() {
					s.SetBeforeMaintenanceCommit(nil) // the other engine adds its ref once
					if _, _, err := s.Catalog().CommitTable(ctx, raw, nil, []table.Update{
						table.NewSetSnapshotRefUpdate("audit", tagged, ref, 0, 0, 0),
					}); err != nil {
						t.Errorf("the other engine's ref: %v", err)
					}
				})
				_, err := s.Expire(ctx, 0, 1)
				if err == nil || !strings.Contains(err.Error(), `"audit"`) {
					t.Errorf("expiry that dropped another engine's ref returned %v, want an error naming the ref", err)
				}
				rows, err := before.Scan(table.WithSnapshotID(tagged)).ToArrowTable(ctx)
				if err != nil {
					t.Fatalf("reading the referenced snapshot after the expiry: %v; want its files kept", err)
				}
				defer rows.Release()
				if rows.NumRows() != 20 {
					t.Errorf("the referenced snapshot reads %d rows, want 20", rows.NumRows())
				}
			})
		}
	}
}

// Without a ref added meanwhile, the expiry deletes the files only the
// snapshots it removed referenced, as iceberg-go did after its commit.
func TestExpireDeletesTheFilesOfTheSnapshotsItRemoved(t *testing.T) {
	ctx := context.Background()
	s := openSink(t, t.TempDir(), false)
	before, expired := compactedTwoLoads(t, s)
	if _, err := s.Expire(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	rows, err := before.Scan(table.WithSnapshotID(expired)).ToArrowTable(ctx)
	if err == nil {
		rows.Release()
		t.Fatal("the expired snapshot still reads: want its files deleted")
	}
	if !errors.Is(err, fs.ErrNotExist) && !strings.Contains(err.Error(), "no such file") {
		t.Errorf("reading the expired snapshot: %v, want its files missing", err)
	}
}

// compactedTwoLoads prepares s, loads offsets 0-19 of partition 0 in two
// loads and compacts their files into one, and returns the table as it
// was before the compaction and the snapshot then current (its files
// only the snapshots before the compaction's reference).
func compactedTwoLoads(t *testing.T, s *iceberg.Sink) (*table.Table, int64) {
	t.Helper()
	ctx := context.Background()
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9))
	load(t, s, batch(0, 10, 19))
	raw, _ := s.Identifiers()
	before, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx, 64<<20, everyDay, false); err != nil {
		t.Fatal(err)
	}
	return before, before.CurrentSnapshot().SnapshotID
}
