package merge

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// Changes landed between two moves whose values pass DuckDB's
// memory_limit (24 loads of a 12 MB row and 20 small tables' rows within
// cdc.distribute_every, at the default 256 MiB) move into their
// changelog tables and merge. A move copied every landed row into one
// temporary table in one transaction: it ran out of memory at every try,
// and no table's changes, the small ones' neither, moved again (the
// landing table only grew).
func TestLandedChangesLargerThanTheMemoryLimitMove(t *testing.T) {
	l := newChangeLoader(t, func(o *duckdb.Options) { o.MemoryLimit = 256 << 20; o.DistributeEvery = time.Hour })
	l.at = time.Now().UTC().Add(-time.Hour)
	big := strings.Repeat("x", 12<<20)
	const loads, small = 24, 20
	for i := range loads {
		l.change(0, fmt.Sprintf("docs%d", i%3), "c", 100+i, map[string]any{"id": i, "body": big}, "id")
		for j := range small {
			l.change(0, fmt.Sprintf("small%d", j), "c", 100+i, map[string]any{"id": i, "v": "s"}, "id")
		}
		if _, err := l.s.Load(context.Background(), l.stage()); err != nil {
			t.Fatalf("load %d: %.200v", i, err)
		}
	}
	l.mustMerge() // moves first
	l.want(`SELECT count(*) FROM cdc_landing`, "0")
	l.want(`SELECT (SELECT count(*) FROM cdc_db_docs0) + (SELECT count(*) FROM cdc_db_docs1) + (SELECT count(*) FROM cdc_db_docs2), (SELECT count(*) FROM cdc_db_small7)`,
		fmt.Sprintf("%d|%d", loads, loads))
}
