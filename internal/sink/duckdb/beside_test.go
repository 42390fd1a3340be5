package duckdb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// Two sinks of one database load the same offsets into their own tables,
// each fenced by its own ledger; closing the one opened Beside leaves the
// database open; one with the first's table or stage directory is refused.
func TestSinksBesideEachOtherInOneFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	first := openPrepared(t, testOptions(dir))
	opt := testOptions(dir)
	if _, err := first.Beside(opt); err == nil {
		t.Fatal("a second sink of trace_raw in the same file was opened")
	}
	opt.Table = "other_raw"
	if _, err := first.Beside(opt); err == nil {
		t.Fatal("a second sink sharing the first's stage directory was opened: its Prepare removes the first's staged files")
	}
	opt.StageDir = filepath.Join(dir, "other-stage")
	second, err := first.Beside(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sink{first, second, second} { // the second twice: fenced by its ledger
		f, err := s.Stage(ctx, batch(0, 9))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(ctx, []sink.File{f}); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, first, "SELECT count(*) FROM trace_raw"); n != 10 {
		t.Errorf("trace_raw holds %d rows, want 10", n)
	}
	if n := count(t, first, "SELECT count(*) FROM other_raw"); n != 10 {
		t.Errorf("other_raw holds %d rows, want 10 (each offset once, though loaded twice)", n)
	}
}
