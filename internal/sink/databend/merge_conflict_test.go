package databend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// Two models merged at the same time (tracelake merge --every for one,
// run's merge.every in another process for the other) each write their
// own rows of the shared watermark table in their own transaction. In
// databend-query a commit applies its changes on top of what committed
// meanwhile, or fails with UnresolvableConflict 4001 when a segment it
// rewrote is gone (storages/fuse/src/retry/commit.rs,
// commit_with_backoff, try_rebuild_req), and the merge runs again: either
// way the other model's watermark stays and no row is merged twice. Found
// by a review: the test server's COMMIT replaced the table with the
// transaction's view, dropping the other's watermark.
func TestConcurrentMergesOfTwoModelsKeepBothWatermarks(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	model := func(name, typ string) config.Model {
		return config.Model{Name: name, Target: name, Source: "trace_raw", Format: config.FormatJSON, Key: []string{"o"},
			Columns: config.Columns{{Name: "o", Path: "$.o", Type: "BIGINT"}, {Name: "v", Path: "$.o", Type: typ}}}
	}
	a, b := model("a", "BIGINT"), model("b", "DATE") // every row of b is rejected: an integer is no DATE
	mg := merge.NewDatabendMerger(s, false)
	for _, m := range []config.Model{a, b} { // the tables and claim rows
		if _, err := mg.Merge(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Load(ctx, stage(t, s, batch(0, 0, 4))); err != nil {
		t.Fatal(err)
	}
	// b merges, whole, while a's transaction is open (after a's claim).
	var once sync.Once
	var bErr error
	srv.Set(func() {
		srv.After = func(sql string) {
			if strings.HasPrefix(sql, "UPDATE tracelake_merge_watermarks SET merged_at = NOW() WHERE model = 'a'") {
				once.Do(func() { _, bErr = merge.NewDatabendMerger(s, false).Merge(ctx, b) })
			}
		}
	})
	if _, err := mg.Merge(ctx, a); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() { srv.After = nil })
	if bErr != nil {
		t.Fatal(bErr)
	}
	if n := len(srv.Rows("b_rejects")); n != 5 {
		t.Fatalf("b's merge rejected %d rows, want 5", n)
	}
	// Nothing new: b's next merge must find nothing past its watermark.
	if _, err := mg.Merge(ctx, b); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Rows("b_rejects")); n != 5 {
		t.Errorf("b_rejects has %d rows after a merge with nothing new, want 5: model a's commit dropped b's watermark (watermarks now %v)", n, rowsText(srv.Rows("tracelake_merge_watermarks")))
	}
}

func rowsText(rows []databendtest.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s/%s/%s next %s", r["model"], r["topic"], r["partition"], r["next_offset"]))
	}
	return out
}

// databend-query's lexer reads a backslash in a string literal as an
// escape (ast/src/ast/quote.rs QuotedString::from_str: '\b' is a
// backspace, '\\' one backslash), where DuckDB keeps it. A model's
// action values and path keys are written into the merge SQL as
// literals, so a delete value with a backslash must be escaped for
// Databend, or no event matches it and deletes upsert instead.
func TestMergeOnDatabendMatchesActionValuesWithBackslashes(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() { srv.SQL = true })
	ctx := context.Background()
	m := config.Model{Name: "m", Target: "m", Source: "trace_raw", Format: config.FormatJSON, Key: []string{"id"},
		Action:  config.Action{Path: "$.op", Delete: []string{`del\b`}, Insert: []string{"insert"}},
		Columns: config.Columns{{Name: "id", Path: "$.id", Type: "BIGINT"}, {Name: "v", Path: `$."a\b"`, Type: "VARCHAR"}}}
	mg := merge.NewDatabendMerger(s, false)
	for i, doc := range []string{`{"id": 1, "op": "c", "a\\b": "x"}`, `{"id": 2, "op": "c", "a\\b": "y"}`, `{"id": 1, "op": "del\\b"}`} {
		srv.AppendRow("trace_raw", databendtest.Row{"uuid": json.RawMessage(fmt.Sprintf(`"u%d"`, i)), "koffset": json.RawMessage(fmt.Sprint(i)),
			"kpartition": json.RawMessage("0"), "raw_data": json.RawMessage(doc), "record_metadata": json.RawMessage(`{"topic": "t"}`)})
	}
	if _, err := mg.Merge(ctx, m); err != nil { // the tables
		t.Fatal(err)
	}
	if _, err := mg.Merge(ctx, m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range srv.Rows("m") {
		got = append(got, string(r["id"])+"="+string(r["v"]))
	}
	if want := []string{`2="y"`}; !slices.Equal(got, want) {
		t.Errorf("target rows %q, want %q (rejects %v)", got, want, srv.Rows("m_rejects"))
	}
}
