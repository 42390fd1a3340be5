package databend_test

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
)

// README: after changing a model's columns on Databend, drop its target
// and merge: the merge builds it again from the first raw row. The
// model's scratch table (<name>_increment, holding one merge's increment)
// was made once with the model's columns then (CREATE TABLE IF NOT
// EXISTS) and kept: a column renamed, added or retyped since made every
// merge's INSERT into it fail (or cast the new values to the old types),
// and the target built again stayed empty.
func TestModelColumnsChangedOnDatabendAreBuiltAgainAfterTheDrop(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "c", Target: "c", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"o"},
		Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "v", Path: "$.o", Type: "BIGINT"}}}
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 4))); err != nil {
		t.Fatal(err)
	}
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	// The model changed: v renamed w, a column added. The target is
	// dropped to be built again, as the README says.
	m.Columns = config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "w", Path: "$.o", Type: "BIGINT"}, {Name: "big", Path: "$.big", Type: "VARCHAR"}}
	srv.DropTable("c")
	if _, err := merge.NewDatabendMerger(s, false).Merge(ctx, m); err != nil {
		t.Fatalf("the merge after the model changed and its target was dropped: %v", err)
	}
	if got := len(srv.Rows("c")); got != 5 {
		t.Errorf("target built again holds %d rows, want 5", got)
	}
}
