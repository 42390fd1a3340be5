package merge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A merge in chunks commits a watermark per chunk. A replayed dead letter
// still in the landing table (`dlq replay`, another process, committed
// after the round moved the landed rows) sits below the increment's
// changes; one transaction never left the watermark past it (advance's
// landed), but a chunk's did, and when the merge stopped before its last
// chunk (a crash, an error) the dead letter moved into the changelog
// table below the watermark and was never merged.
func TestChangelogChunkWatermarkStaysBelowALandedDeadLetter(t *testing.T) {
	l, ctx, model := replayedBelowChunks(t)
	// The merge stops after its first chunk (offsets 2-4) committed.
	chunks := 0
	failAfterMerge = func() error {
		if chunks++; chunks == 2 {
			return errors.New("injected: crash in the second chunk")
		}
		return nil
	}
	_, err := l.merger.Merge(ctx, model)
	failAfterMerge = nil
	if err == nil || chunks != 2 {
		t.Fatalf("merge: %v after %d chunks, want the injected failure in the second", err, chunks)
	}
	l.want(`SELECT next_offset <= 1 FROM tracelake_merge_watermarks WHERE model = 'cdc_db_orders' AND "partition" = 0`, "true")
	l.mustMerge() // moves the replayed change, then merges
	l.want(`SELECT id FROM cdc_db_orders ORDER BY id`, "1", "2", "3", "4", "5", "6")
}

// A merge in chunks merges the increment it began with: each chunk read
// the changelog table afresh, and changes landing while it merged (the
// pipeline loads on) made every chunk a partial one again, so that a
// table loaded faster than its chunks merged was never done, the merge
// round never ended and no later model, nor done mark, moved. Those
// changes are the next merge's.
func TestChangelogChunkedMergeEndsWithTheIncrementItBegan(t *testing.T) {
	l := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20 }) // chunks of 32 MiB
	big := strings.Repeat("x", 12<<20)
	id := 0
	load := func(n int) {
		for range n {
			id++
			l.change(0, "orders", "c", 100+id, row(id, big), "id")
			l.flush()
		}
	}
	load(4) // a chunk of three, then one
	chunks := 0
	failAfterMerge = func() error {
		if chunks++; chunks <= 4 {
			load(3) // the pipeline loads on while the merge runs
		}
		return nil
	}
	l.mustMerge()
	failAfterMerge = nil
	if chunks != 2 {
		t.Errorf("the merge took %d chunks, want 2 (those of its increment)", chunks)
	}
	l.mustMerge()
	l.want(`SELECT count(*), count(DISTINCT id) FROM cdc_db_orders`, fmt.Sprint(id, "|", id))
}

// replayedBelowChunks is a changelog table merged in chunks (12 MB rows at
// offsets 2-5 of partition 0, a 256 MiB memory_limit) whose offset 1, a
// dead letter, was replayed and waits in the landing table below the
// merged changes; with its context and its one model.
func replayedBelowChunks(t *testing.T) (*changeLoader, context.Context, config.Model) {
	t.Helper()
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
	l.want(`SELECT count(*) FROM cdc_landing`, "1") // the replayed change waits for a move
	models, err := l.merger.Models(ctx)
	if err != nil || len(models) != 1 {
		t.Fatalf("models: %v %v", models, err)
	}
	return l, ctx, models[0]
}
