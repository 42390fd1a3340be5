package duckdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// bigNotesBatch is routedBatch's orders at offsets first to last, each
// with a note of noteBytes, and a small users row beside each.
func bigNotesBatch(first, last int64, noteBytes int) *sink.Batch {
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: first, Last: last, Records: 2 * (last - first + 1)}}}
	note := strings.Repeat("n", noteBytes)
	for o := first; o <= last; o++ {
		orders := b.RoutedTo("cdc_db_orders_log", sink.SourceTable{Database: "db", Name: "orders"})
		orders.AddColumn(sink.Column{Name: "id", Type: schema.Int64})
		orders.AddColumn(sink.Column{Name: "note", Type: schema.String})
		orders.Rows = fmt.Appendf(orders.Rows, `{"id":%d,"note":"%s","cdc_op":"c","cdc_position":"%020d","cdc_source_time":1700000000000000,"cdc_key":["id"],"ktopic":"t","kpartition":0,"koffset":%d,"kindex":0}`+"\n", o, note, o, o)
		users := b.RoutedTo("cdc_db_users_log", sink.SourceTable{Database: "db", Name: "users"})
		users.AddColumn(sink.Column{Name: "name", Type: schema.String})
		users.Rows = fmt.Appendf(users.Rows, `{"name":"u%d","cdc_op":"u","ktopic":"t","kpartition":0,"koffset":%d,"kindex":1}`+"\n", o, o)
	}
	return b
}

// Landed rows whose bytes pass moveBudget move in groups, one transaction
// each, taking each table's rows in the order they landed; a move
// stopped between two groups (its context cancelled before the second
// commits, as a process killed there) leaves every change once, in the
// landing table or in its changelog table, what each table reached
// telling what moved (a prefix of its changes), and the next move moves
// the rest, once. Rows an older release landed (no bytes) are measured.
func TestAMoveStoppedBetweenGroupsLosesAndDoublesNothing(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.MemoryLimit = 64 << 20; o.DistributeEvery = time.Hour })
	_, run := moveBudget(s.opt.MemoryLimit)
	mustLoad(t, s, bigNotesBatch(0, 9, int(run/3)-1000)) // three orders a run
	if got := count(t, s, `SELECT count(*) FROM cdc_landing WHERE bytes = strlen("row")`); got != 20 {
		t.Fatalf("%d landed rows with their bytes, want 20", got)
	}
	if _, err := s.DB().Exec(`UPDATE cdc_landing SET bytes = NULL WHERE log_table = 'cdc_db_orders_log'`); err != nil {
		t.Fatal(err) // as an older release landed them
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	groups := 0
	s.beforeMoveCommit = func(context.Context) {
		if groups++; groups == 2 {
			cancel()
		}
	}
	moved, err := s.Distribute(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the stopped move: %d rows, %v; want context.Canceled", moved, err)
	}
	if moved != 3 {
		t.Errorf("the stopped move says %d rows moved, want the first group's 3", moved)
	}
	// every change once, landed or moved
	everyChange := `SELECT count(*), count(DISTINCT (t, o)) FROM (
	SELECT log_table AS t, ("row"->>'koffset')::BIGINT AS o FROM cdc_landing
	UNION ALL SELECT 'cdc_db_orders_log', koffset FROM cdc_db_orders_log
	UNION ALL SELECT 'cdc_db_users_log', koffset FROM cdc_db_users_log)`
	wantOnce := func(when string) {
		t.Helper()
		var n, distinct int64
		if err := s.DB().QueryRow(everyChange).Scan(&n, &distinct); err != nil {
			t.Fatal(err)
		}
		if n != 20 || distinct != 20 {
			t.Errorf("%s: %d changes (%d distinct), want each of the 20 once", when, n, distinct)
		}
	}
	wantOnce("stopped between two groups")
	wantCounts(t, s, "stopped between two groups", map[string]int64{
		`SELECT count(*) FROM cdc_db_orders_log WHERE koffset < 3 AND strlen(note) > 0`:                               3,
		`SELECT count(*) FROM cdc_db_orders_log`:                                                                      3,
		`SELECT count(*) FROM cdc_landing WHERE log_table = 'cdc_db_orders_log' AND ("row"->>'koffset')::BIGINT >= 3`: 7,
		`SELECT count(*) FROM cdc_db_users_log`:                                                                       0,
		`SELECT coalesce(max(next_offset), -1) FROM cdc_routes_reached WHERE log_table = 'cdc_db_orders_log'`:         3,
		`SELECT count(*) FROM cdc_routes_reached WHERE log_table = 'cdc_db_users_log'`:                                0,
	})
	s.beforeMoveCommit = nil
	if moved, err := s.Distribute(context.Background()); err != nil || moved != 17 {
		t.Fatalf("the next move: %d rows, %v; want the 17 left", moved, err)
	}
	wantOnce("after the next move")
	wantCounts(t, s, "after the next move", map[string]int64{
		`SELECT count(*) FROM cdc_landing`:                                                      0,
		`SELECT count(DISTINCT koffset) FROM cdc_db_orders_log`:                                 10,
		`SELECT count(DISTINCT koffset) FROM cdc_db_users_log`:                                  10,
		`SELECT max(next_offset) FROM cdc_routes_reached WHERE log_table = 'cdc_db_orders_log'`: 10,
		`SELECT max(next_offset) FROM cdc_routes_reached WHERE log_table = 'cdc_db_users_log'`:  10,
	})
	if got := routedRowCount(t, s); got != 20 {
		t.Errorf("verify counts %d rows, want 20", got)
	}
}

