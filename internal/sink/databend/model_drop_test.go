package databend_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// README: a merge.models target dropped is built again by the next merge
// from the first raw row. On Databend the merger's setup (the next
// `tracelake merge`, or run's merges after a restart) created the target
// again (CREATE TABLE IF NOT EXISTS) and kept the model's watermarks,
// which describe the target dropped: the merge read only the rows loaded
// since, and every row merged before the drop was gone from the target
// for good.
func TestModelTargetDroppedOnDatabendIsBuiltAgainFromEveryRow(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "a", Target: "a", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"o"},
		Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "v", Path: "$.o", Type: "BIGINT"}}}
	mg := merge.NewDatabendMerger(s, false)
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 4))); err != nil {
		t.Fatal(err)
	}
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	merged := len(srv.Rows("a"))
	if merged == 0 {
		t.Fatal("the first merge merged nothing")
	}
	srv.DropTable("a")
	if _, err := s.Load(ctx, stage(t, s, batch(0, 5, 9))); err != nil {
		t.Fatal(err)
	}
	mg = merge.NewDatabendMerger(s, false) // the next tracelake merge
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, want := len(srv.Rows("a")), 2*merged; got != want {
		t.Errorf("target built again holds %d rows, want %d (watermarks %v)", got, want, rowsText(srv.Rows("tracelake_merge_watermarks")))
	}
}

// The rejects and tombstones of a target dropped describe it as its
// watermarks do, and are forgotten with them, while the model's claim
// row (partition -1) stays; a merger that finds the target there (the
// next `tracelake merge`, nothing dropped) forgets nothing. The rows of
// the rejects and tombstones are put there by hand, as the merges of the
// target dropped would have left them.
func TestModelTargetDroppedOnDatabendForgetsItsRejectsAndTombstones(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "b", Target: "b", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"o"}, Version: "v",
		Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "v", Path: "$.o", Type: "BIGINT"}}}.WithDefaults("trace_raw")
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 4))); err != nil {
		t.Fatal(err)
	}
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	stale := func() {
		srv.AppendRow("b_rejects", databendtest.Row{"topic": json.RawMessage(`"traces"`), "partition": json.RawMessage(`0`),
			"offset": json.RawMessage(`2`), "reason": json.RawMessage(`"stale"`), "rejected_at": json.RawMessage(`null`)})
		srv.AppendRow("b_tombstones", databendtest.Row{"o": json.RawMessage(`99`), "v": json.RawMessage(`99`)})
	}
	stale()
	srv.DropTable("b")
	if _, err := s.Load(ctx, stage(t, s, batch(0, 5, 9))); err != nil {
		t.Fatal(err)
	}
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	claims := func() (n int) {
		for _, r := range srv.Rows("tracelake_merge_watermarks") {
			if string(r["model"]) == `"b"` && string(r["partition"]) == "-1" {
				n++
			}
		}
		return n
	}
	if got := len(srv.Rows("b")); got != 10 {
		t.Errorf("target built again holds %d rows, want 10", got)
	}
	if r, tb, c := len(srv.Rows("b_rejects")), len(srv.Rows("b_tombstones")), claims(); r != 0 || tb != 0 || c != 1 {
		t.Errorf("after the target was made anew: %d rejects, %d tombstones, %d claim rows; want 0, 0, 1 (watermarks %v)",
			r, tb, c, rowsText(srv.Rows("tracelake_merge_watermarks")))
	}

	// The target there: the next process keeps everything.
	stale()
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	if r, tb := len(srv.Rows("b_rejects")), len(srv.Rows("b_tombstones")); r != 1 || tb != 1 {
		t.Errorf("a merger finding the target there forgot its rejects or tombstones: %d and %d rows, want 1 and 1", r, tb)
	}
	if got := len(srv.Rows("b")); got != 10 {
		t.Errorf("target holds %d rows after a merge with nothing new, want 10", got)
	}
}
