package merge

import (
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A changelog table's increment of 12 MB rows larger than DuckDB's
// memory_limit (the default 256 MiB here; 15 rows of a documents table,
// one a load as the pipeline cuts them, between two merges) merges into
// its model. The merge copies the whole increment (tl_cinc) and sorts it
// whole to pick each key's latest change, big values and all: it ran out
// of memory at every round, and the model, and its done marks, never
// moved again.
func TestChangelogIncrementLargerThanTheMemoryLimitMerges(t *testing.T) {
	l := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20 })
	l.at = time.Now().UTC().Add(-time.Hour)
	big := strings.Repeat("x", 12<<20)
	const rows = 15 // ~180 MB of values
	for i := range rows {
		l.change(0, "docs", "c", 100+i, map[string]any{"id": i, "body": big}, "id")
		l.flush()
	}
	l.mustMerge()
	l.want(`SELECT count(*), count(*) FILTER (WHERE strlen(body) = 12 * 1024 * 1024) FROM cdc_db_docs`, "15|15")
}

// A 12 MB change moves from the landing table into its changelog table
// and merges at the smallest memory_limit tracelake sets (128 MiB, with
// max_inflight_bytes at 128 MiB): the move, which parses the landed row
// once per JSON function (json_transform, json_keys, json_merge_patch),
// asks DuckDB for 64 MiB more with 110 MiB in use, at every retry, and
// the table's changes never reach it (nor its done marks move).
func TestTwelveMegabyteChangeMovesAtTheSmallestMemoryLimit(t *testing.T) {
	l := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 128 << 20 })
	l.at = time.Now().UTC().Add(-time.Hour)
	l.change(0, "docs", "c", 100, map[string]any{"id": 1, "body": strings.Repeat("x", 12<<20)}, "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, strlen(body) FROM cdc_db_docs`, "1|12582912")
}
