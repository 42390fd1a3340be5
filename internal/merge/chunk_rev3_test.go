package merge

import (
	"context"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A chunk holds its watermark at a replayed dead letter still landed, and
// the next chunk reads past the earlier chunks by the offsets they merged.
// The pipeline moves landed changes on its own (distributeIfDue) while a
// merge runs: moved between two chunks, the dead letter is in the changelog
// table below the offsets merged (the next chunk skips it) and no longer
// landed (nothing holds the next chunk's watermark at it), so the next
// chunk's watermark went past it and it was never merged.
func TestChangelogChunkDeadLetterMovedBetweenChunksIsMerged(t *testing.T) {
	l := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20 }) // chunks of 32 MiB
	big := strings.Repeat("x", 12<<20)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 101, map[string]any{"id": 2, "v": "b", "KOFFSET": 1}, "id") // dead-lettered
	l.flushDeadLettering()
	for id := 3; id <= 6; id++ { // offsets 2-4 a chunk, 5 the next
		l.change(0, "orders", "c", 99+id, row(id, big), "id")
		l.flush()
	}
	l.mustMerge()
	l.want(`SELECT id FROM cdc_db_orders ORDER BY id`, "1", "3", "4", "5", "6")

	ctx := context.Background()
	if _, err := l.s.DB().Exec(`UPDATE cdc_dlq SET "value" = encode(replace(decode("value"), '"KOFFSET":1,', ''))`); err != nil {
		t.Fatal(err)
	}
	if res, err := l.s.Replay(ctx, duckdb.ReplayOptions{Decode: l.dec.AppendRows, Replayed: l.merger.LowerWatermarks}); err != nil || res.Loaded != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	models, err := l.merger.Models(ctx)
	if err != nil || len(models) != 1 {
		t.Fatalf("models: %v %v", models, err)
	}
	chunks := 0
	failAfterMerge = func() error {
		if chunks++; chunks == 1 {
			l.distribute() // the pipeline's move, while the first chunk merges
		}
		return nil
	}
	_, err = l.merger.Merge(ctx, models[0])
	failAfterMerge = nil
	if err != nil || chunks != 2 {
		t.Fatalf("merge: %v after %d chunks, want 2", err, chunks)
	}
	l.want(`SELECT count(*) FROM cdc_landing`, "0")
	l.mustMerge()
	l.want(`SELECT id FROM cdc_db_orders ORDER BY id`, "1", "2", "3", "4", "5", "6")
}
