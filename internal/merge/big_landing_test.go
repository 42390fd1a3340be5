package merge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// cancelOnMessage cancels a context at the first log record of its
// message.
type cancelOnMessage struct {
	msg    string
	cancel context.CancelFunc
}

func (h cancelOnMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h cancelOnMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.cancel()
	}
	return nil
}
func (h cancelOnMessage) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cancelOnMessage) WithGroup(string) slog.Handler      { return h }

// A move of big changes stopped between two of its groups (its context
// cancelled once the first committed, as a process killed there) leaves
// each change once, landed or moved: the next move and merge give each
// model every change once, a key's later change (landed, and moved, in
// a later group) over its earlier.
func TestAMoveStoppedBetweenGroupsMergesEachChangeOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := newChangeLoader(t, func(o *duckdb.Options) {
		o.MemoryLimit, o.DistributeEvery = 128<<20, time.Hour
		o.Log = slog.New(cancelOnMessage{msg: "moved a group of landed changes into their changelog tables; more follow", cancel: cancel})
	})
	l.at = time.Now().UTC().Add(-time.Hour)
	big := 5 << 20 // one a group at 128 MiB: two pass a sixteenth of it
	for i, c := range []struct {
		id      int
		op, val string
	}{{1, "c", "a"}, {2, "c", "b"}, {3, "c", "c"}, {1, "u", "d"}} {
		l.change(0, "docs", c.op, 100+i, map[string]any{"id": c.id, "body": strings.Repeat(c.val, big)}, "id")
		l.change(0, "small", c.op, 100+i, map[string]any{"id": c.id, "v": c.val}, "id")
		if _, err := l.s.Load(context.Background(), l.stage()); err != nil {
			t.Fatalf("load %d: %.200v", i, err)
		}
	}
	if n, err := l.s.Distribute(ctx); !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("the stopped move: %d rows, %.300v; want its first group's one row and context.Canceled", n, err)
	}
	l.want(`SELECT (SELECT count(*) FROM cdc_db_docs_log), (SELECT count(*) FROM cdc_landing)`, "1|7")
	l.mustMerge() // moves first
	l.want(`SELECT count(*) FROM cdc_landing`, "0")
	l.want(`SELECT id, left(body, 1), strlen(body) FROM cdc_db_docs ORDER BY id`,
		fmt.Sprintf("1|d|%d", big), fmt.Sprintf("2|b|%d", big), fmt.Sprintf("3|c|%d", big))
	l.want(`SELECT id, v FROM cdc_db_small ORDER BY id`, "1|d", "2|b", "3|c")
	l.want(`SELECT count(*), count(DISTINCT koffset) FROM cdc_db_docs_log`, "4|4")
}
