package iceberg_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// Broke: on a merge-on-read table (write.delete.mode, set through
// table_properties or by another engine), a DELETE writes position delete
// files, and scan planning attaches each to every data file of its
// partition. A compaction of the partition's small files dropped every
// position delete file attached to them (iceberg-go's SafePosDeletes),
// also one that deletes rows of a file the compaction leaves (a file at
// the target size, which the planner does not rewrite): those rows came
// back. A delete file is dropped only when every file it applies to is
// rewritten.
func TestCompactionKeepsTheDeletesOfFilesItLeaves(t *testing.T) {
	ctx := context.Background()
	s, target := bigAndSmallFiles(t)
	if err := s.DeleteRaw(ctx, 0, 5); err != nil { // a row of the big file
		t.Fatal(err)
	}
	if err := s.DeleteRaw(ctx, 0, 2012); err != nil { // a row of a small one
		t.Fatal(err)
	}
	want := seq(0, 2019, 5, 2012)
	if got := stored(t, s, false)[0]; !slices.Equal(got, want) {
		t.Fatalf("before compaction: %d rows, want %d", len(got), len(want))
	}
	before, err := s.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The target is the big file's size: it is not small, the two others
	// are, and only they are rewritten.
	done, err := s.Compact(ctx, target, everyDay, false)
	if err != nil {
		t.Fatal(err)
	}
	if done[0].FilesBefore != 2 || done[0].FilesAfter != 1 {
		t.Fatalf("compaction %+v: want the two small files rewritten into one", done[0])
	}
	got := stored(t, s, false)[0]
	if !slices.Equal(got, want) {
		var back []int64
		for _, o := range got {
			if !slices.Contains(want, o) {
				back = append(back, o)
			}
		}
		t.Errorf("after compaction: %d rows, want %d; deleted rows back: %v", len(got), len(want), back)
	}
	after, err := s.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(before, after) {
		t.Errorf("positions %v after compaction, were %v", after, before)
	}
}

// parquetSizes are the sizes of the Parquet files under dir, by path.
func parquetSizes(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".parquet") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[path] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Broke: a compaction checked before its commit only that each file of
// the group had as many delete files as when it was read. On a v3 table
// a DELETE replaces a file's deletes by one deletion vector holding them
// all: a file with one position delete file (written before the upgrade)
// that a concurrent DELETE gave a deletion vector still had one delete
// file, the group was committed, and the row that DELETE removed came
// back in the compacted file.
func TestCompactionLeavesAGroupWhoseDeletesWereReplaced(t *testing.T) {
	ctx := context.Background()
	s, target := bigAndSmallFiles(t)
	// A position delete file (v2), applying to every file of the day.
	if err := s.DeleteRaw(ctx, 0, 5); err != nil {
		t.Fatal(err)
	}
	upgradeToV3(t, s)
	// Between the compaction's read and its commit, another engine
	// deletes a row of a small file: a deletion vector now replaces the
	// position delete file on it.
	deleted := false
	s.SetBeforeMaintenanceCommit(func() {
		if !deleted {
			deleted = true
			if err := s.DeleteRaw(ctx, 0, 2015); err != nil {
				t.Error(err)
			}
		}
	})
	done, err := s.Compact(ctx, target, everyDay, false)
	s.SetBeforeMaintenanceCommit(nil)
	if err != nil {
		t.Fatalf("compaction failed instead of leaving the changed group: %v", err)
	}
	if !deleted {
		t.Fatal("the compaction committed nothing: the test deleted no row")
	}
	if got, want := stored(t, s, false)[0], seq(0, 2019, 5, 2015); !slices.Equal(got, want) {
		var back []int64
		for _, o := range got {
			if !slices.Contains(want, o) {
				back = append(back, o)
			}
		}
		t.Errorf("after compaction: %d rows, want %d; deleted rows back: %v", len(got), len(want), back)
	}
	if done[0].FilesAfter != 0 {
		t.Errorf("compaction %+v: want the raw group left", done[0])
	}
}

// bigAndSmallFiles is a merge-on-read table (write.delete.mode: a DELETE
// writes delete files) with one file of 2,000 rows, which compaction
// leaves, and two of 10 (offsets 2000-2019), which it rewrites; and its
// big file's size: a compaction to it rewrites only the small ones.
func bigAndSmallFiles(t *testing.T) (*iceberg.Sink, int64) {
	t.Helper()
	dir := t.TempDir()
	s := openPrepared(t, dir, iceberg.Options{Table: "trace_raw",
		TableProperties: map[string]string{"write.delete.mode": "merge-on-read"}})
	load(t, s, batch(0, 0, 1999))
	big := parquetSizes(t, dir)
	if len(big) != 1 {
		t.Fatalf("%d data files after one load, want 1", len(big))
	}
	var size int64
	for _, n := range big {
		size = n
	}
	load(t, s, batch(0, 2000, 2009))
	load(t, s, batch(0, 2010, 2019))
	return s, size
}

// upgradeToV3 upgrades s's raw table to format version 3, as another
// engine would: a DELETE then writes deletion vectors.
func upgradeToV3(t *testing.T, s *iceberg.Sink) {
	t.Helper()
	ctx := context.Background()
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.UpgradeFormatVersion(3); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}
