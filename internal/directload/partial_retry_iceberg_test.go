package directload

import "testing"

// On Iceberg a load commits the dead-letter table first and the main
// table last. When the main table's commit fails once after the
// dead-letter table's landed, the load is tried again with the same staged
// rows (LoadAttempts): the retry finds the dead letters in (its own first
// attempt put them there) and commits the main table. The request is then
// stored, and must be answered so: told to retry, its client sends it
// again and the dead-letter table holds it twice (the positions resume
// past the completed load, so nothing removes the first copy).
func TestIcebergLoadCompletedByItsRetryIsAnsweredStored(t *testing.T) {
	s, lock := openLockedSpans(t, t.TempDir(), "_dlq", true, false)
	l := startGenAILoader(t, s)
	garbage := []byte{0xff, 0xff, 0xff, 0xff} // the decoder refuses it: a dead letter
	if err := forward(l, garbage); err != nil {
		t.Logf("answered %v; the client retries", err)
		if err := forward(l, garbage); err != nil {
			t.Fatal(err)
		}
	}
	if !lock.injected() {
		t.Fatal("the dead-letter table's commit was never seen: the fault was not injected")
	}
	_, dlq, tp := storedOf(t, s)
	if dlq[tp] == nil || dlq[tp].Count() != 1 {
		t.Errorf("dead letters of the one refused request: %v, want 1", dlq[tp])
	}
}
