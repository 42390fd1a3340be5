package iceberg_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// Broke: iceberg-go's scan planning splits a Parquet file larger than the
// table's read.split.target-size (128 MiB by default) into one task per
// range of row groups, and compaction took each task for a file of its
// own: a partition with such a file among its small ones (any file under
// 3/4 of a compaction target above 170 MiB, or one with five delete
// files) listed it once per range among the files its rewrite removes,
// which iceberg-go refuses ("delete data file paths must be unique"):
// the compaction failed every time, and a scheduled round, failing at
// it, never went on to expire snapshots. A range left out of the group
// (the planner drops a bin of one task) would have been removed with
// its file and its rows not rewritten.
func TestCompactionOfFilesSplitForReading(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "trace_raw", TableProperties: map[string]string{
		"read.split.target-size": "4096", // a file of a few row groups over 4 KiB is read in ranges
	}})
	load(t, s, batch(0, 0, 2999))
	load(t, s, batch(0, 3000, 5999))
	// Compacted to 128 KiB: one file of row groups of 8 KiB.
	if _, err := s.Compact(ctx, 128<<10, everyDay, false); err != nil {
		t.Fatal(err)
	}
	files, err := s.DataFiles(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 || len(files[0].SplitOffsets()) < 2 || files[0].FileSizeBytes() <= 4096 {
		t.Fatalf("want a compacted file of several row groups over 4 KiB, have %d files", len(files))
	}
	load(t, s, batch(0, 6000, 6999))
	before := distinctFiles(t, s)
	// A larger target: the compacted file is small again.
	done, err := s.Compact(ctx, 64<<20, everyDay, false)
	if err != nil {
		t.Fatal(err)
	}
	if done[0].FilesBefore != before || done[0].FilesAfter != 1 || distinctFiles(t, s) != 1 {
		t.Errorf("compaction %+v: want the %d files of the day rewritten as 1", done[0], before)
	}
	if got, want := stored(t, s, false), map[int32][]int64{0: seq(0, 6999)}; !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("after compaction: offsets %v", got)
	}
}

// distinctFiles counts the raw table's data files.
func distinctFiles(t *testing.T, s *iceberg.Sink) int {
	t.Helper()
	files, err := s.DataFiles(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	for _, f := range files {
		paths[f.FilePath()] = true
	}
	return len(paths)
}