// A landed 12 MB change holding a null member (as the changes of a table
// with a column default do) moves at the smallest memory_limit tracelake
// sets (128 MiB), beside one whose value its column's type does not
// take, still refused: its count of members not null was read by a
// merge patch of the row read again by json_keys, which built the row
// again and ran out of memory at every try.
func TestTwelveMegabyteChangeHoldingANullMovesAtTheSmallestMemoryLimit(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.MemoryLimit = 128 << 20; o.DistributeEvery = time.Hour })
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 1, Records: 2}}}
	docs := b.RoutedTo("cdc_db_docs_log", sink.SourceTable{Database: "db", Name: "docs"})
	docs.AddColumn(sink.Column{Name: "body", Type: schema.String})
	docs.AddColumn(sink.Column{Name: "title", Type: schema.String})
	docs.Rows = fmt.Appendf(docs.Rows, `{"body":"%s","title":null,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":0,"kindex":0}`+"\n", strings.Repeat("x", 12<<20))
	items := b.RoutedTo("cdc_db_items_log", sink.SourceTable{Database: "db", Name: "items"})
	items.AddColumn(sink.Column{Name: "qty", Type: schema.Int64})
	items.AddColumn(sink.Column{Name: "note", Type: schema.String})
	items.Rows = fmt.Appendf(items.Rows, `{"qty":"three","note":null,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":1,"kindex":0}`+"\n")
	b.MaxLine = len(docs.Rows)
	mustLoad(t, s, b)
	_, err := s.Distribute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cdc_db_items_log") || strings.Contains(err.Error(), "cdc_db_docs_log") {
		t.Fatalf("Distribute: %.300v; want the items' change refused alone", err)
	}
	wantCounts(t, s, "moved", map[string]int64{
		`SELECT count(*) FROM cdc_db_docs_log WHERE strlen(body) = 12 << 20 AND title IS NULL`: 1,
		`SELECT count(*) FROM cdc_landing WHERE log_table = 'cdc_db_items_log'`:                1,
		`SELECT count(*) FROM cdc_landing`:                                                     1,
	})
}

// landHundredKilobyteChanges lands loads×perLoad orders of 100 KB (each
// beside a small users row) in loads loads, and returns the count of
// changes.
func landHundredKilobyteChanges(t *testing.T, s *Sink, loads, perLoad int64) int64 {
	t.Helper()
	for i := int64(0); i < loads; i++ {
		mustLoad(t, s, bigNotesBatch(i*perLoad, (i+1)*perLoad-1, 100<<10))
	}
	return 2 * loads * perLoad
}

// wantEveryChangeMovedOnce checks that the orders and users changes
// landHundredKilobyteChanges landed (orders of it) are in their changelog
// tables, once, none landed.
func wantEveryChangeMovedOnce(t *testing.T, s *Sink, orders int64) {
	t.Helper()
	wantCounts(t, s, "moved", map[string]int64{
		`SELECT count(*) FROM cdc_landing`: 0,
		`SELECT count(DISTINCT koffset) FROM cdc_db_orders_log WHERE strlen(note) = 100 << 10`:  orders,
		`SELECT count(*) FROM cdc_db_orders_log`:                                                orders,
		`SELECT count(DISTINCT koffset) FROM cdc_db_users_log`:                                  orders,
		`SELECT count(*) FROM cdc_db_users_log`:                                                 orders,
		`SELECT max(next_offset) FROM cdc_routes_reached WHERE log_table = 'cdc_db_orders_log'`: orders,
	})
}

// 2,048 changes of 100 KB landed between two moves (200 MB) move at the
// smallest memory_limit tracelake sets (128 MiB), in groups, each once: a
// group's rows were read by a join with their rowids, which read every
// landed row's value, and sorted as read from the landing table, a sort
// that holds the buffers they were read into; after 486 rows the next
// group ran out of memory, and every later try at once, nothing moving
// again.
func TestThousandsOfHundredKilobyteChangesMoveAtTheSmallestMemoryLimit(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.MemoryLimit = 128 << 20; o.DistributeEvery = time.Hour })
	changes := landHundredKilobyteChanges(t, s, 16, 128)
	moved, err := s.Distribute(context.Background())
	if err != nil || moved != changes {
		t.Fatalf("Distribute: %d rows, %.300v; want every change (%d) moved", moved, err, changes)
	}
	wantEveryChangeMovedOnce(t, s, changes/2)
}

// A move beside another write transaction (a merge's), when no
// checkpoint can run, may run out of memory, the values its groups
// committed held in memory until one does (DuckDB's automatic checkpoint
// counts a text value as 16 bytes and does not come for big ones); the
// next move, once that transaction ends, moves the rest, each once,
// rather than running out at its first group at every try.
func TestAMoveOutOfMemoryWithGroupsCommittedMovesTheRestNextTime(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.MemoryLimit = 128 << 20; o.DistributeEvery = time.Hour })
	changes := landHundredKilobyteChanges(t, s, 16, 128)
	if _, err := s.DB().Exec(`CREATE TABLE other_writes (a INTEGER)`); err != nil {
		t.Fatal(err)
	}
	other, err := s.DB().Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback() //nolint:errcheck // after Commit a no-op
	if _, err := other.Exec(`INSERT INTO other_writes VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	first, err := s.Distribute(context.Background())
	if err != nil && !isOutOfMemory(err) {
		t.Fatalf("Distribute beside a write transaction: %d rows, %.300v; want them moved or out of memory", first, err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	rest, err := s.Distribute(context.Background())
	if err != nil || first+rest != changes {
		t.Fatalf("the next Distribute: %d rows (%d before), %.300v; want every change (%d) moved", rest, first, err, changes)
	}
	wantEveryChangeMovedOnce(t, s, changes/2)
}
