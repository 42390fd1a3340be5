package iceberg_test

import (
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// A load over a killed load's operations whose spans' commit lost every
// race (its dead letters' commit landed) is retried by the pipeline with
// the same staged batch. Between the two attempts, maintenance compacted
// the dead-letter table and expired the snapshots before: the retry must
// still store the range, its dead letter without the killed load's
// operation beside it.
func TestDeadDerivedRetryAfterTheDeadLettersWereCompacted(t *testing.T) {
	dir := t.TempDir()
	killed, s, other, maint := openDerived(t, dir), openDerived(t, dir), openDerived(t, dir), openDerived(t, dir)
	load(t, s, derivedBatch(0, 9, 3)) // a file of dead letters already, to compact with the load's
	killBefore(t, killed, "tracelake.spans", func() {
		f, err := killed.Stage(t.Context(), derivedBatch(10, 19))
		if err != nil {
			t.Error(err)
			return
		}
		_, _ = killed.Load(t.Context(), []sink.File{f})
	})
	racing := true
	raceSpans(t, s, other, func() bool { return racing })
	_, files, err := tryLoad(t, s, derivedBatch(10, 19, 15))
	if err == nil {
		t.Fatal("the load whose spans' commit lost every race succeeded")
	}
	racing = false
	done, err := maint.Compact(t.Context(), 64<<20, everyDay, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(done, func(c iceberg.Compaction) bool {
		return c.Table == "tracelake.spans_dlq" && c.FilesBefore > c.FilesAfter
	}) {
		t.Fatalf("compaction %+v did not rewrite the dead letters' files", done)
	}
	if _, err := maint.Expire(t.Context(), 0, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(t.Context(), files); err != nil {
		t.Fatalf("the retry of the load: %v", err)
	}
	dead := []int64{3, 15}
	spans, dlq := stored(t, s, false)[0], stored(t, s, true)[0]
	ops := operationOffsets(t, operations(t, s))
	if !slices.Equal(spans, seq(0, 19, dead...)) || !slices.Equal(dlq, dead) || !slices.Equal(ops, spans) {
		t.Errorf("spans at %v, operations at %v, dead letters at %v; want spans and operations at %v, dead letters at %v",
			spans, ops, dlq, seq(0, 19, dead...), dead)
	}
}
