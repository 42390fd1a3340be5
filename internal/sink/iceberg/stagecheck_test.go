package iceberg_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// week is the orphan grace period of these tests (the default), and
// older what the files it should judge are backdated by.
const (
	week  = 7 * 24 * time.Hour
	older = 8 * 24 * time.Hour
)

// backdate sets the modification time of files on disk age ago.
func backdate(t *testing.T, age time.Duration, paths ...string) {
	t.Helper()
	at := time.Now().Add(-age)
	for _, p := range paths {
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
}

// parquetFiles lists the Parquet files under root on disk.
func parquetFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, _ os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".parquet") {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stageOld stages a batch after a first load of offsets 0..9 and returns
// it with its data files on disk (one raw, one dead-letter).
func stageOld(t *testing.T, s *iceberg.Sink, root string) (sink.File, []string) {
	t.Helper()
	ctx := context.Background()
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	load(t, s, batch(0, 0, 9))
	f, err := s.Stage(ctx, batch(0, 10, 19, 14))
	if err != nil {
		t.Fatal(err)
	}
	files := unreferenced(t, s, root)
	if len(files) != 2 {
		t.Fatalf("%d staged files, want 2 (raw and dead letters): %v", len(files), files)
	}
	return f, files
}

// failsFatally checks that a load of f fails with sink.ErrFatal naming a
// file that is gone, and that nothing of it was committed: the positions
// are where they were, the tables scan, and the batch was forgotten.
func failsFatally(t *testing.T, s *iceberg.Sink, f sink.File, root string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Load(ctx, []sink.File{f})
	if !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "tracelake orphans") || !strings.Contains(err.Error(), "is gone") || !strings.Contains(err.Error(), ".parquet") {
		t.Errorf("load of a batch whose staged file is gone: %v; want sink.ErrFatal naming the file and orphan cleanup", err)
	}
	pos, err := s.AllPositions(ctx)
	if want := map[sink.TopicPartition]int64{{Topic: "traces"}: 10}; err != nil || !maps.Equal(pos, want) {
		t.Errorf("positions %v (%v), want %v: the failed load moved them", pos, err, want)
	}
	if got := stored(t, s, false); !slices.Equal(got[0], seq(0, 9)) {
		t.Errorf("raw offsets %v, want 0..9", got)
	}
	if got := stored(t, s, true); len(got) != 0 {
		t.Errorf("dead-letter offsets %v, want none: the group committed in part", got)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err == nil || !strings.Contains(err.Error(), "not staged in this process") {
		t.Errorf("second load of the batch: %v; want it forgotten", err)
	}
	if left := unreferenced(t, s, root); len(left) != 0 {
		t.Errorf("files of the forgotten batch left behind: %v", left)
	}
}

// A batch whose load was retried for hours (the catalog down) lost its
// staged files to `tracelake orphans`. Its commit added them anyway: the
// load "succeeded", the positions moved past the records, and every scan
// of the table failed on the missing file. Now the load stops the run
// (sink.ErrFatal: the records are read again from Kafka after the
// restart), before the group's first commit, so no table gets a part of it.
func TestStagedFileGoneStopsTheLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, s *iceberg.Sink, files []string)
	}{
		{"removed by orphans", func(t *testing.T, s *iceberg.Sink, files []string) {
			backdate(t, older, files...)
			res, err := s.RemoveOrphans(context.Background(), week, false)
			if err != nil || res[0].Deleted+res[1].Deleted != 2 {
				t.Fatalf("orphan cleanup %+v (%v): want both staged files deleted (no lease was written)", res, err)
			}
		}},
		// The dead-letter table commits first: without the check before the
		// group's first commit, it would take its rows and the main table
		// would not.
		{"the raw file alone", func(t *testing.T, _ *iceberg.Sink, files []string) {
			for _, f := range files {
				if strings.Contains(f, string(filepath.Separator)+"trace_raw"+string(filepath.Separator)) {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openSink(t, dir, false)
			root := filepath.Join(dir, "warehouse")
			f, files := stageOld(t, s, root)
			tc.lose(t, s, files)
			s.AgeStaged(2 * time.Hour)
			failsFatally(t, s, f, root)
		})
	}
}

// The derived table's staged file is checked too: gone, nothing commits.
func TestStagedDerivedFileGoneStopsTheLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openDerived(t, dir)
	load(t, s, sinktest.DerivedBatch(0, 9, 1))
	opsDir := filepath.Join(dir, "warehouse", "tracelake.db", "ops")
	committed := parquetFiles(t, opsDir)
	f, err := s.Stage(ctx, sinktest.DerivedBatch(10, 19, 1))
	if err != nil {
		t.Fatal(err)
	}
	staged := slices.DeleteFunc(parquetFiles(t, opsDir), func(p string) bool { return slices.Contains(committed, p) })
	if len(staged) != 1 {
		t.Fatalf("%d staged files of ops, want 1: %v", len(staged), staged)
	}
	if err := os.Remove(staged[0]); err != nil {
		t.Fatal(err)
	}
	s.AgeStaged(2 * time.Hour)
	before, err := s.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), filepath.Base(staged[0])) {
		t.Fatalf("load without its derived file: %v; want sink.ErrFatal naming %s", err, filepath.Base(staged[0]))
	}
	if after, err := s.AllPositions(ctx); err != nil || !maps.Equal(before, after) {
		t.Errorf("positions %v (%v), were %v", after, err, before)
	}
	if got := operations(t, s); len(got) != 10 {
		t.Errorf("%d operations, want the 10 of the first load", len(got))
	}
}

