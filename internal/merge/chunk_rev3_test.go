package merge

import "testing"

// A chunk holds its watermark at a replayed dead letter still landed, and
// the next chunk reads past the earlier chunks by the offsets they merged.
// The pipeline moves landed changes on its own (distributeIfDue) while a
// merge runs: moved between two chunks, the dead letter is in the changelog
// table below the offsets merged (the next chunk skips it) and no longer
// landed (nothing holds the next chunk's watermark at it), so the next
// chunk's watermark went past it and it was never merged.
func TestChangelogChunkDeadLetterMovedBetweenChunksIsMerged(t *testing.T) {
	l, ctx, model := replayedBelowChunks(t)
	chunks := 0
	failAfterMerge = func() error {
		if chunks++; chunks == 1 {
			l.distribute() // the pipeline's move, while the first chunk merges
		}
		return nil
	}
	_, err := l.merger.Merge(ctx, model)
	failAfterMerge = nil
	if err != nil || chunks != 2 {
		t.Fatalf("merge: %v after %d chunks, want 2", err, chunks)
	}
	l.want(`SELECT count(*) FROM cdc_landing`, "0")
	l.mustMerge()
	l.want(`SELECT id FROM cdc_db_orders ORDER BY id`, "1", "2", "3", "4", "5", "6")
}
