package databend_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A load that fails stages files its retry stages again, under names of
// its own plan: the pieces of a file with rejected rows and the file of
// its rejects. They were never removed: a load given up (the shutdown
// discards its files; the records are read again) left them in the stage
// for good, and so did every failed attempt whose retry staged other
// pieces. The claim markers stay: another process's load may name the
// same marker (claim.go), and the next load of the partition stages and
// purges it.
func TestFailedLoadLeavesOnlyItsMarkersStaged(t *testing.T) {
	srv, s := prepared(t, "")
	srv.Set(func() {
		srv.Reject = func(table string, r databendtest.Row) string {
			var o int64
			_ = json.Unmarshal(r["koffset"], &o)
			if table == "trace_raw" && o == 5 {
				return "invalid JSON at offset 5"
			}
			return ""
		}
		srv.CommitError = func() int { return databendtest.CodeOCCRetryFailure }
	})
	files := stage(t, s, batch(0, 0, 9))
	if _, err := s.Load(context.Background(), files); err == nil {
		t.Fatal("the load committed; want its COMMIT refused")
	}
	s.Discard(files)
	for _, f := range srv.StageFiles() {
		if !strings.Contains(f, "/claim-") {
			t.Errorf("a file of the failed load left in the stage: %s", f)
		}
	}
}