// A load whose dead letters committed and whose raw commit then lost every
// race is tried again later. Meanwhile maintenance compacted the
// dead-letter table and expired its snapshots, deleting the file the
// load's own commit had added to it, as it may: the file is the table's
// since that commit. The check before the retry's first commit took the
// file for a staged one that orphan cleanup deleted and stopped the run
// (sink.ErrFatal, "nothing of the load was committed") over a load that
// only had its raw rows left to commit. The retry commits them.
func TestRetryAfterMaintenanceReplacedTheFilesItCommitted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, other := openSink(t, dir, false), openSink(t, dir, false)
	for _, x := range []*iceberg.Sink{s, other} {
		if err := x.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	load(t, s, batch(0, 0, 9, 3))
	f, err := s.Stage(ctx, batch(0, 10, 19, 14))
	if err != nil {
		t.Fatal(err)
	}
	// Another writer commits to the raw table before each of the load's
	// raw commits: the dead letters land, the raw rows lose every race.
	next := int64(0)
	s.SetBeforeTableCommit(func(table string) {
		if table == "tracelake.trace_raw" {
			load(t, other, batch(1, next, next+9))
			next += 10
		}
	})
	if _, err := s.Load(ctx, []sink.File{f}); err == nil || !iceberg.LostRace(err) {
		t.Fatalf("load whose raw commit lost every race: %v", err)
	}
	s.SetBeforeTableCommit(nil)
	if got := stored(t, s, true)[0]; !slices.Equal(got, []int64{3, 14}) {
		t.Fatalf("dead-letter offsets %v after the failed load, want 3 and 14 (its dead letters landed)", got)
	}
	// Maintenance rewrites the dead-letter table's two files into one and
	// expires the snapshots that referenced them: the load's file is gone.
	if c, err := other.Compact(ctx, 64<<20, everyDay, false); err != nil || c[1].FilesBefore != 2 {
		t.Fatalf("compaction %+v (%v): want the dead-letter table's 2 files compacted", c, err)
	}
	if _, err := other.Expire(ctx, 0, 1); err != nil {
		t.Fatal(err)
	}
	s.AgeStaged(20 * time.Minute) // the retry comes after checkStagedAfter
	l, err := s.Load(ctx, []sink.File{f})
	if err != nil {
		t.Fatalf("retry of a load whose dead letters committed, their file since compacted away: %v", err)
	}
	if len(l.Ranges) != 1 || l.Ranges[0].Records != 9 || l.Ranges[0].DLQ != 1 {
		t.Errorf("retry loaded %+v, want offsets 10-19: 9 rows and the dead letter its first attempt committed", l.Ranges)
	}
	if got := stored(t, s, false)[0]; !slices.Equal(got, seq(0, 19, 3, 14)) {
		t.Errorf("raw offsets %v, want 0-19 but the dead letters", got)
	}
	if got := stored(t, s, true)[0]; !slices.Equal(got, []int64{3, 14}) {
		t.Errorf("dead-letter offsets %v, want 3 and 14 once", got)
	}
}
