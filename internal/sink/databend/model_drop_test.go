package databend_test

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
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
