package merge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
)

// cdc.idle counts a partition on which nothing has loaded for idle as
// having reached now - idle: a quiet source. A partition the listing
// shows with records below its end not loaded is no quiet source but a
// consumer behind (tracelake run stopped for longer than idle and
// `tracelake merge` run meanwhile, or the first rounds of a run
// restarted after such a stop, before its workers reach every
// partition; a worker stalled on a load that fails). Here partition 0
// loaded orders' change of h+10m an hour ago; orders' change of h+20m
// is in Kafka below the partition's end, not loaded. MarkReady took
// the partition as quiet and marked orders done for h up to an hour ago,
// without the change of h+20m; now the listing's records to load keep a
// partition from being quiet.
func TestMarkReadyIdleIsNoQuietWithRecordsToLoad(t *testing.T) {
	l, _ := ordersMerged(t)
	for _, q := range []string{`UPDATE cdc_ledger SET loaded_at = loaded_at - INTERVAL 1 HOUR`,
		`UPDATE cdc_routes_reached SET loaded_at = loaded_at - INTERVAL 1 HOUR`} {
		if _, err := l.s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "dbserver1", Partition: 0}: {End: 2}, // orders' change of h+20m at offset 1, not loaded
		}, nil
	}
	l.wantMarks(Marking{Now: time.Now(), Idle: 30 * time.Minute, Ends: ends}, "cdc_db_orders")
}

// A round whose listing of ends failed went by what loaded alone: a
// partition with records to load and none loaded was then not known, and
// held nothing back — the wrong mark the listing at every round was
// brought in to prevent (TestMarkReadyPartitionNothingLoadedHoldsTheTableBack),
// back whenever the listing fails: Kafka unreachable from the merge,
// the 15 s listTimeout passed, or one partition's offsets not listed
// (leader moving) failing the listing of all. Here partition 1 holds
// orders' change of h+20m, not loaded; partition 0 has loaded users'
// change of h+3h05m; the listing fails, and orders was marked done for
// h, h+1 and h+2. Now such a round marks nothing.
func TestMarkReadyListingFailedHoldsATableWithAPartitionNotKnown(t *testing.T) {
	l := usersPastOrders(t)
	// With the listing, partition 1 holds orders back.
	l.wantMarks(Marking{Now: time.Now(), Ends: partitionOneBehind}, "cdc_db_orders")
	failed := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return nil, errors.New("end offset of dbserver1/1: NOT_LEADER_FOR_PARTITION")
	}
	l.wantMarks(Marking{Now: time.Now(), Ends: failed}, "cdc_db_orders")
}

// MarkReady listed the partitions' ends before the transaction in which
// it reads what loaded (now after the transaction's first read) (the ledger, <table>_routes_reached); loads and
// moves go on in between (tracelake run). A partition the listing shows
// empty is left out, but a change may reach it after the listing, and
// a later change of the source's log reach another partition, load and
// move before the transaction: that partition's progress, read after
// the listing, passes the change the listing could not see. Here orders
// loaded its change of h+10m on partition 0; partition 1 is empty when
// listed; then orders' change of h+30m goes to partition 1 and users'
// change of h+2h05m, later in the log, to partition 0, which loads and
// moves it before the marks' transaction. Orders is marked done for h
// and h+1 while its change of h+30m waited on partition 1.
func TestMarkReadyPartitionWrittenAfterTheListing(t *testing.T) {
	ctx := context.Background()
	l, h := ordersMerged(t)
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "dbserver1", Partition: 0}: {End: 1},
			{Topic: "dbserver1", Partition: 1}: {}, // empty when listed
		}, nil
	}
	before := func() {
		// In Kafka, in the log's order: orders' change on partition 1
		// (not loaded yet: its worker is behind), then users' on 0.
		l.at = h.Add(2*time.Hour + 5*time.Minute)
		l.change(0, "users", "c", 102, row(1, "u"), "id")
		if _, err := l.s.Load(ctx, l.stage()); err != nil {
			t.Error(err)
		}
		if _, err := l.s.Distribute(ctx); err != nil {
			t.Error(err)
		}
		l.at = h.Add(30 * time.Minute)
		l.change(1, "orders", "c", 101, row(2, "b"), "id") // at offset 0 of partition 1, not loaded
	}
	l.wantMarks(Marking{Now: time.Now(), Ends: ends, beforeMarking: before}, "cdc_db_orders")
}

