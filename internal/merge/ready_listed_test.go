package merge

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink"
)

// A change of source table db.Orders is refused by the pipeline: its
// changelog name, cdc_db_orders_log, belongs to db.orders (names that
// differ only in case are one name), and it stays dead-lettered until an
// operator maps it elsewhere (a shard rule); it never goes into
// cdc_db_orders. MarkReady used to decode the dead letters with the
// merger's own decoder, which knew no claims (the pipeline's decoder is
// given the registry's, NewChangelogDecoder): in a process that had not
// routed db.orders itself, db.Orders' change decoded as
// cdc_db_orders_log's and held cdc_db_orders' marks before h+20m for
// good. Now the dead letters are decoded with the registry's claims, by
// a decoder of their own.
func TestMarkReadyDeadLetterOfAnotherSourceTableHoldsNoMarks(t *testing.T) {
	ctx := context.Background()
	l, h := ordersMerged(t)
	l.at = h.Add(20 * time.Minute)
	l.change(0, "Orders", "c", 101, row(1, "A"), "id") // refused: cdc_db_orders_log holds db.orders
	l.at = h.Add(2*time.Hour + 5*time.Minute)
	l.change(0, "users", "c", 102, row(1, "u"), "id")
	l.flushDeadLettering()
	l.want(`SELECT "offset" FROM cdc_dlq`, "1")
	l.mustMerge()
	// The merger of a restarted process, on the same database.
	names, err := cdc.NewDecoder(cdc.Options{Format: cdc.FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	restarted := NewChangelogMerger(NewMerger(l.s.DB(), slog.New(slog.DiscardHandler)), l.s, names)
	if _, err := restarted.MarkReady(ctx, Marking{Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.want(`SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready WHERE "table" = 'cdc_db_orders' ORDER BY ALL`,
		"cdc_db_orders|"+h.Format("2006-01-02 15"), "cdc_db_orders|"+h.Add(time.Hour).Format("2006-01-02 15"))
}

// MarkReady read the dead-letter table (deadLettered) before, and
// outside, the transaction in which it reads the partitions' progress
// and writes the marks (now it reads it in that transaction). In `tracelake run` loads and moves go on beside
// the merge rounds: a load that dead-letters orders' change of h+20m and
// loads users' change of h+2h05m after it on the partition, committed
// (and moved) in between, is seen by the second read and not by the
// first, and orders is marked done for h and h+1 without the change. The
// longer the dead-letter table (every row is decoded in between), the
// wider the window. Read in the marks' transaction, both would be of one
// snapshot.
func TestMarkReadyDeadLetterCommittedDuringTheRound(t *testing.T) {
	ctx := context.Background()
	l, h := ordersMerged(t)
	before := func() {
		l.at = h.Add(20 * time.Minute)
		l.change(0, "orders", "c", 101, map[string]any{"id": 2, "v": "b", "KOFFSET": 1}, "id") // dead-lettered
		l.at = h.Add(2*time.Hour + 5*time.Minute)
		l.change(0, "users", "c", 102, row(1, "u"), "id")
		if _, err := l.s.Load(ctx, l.stageDeadLettering()); err != nil {
			t.Error(err)
		}
		if _, err := l.s.Distribute(ctx); err != nil {
			t.Error(err)
		}
	}
	l.wantMarks(Marking{Now: time.Now(), beforeMarking: before}, "cdc_db_orders")
	l.want(`SELECT "offset" FROM cdc_dlq`, "1")
}

// README "Done marks": every partition of a table's topics counts, and
// "one whose progress is not known (nothing loaded on it yet …) holds the
// table back". MarkReady knows a partition only from the ledger, from
// <table>_routes_reached or from a heartbeat's listing of ends: without a
// heartbeat (plain, or cdc.idle) a partition of which nothing had loaded
// yet (a run's first minutes over a backlog, a worker behind, a
// partition added to the topic) was not known at all, and held nothing
// back. Now the tables' topics are listed at every round. Here
// partition 1 holds orders' change of h+20m, in Kafka below its end and
// not loaded; partition 0 has loaded users' change of
// h+3h05m. The listing of the topic's partitions names partition 1;
// without a heartbeat MarkReady did not ask it, and orders was marked
// done for h, h+1 and h+2.
func TestMarkReadyPartitionNothingLoadedHoldsTheTableBack(t *testing.T) {
	l := usersPastOrders(t)
	l.wantMarks(Marking{Now: time.Now(), Ends: partitionOneBehind}, "cdc_db_orders")
}

// cdc.idle was written into MarkReady's SQL as INTERVAL <µs>
// MICROSECONDS, and DuckDB's parser takes an integer literal there only
// up to 2^31-1: an idle time over 35m47s (cdc.idle: 1h, which validation
// accepts) was a syntax error, every merge round's MarkReady failed, and
// no hour was ever marked. Here the partition has been quiet for two hours: with
// cdc.idle 1h, orders is complete up to an hour ago.
func TestMarkReadyIdleOfAnHour(t *testing.T) {
	ctx := context.Background()
	l, _ := ordersMerged(t)
	now := time.Now().Add(2 * time.Hour)
	if _, err := l.merger.MarkReady(ctx, Marking{Now: now, Idle: time.Hour}); err != nil {
		t.Fatalf("MarkReady with cdc.idle 1h: %v", err)
	}
	var n int
	if err := l.s.DB().QueryRow(`SELECT count(*) FROM tracelake_ready WHERE "table" = 'cdc_db_orders'`).Scan(&n); err != nil || n == 0 {
		t.Errorf("marks of cdc_db_orders after two quiet hours with cdc.idle 1h: %d, %v", n, err)
	}
}

// The shards of a logical table come on a topic each when the source
// names a topic per table (Debezium: dbserver1.db.order_00,
// dbserver1.db.order_01, …), and so does one table of several servers
// (dbserver1.db.orders, dbserver2.db.orders). MarkReady knew a table's
// topics only from the changes of it that had moved
// (<table>_routes_reached), and listed only those: a shard whose topic
// nothing had loaded from yet (a run's first minutes over a backlog, a
// worker behind, a new shard) did not hold its table back. Here order_00
// has loaded changes of h+10m and h+3h05m on its topic; order_01's change
// of h+20m is in Kafka, on its own topic, and not loaded: the logical
// table cdc_db_order was marked done for h, h+1 and h+2, and the change
// then arrived in an hour marked done. The listing of ends names every
// topic read; one of which nothing has loaded, with records to load, may
// carry any table's changes, and holds every table back until it loads.
func TestMarkReadyShardOnATopicNothingLoadedHoldsItsTable(t *testing.T) {
	l := newOptionsLoader(t, cdc.Options{Format: cdc.FormatDebezium, Shards: []cdc.Shard{{Table: `order_[0-9]+`, AsTable: "order"}}})
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	l.topic = "dbserver1.db.order_00"
	l.at = h.Add(10 * time.Minute)
	l.change(0, "order_00", "c", 100, row(1, "a"), "id")
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "order_00", "c", 102, row(3, "c"), "id")
	l.flush()
	l.mustMerge()
	// The listing names every topic read, as the run's does (Ends).
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "dbserver1.db.order_00", Partition: 0}: {End: 2},
			{Topic: "dbserver1.db.order_01", Partition: 0}: {End: 1}, // order_01's change of h+20m, not loaded
		}, nil
	}
	l.wantMarks(Marking{Now: time.Now(), Ends: ends}, "cdc_db_order")

	// Once order_01's change has loaded, moved and merged, the table is
	// complete to where its slower topic reached (h+20m): no hour yet.
	// Then order_01 passes h+2h and both hours before are marked.
	l.topic = "dbserver1.db.order_01"
	l.next = map[int32]int64{}
	l.at = h.Add(20 * time.Minute)
	l.change(0, "order_01", "c", 101, row(2, "b"), "id")
	l.at = h.Add(2*time.Hour + 10*time.Minute)
	l.change(0, "order_01", "u", 103, row(2, "b2"), "id")
	l.flush()
	l.mustMerge()
	ends = func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "dbserver1.db.order_00", Partition: 0}: {End: 2},
			{Topic: "dbserver1.db.order_01", Partition: 0}: {End: 2},
		}, nil
	}
	l.want(`SELECT id, v FROM cdc_db_order ORDER BY id`, "1|a", "2|b2", "3|c")
	l.wantMarks(Marking{Now: time.Now(), Ends: ends}, "cdc_db_order",
		"cdc_db_order|"+h.Format("2006-01-02 15"), "cdc_db_order|"+h.Add(time.Hour).Format("2006-01-02 15"))
}
