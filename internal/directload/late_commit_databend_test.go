package directload

import (
	"encoding/json"
	"sync/atomic"
	"testing"
)

// A load whose COMMIT reply is lost and whose commit lands late — after
// the loader read the ledger again to resume (databendtest.LateCommit: a
// commit still in flight in the meta service when its reply was lost) —
// must not have its positions given to other requests: README
// "otlp.mode: load" promises the positions of a load whose outcome is
// unknown are never reused. Reused, the late commit and the next load both
// land at them: two ledger ranges over the same positions (verify fails
// on them) and each position holding the rows of two requests. Here the
// late commit lands at the COMMIT of the load's second attempt, which
// fails (Databend refuses the second commit of a file,
// DuplicatedUpsertFiles), and the third attempt finds its positions in the
// ledger as its own load's: the request is answered stored, its spans
// stored once.
func TestDatabendLateCommitPositionsAreNotReused(t *testing.T) {
	srv, s := databendSpans(t, true)
	var commits atomic.Int32
	srv.Set(func() {
		srv.LateCommit = func() bool { return commits.Add(1) == 1 } // the first load's
	})
	l := startGenAILoader(t, s)
	bodies, spans := requestBodies(t, 2)
	for _, b := range bodies {
		if err := forward(l, b); err != nil {
			t.Errorf("answered %v", err)
			if err := forward(l, b); err != nil { // its client's retry
				t.Fatal(err)
			}
		}
	}
	ids := map[string]int{}
	for _, r := range srv.Rows("otel_spans") {
		ids[string(r["span_id"])]++
	}
	if len(ids) != spans {
		t.Errorf("%d distinct spans stored, want %d", len(ids), spans)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("span %s stored %d times", id, n)
		}
	}
	seen := map[int64]int{}
	for _, r := range srv.Rows("otel_spans_ledger") {
		var first, last int64
		if err := json.Unmarshal(r["first_offset"], &first); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r["last_offset"], &last); err != nil {
			t.Fatal(err)
		}
		for p := first; p <= last; p++ {
			seen[p]++
		}
	}
	for p, n := range seen {
		if n > 1 {
			t.Errorf("position %d is in %d ledger ranges: a late commit's positions were given to other requests", p, n)
		}
	}
	if len(seen) == 0 {
		t.Fatal("the ledger is empty")
	}
}