// A change of a source table whose row the decoder refuses (here a
// Canal datetime 2024-05-00, which MySQL stores under a permissive
// sql_mode) is dead-lettered with its table named: a change of the
// table and hour that its model lacks until a replay. MarkReady's
// dead-letter decoding dropped every record cdc.Decode returns an error
// for, as if it were no change event at all: orders' change of h+20m
// is in cdc_dlq, users' change of h+2h05m moves the partition on, and
// orders was marked done for h and h+1. Now a dead letter that does not
// decode holds every table of its topic.
func TestMarkReadyWaitsForAChangeWhoseRowIsRefused(t *testing.T) {
	l := newCanalLoader(t)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	canal := func(table string, at time.Time, id int, day string) {
		v := fmt.Sprintf(`{"data":[{"id":"%d","d":"2024-05-%s 00:00:00"}],"database":"db","es":%d,"id":%d,"isDdl":false,`+
			`"mysqlType":{"id":"int(11)","d":"datetime"},"old":null,"pkNames":["id"],"table":%q,"ts":%d,"type":"INSERT"}`,
			id, day, at.UnixMilli(), l.next[0]+1, table, at.UnixMilli())
		l.pending[0] = append(l.pending[0], &kgo.Record{Topic: "dbserver1", Partition: 0, Offset: l.next[0], Value: []byte(v)})
		l.next[0]++
	}
	canal("orders", h.Add(10*time.Minute), 1, "01")
	l.flushDeadLettering()
	l.mustMerge()
	canal("orders", h.Add(20*time.Minute), 2, "00") // refused: day 00
	canal("users", h.Add(2*time.Hour+5*time.Minute), 1, "01")
	l.flushDeadLettering()
	l.want(`SELECT "offset", error FROM cdc_dlq`, `1|not a Canal change event: db.orders row 0: column "d": "2024-05-00 00:00:00" is not a value of datetime`)
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
}

// newCanalLoader is newChangeLoader for Canal's flat messages (queued
// by hand: change writes Debezium's).
func newCanalLoader(t *testing.T) *changeLoader {
	t.Helper()
	l := newChangeLoader(t)
	opts := cdc.Options{Format: cdc.FormatCanal}
	dec, err := pipeline.NewChangelogDecoder(opts, l.s)
	if err != nil {
		t.Fatal(err)
	}
	names, err := cdc.NewDecoder(opts)
	if err != nil {
		t.Fatal(err)
	}
	l.dec = dec
	l.merger = NewChangelogMerger(NewMerger(l.s.DB(), slog.New(slog.DiscardHandler)), l.s, names)
	return l
}

// A table of unknown progress (a partition of its topics with records
// to load and none loaded: through is NULL) is marked no further, and a
// dead-lettered change holds its table's marks before it. MarkReady
// took least(through, the first dead letter's time), and DuckDB's least
// ignores NULL: a dead letter turned unknown progress into progress up to
// the dead letter. Here partition 1 holds orders' change of h+20m, not
// loaded; partition 0 loaded orders' change of h+10m and dead-lettered
// its change of h+3h20m; orders was marked done for h, h+1 and h+2.
func TestMarkReadyDeadLetterIsNoProgress(t *testing.T) {
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.at = h.Add(3*time.Hour + 20*time.Minute)
	l.change(0, "orders", "c", 101, map[string]any{"id": 2, "v": "b", "KOFFSET": 1}, "id") // dead-lettered
	l.flushDeadLettering()
	l.want(`SELECT "offset" FROM cdc_dlq`, "1")
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now(), Ends: partitionOneBehind}, "cdc_db_orders")
}

// A topic the listing does not show (deleted, or unknown to Kafka for
// the moment) gives its partitions no known progress: its tables wait,
// whatever cdc.idle says, while the tables of the topics listed are
// marked. Here orders' topic is listed and quiet for two hours; users'
// (its rows' topic rewritten to one the listing does not show) has
// reached h+3h05m by its own change.
func TestMarkReadyUnlistedTopicHoldsItsTablesAlone(t *testing.T) {
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "users", "u", 102, row(1, "u2"), "id")
	l.flush()
	l.mustMerge()
	for _, q := range []string{`UPDATE cdc_routes_reached SET topic = 'dbserver2' WHERE log_table = 'cdc_db_users_log'`,
		`UPDATE ` + WatermarkTable + ` SET topic = 'dbserver2' WHERE model = 'cdc_db_users'`} {
		if _, err := l.s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{{Topic: "dbserver1", Partition: 0}: {End: 2}}, nil
	}
	now := time.Now().Add(2 * time.Hour)
	l.wantMarks(Marking{Now: now, Idle: time.Hour, Ends: ends}, "cdc_db_users")
	var n int
	if err := l.s.DB().QueryRow(`SELECT count(*) FROM tracelake_ready WHERE "table" = 'cdc_db_orders'`).Scan(&n); err != nil || n == 0 {
		t.Errorf("marks of cdc_db_orders, whose topic is listed: %d, %v", n, err)
	}
}
