package merge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// Eight changelog tables, each with an increment of 2 MB rows, merge side
// by side (merge.concurrency 8) within a small memory_limit. Each merge cut
// its increment into chunks of an eighth of memory_limit whatever the
// merges beside it: eight such chunks, each held several times over,
// passed the limit, and every round ran out of memory, the models never
// merged.
func TestChangelogChunksOfConcurrentMergesFitTheMemoryLimit(t *testing.T) {
	const limit = 128 << 20
	l := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = limit })
	l.merger.SetConcurrency(8)
	l.at = time.Now().UTC().Add(-time.Hour)
	const tables, rows = 8, 12 // ~24 MB of values a table
	big := strings.Repeat("x", 2<<20)
	for i := range rows {
		for n := range tables {
			l.change(int32(n), fmt.Sprintf("docs%d", n), "c", 100+i, map[string]any{"id": i, "body": big}, "id")
		}
		l.flush()
	}
	models, err := l.merger.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != tables {
		t.Fatalf("pending models: got %d, want %d", len(models), tables)
	}
	errs := make([]error, len(models))
	var wg sync.WaitGroup
	for i, m := range models {
		wg.Go(func() { _, errs[i] = l.merger.Merge(context.Background(), m) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("merge %s: %v", models[i].Name, err)
		}
	}
	for n := range tables {
		l.want(fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE strlen(body) = 2 * 1024 * 1024) FROM cdc_db_docs%d`, n),
			fmt.Sprintf("%d|%d", rows, rows))
	}
}

// The merges' chunks together take a quarter of memory_limit, whatever
// merge.concurrency: at its default (2) and below, each takes an eighth,
// as before it counted.
func TestChunkBytesShareTheMemoryLimit(t *testing.T) {
	f := func(limit int64, concurrency int, want int64) {
		t.Helper()
		if got := chunkBytes(limit, concurrency); got != want {
			t.Errorf("chunkBytes(%d MiB, %d): got %d, want %d", limit>>20, concurrency, got, want)
		}
	}
	f(256<<20, 2, 32<<20)
	f(256<<20, 1, 32<<20)
	f(0, 2, 32<<20) // DuckDB's default, taken as 256 MiB
	f(256<<20, 8, 8<<20)
	f(1<<30, 16, 16<<20)
	f(128<<20, 64, 1<<20) // 512 KiB: the floor
}
