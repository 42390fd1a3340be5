package databend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// With --task Databend merges a model by the task's SQL. The task was
// made once (CREATE TASK IF NOT EXISTS) with the model's merge then, so
// after the model's columns changed and its target was dropped to be
// built again, the task still ran the old merge: an increment of columns
// the new tables lack (every run failed, the target stayed empty), or,
// with a column's type or path changed, the old casts into the new
// target, its watermark past them.
func TestModelTaskMergesTheModelsColumnsAfterTheyChanged(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "c", Target: "c", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"o"},
		Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "v", Path: "$.o", Type: "BIGINT"}}}
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 4))); err != nil {
		t.Fatal(err)
	}
	if _, err := merge.NewDatabendMerger(s, true).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	runTask(t, srv, s, "c_merge")
	if got := len(srv.Rows("c")); got != 5 {
		t.Fatalf("the task merged %d rows, want 5", got)
	}
	m.Columns = config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "w", Path: "$.o", Type: "BIGINT"}, {Name: "big", Path: "$.big", Type: "VARCHAR"}}
	srv.DropTable("c")
	if _, err := merge.NewDatabendMerger(s, true).Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	runTask(t, srv, s, "c_merge")
	if got := len(srv.Rows("c")); got != 5 {
		t.Errorf("target built again by the task holds %d rows, want 5", got)
	}
}

// runTask runs the task's SQL once, as Databend's scheduler would: the
// merge transaction merge.Databend wraps in BEGIN … END, indented.
func runTask(t *testing.T, srv *databendtest.Server, s *databend.Sink, name string) {
	t.Helper()
	q, ok := srv.TaskSQL(name)
	if !ok {
		t.Fatalf("no task %s", name)
	}
	body, ok := strings.CutPrefix(q, "BEGIN\n")
	if body, ok = strings.CutSuffix(body, "\nEND"); !ok {
		t.Fatalf("task %s: not a BEGIN … END block:\n%s", name, q)
	}
	body = strings.TrimPrefix(strings.ReplaceAll(body, "\n  ", "\n"), "  ")
	stmts := strings.Split(strings.TrimSuffix(body, ";"), ";\n")
	if len(stmts) < 3 || stmts[0] != "BEGIN" || stmts[len(stmts)-1] != "COMMIT" {
		t.Fatalf("task %s: not one transaction:\n%s", name, q)
	}
	if err := s.ExecTx(context.Background(), stmts[1:len(stmts)-1]...); err != nil {
		t.Errorf("task %s: %v", name, err)
	}
}
