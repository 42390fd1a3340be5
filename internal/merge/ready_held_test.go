package merge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// stageDeadLettering stages the queued events as stage does, one batch
// per partition, but dead-letters an event the decoder refuses (with its
// reason, counted in the range), as the pipeline's batcher does.
func (l *changeLoader) stageDeadLettering() []sink.File {
	l.t.Helper()
	var files []sink.File
	for p, recs := range l.pending {
		b := &sink.Batch{}
		rg := sink.Range{TopicPartition: sink.TopicPartition{Topic: recs[0].Topic, Partition: p}, First: recs[0].Offset, Last: recs[len(recs)-1].Offset}
		for _, r := range recs {
			n, err := l.dec.AppendRows(b, r)
			if err != nil {
				start := len(b.DLQ)
				b.DLQ = envelope.AppendDLQRow(b.DLQ, r, err.Error(), envelope.StageDecode)
				b.MaxLine = max(b.MaxLine, len(b.DLQ)-start)
				rg.DLQ++
				continue
			}
			rg.Records += int64(n)
		}
		b.Ranges = []sink.Range{rg}
		f, err := l.s.Stage(context.Background(), b)
		if err != nil {
			l.t.Fatal(err)
		}
		files = append(files, f)
	}
	clear(l.pending)
	return files
}

// flushDeadLettering loads the queued events as stageDeadLettering stages
// them, in one load, and moves them into their changelog tables.
func (l *changeLoader) flushDeadLettering() {
	l.t.Helper()
	if _, err := l.s.Load(context.Background(), l.stageDeadLettering()); err != nil {
		l.t.Fatal(err)
	}
	l.distribute()
}

// ordersDeadLettered is hoursAgo with orders' change of h+10m loaded,
// its change of h+20m dead-lettered (a source column named like a
// changelog column) and users' change of h+2h05m loaded.
func ordersDeadLettered(t *testing.T) (*changeLoader, time.Time) {
	t.Helper()
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.at = h.Add(20 * time.Minute)
	l.change(0, "orders", "c", 101, map[string]any{"id": 2, "v": "b", "KOFFSET": 1}, "id")
	l.at = h.Add(2*time.Hour + 5*time.Minute)
	l.change(0, "users", "c", 102, row(1, "u"), "id")
	l.flushDeadLettering()
	return l, h
}

// A snapshot row (Debezium "r": here a chunk of an incremental snapshot,
// which the connector emits between the changes it streams) is read
// beside the log and stamped with the time of the read: it says nothing
// about how far the log has been sent (the reason cdc.Beats.See refuses
// it as a heartbeat). MarkReady took it as the partition's progress all
// the same (<table>_routes_reached's last_source_time, of every op): the
// connector streams the log two hours behind (users' change of h+10m),
// reads a chunk of orders at h+3h05m, and users was marked done for h,
// h+1 and h+2 while its next change of the log, of h+20m, was still to
// come on the partition. Now the last source time is the log's only.
func TestMarkReadySnapshotRowIsNoProgressOfTheLog(t *testing.T) {
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "users", "c", 100, row(1, "u"), "id")
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "orders", "r", 101, row(1, "a"), "id") // read now, beside a log two hours behind
	l.flush()
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_users")
	// The log's next change of users, in an hour marked done.
	l.at = h.Add(20 * time.Minute)
	l.change(0, "users", "u", 102, row(1, "u2"), "id")
	l.flush()
	l.mustMerge()
}

// A change dead-lettered (here: a source column named like a changelog
// column; equally a widening an index blocks, README "Widened types")
// is a change of its table and hour that the model does not hold, as
// much as one still in the landing table, which holds its table's marks
// back. MarkReady looked at the dead-letter table not at all: orders'
// change of h+20m is in cdc_dlq, the partition moves on with users'
// change of h+2h05m, and orders was marked done for h and h+1. Now a
// dead-lettered change holds its table's marks before its hour.
func TestMarkReadyWaitsForDeadLetteredChanges(t *testing.T) {
	l, _ := ordersDeadLettered(t)
	l.want(`SELECT "offset" FROM cdc_dlq`, "1")
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
}

// Each round decodes only the dead letters no round before it decoded:
// their values (up to 12 MB each) are not read again at every round while
// they wait for a replay, and one replayed or deleted no longer holds its
// table back. Here the dead letter's value is rewritten in place to a
// change three hours later: a round that read it again would mark orders
// for h to h+2.
func TestMarkReadyDecodesEachDeadLetterOnce(t *testing.T) {
	l, h := ordersDeadLettered(t)
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
	later := fmt.Sprintf(`UPDATE cdc_dlq SET "value" = replace("value"::VARCHAR, '%d', '%d')::BLOB`,
		h.Add(20*time.Minute).UnixMilli(), h.Add(3*time.Hour).UnixMilli())
	if _, err := l.s.DB().Exec(later); err != nil {
		t.Fatal(err)
	}
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
	if _, err := l.s.DB().Exec(`DELETE FROM cdc_dlq`); err != nil {
		t.Fatal(err)
	}
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders", "cdc_db_orders|"+h.Format("2006-01-02 15"), "cdc_db_orders|"+h.Add(time.Hour).Format("2006-01-02 15"))
}

// A replay lands dead-lettered changes below what their model merged and
// lowers the model's watermark to them (LowerWatermarks), in its
// transaction; the changes reach the changelog table only at the next
// move. When the table's moves fail meanwhile (here: an operator's
// unique index on the changelog table refuses the change), the next
// merge of the model used to advance the watermark back to what the
// table reached, past the replayed change still landed; once the table
// was mended and its changes moved, the table reached no further (the
// replayed offsets are below), and the change never reached the model.
// Now a merge's watermark stops at the table's lowest landed change.
func TestReplayedChangesOfATableThatCannotMoveReachTheModel(t *testing.T) {
	ctx := context.Background()
	l := newChangeLoader(t, func(o *duckdb.Options) { o.DistributeEvery = time.Nanosecond })
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 101, map[string]any{"id": 2, "v": "a", "KOFFSET": 1}, "id") // dead-lettered
	l.change(0, "orders", "c", 102, row(3, "c"), "id")
	l.flushDeadLettering()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a", "3|c")
	// The dead letter's cause is fixed (its value rewritten here to a
	// change that fits); the table breaks meanwhile.
	if _, err := l.s.DB().Exec(`UPDATE cdc_dlq SET "value" = encode(replace(decode("value"), '"KOFFSET":1,', ''))`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.DB().Exec(`CREATE UNIQUE INDEX orders_v ON cdc_db_orders_log (v)`); err != nil {
		t.Fatal(err)
	}
	res, err := l.s.Replay(ctx, duckdb.ReplayOptions{Decode: l.dec.AppendRows, Replayed: l.merger.LowerWatermarks})
	if err != nil || res.Loaded != 1 {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	if _, errs := l.mergeAll(); errs["cdc_db_orders"] == nil {
		t.Fatalf("the merge of a table whose changes cannot move did not fail")
	}
	if _, err := l.s.DB().Exec(`DROP INDEX orders_v`); err != nil {
		t.Fatal(err)
	}
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_landing`, "0")
	l.want(`SELECT id, v FROM cdc_db_orders_log ORDER BY id`, "1|a", "2|a", "3|c")
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a", "2|a", "3|c")
}

// A truncation of one shard is dead-lettered (its logical table's model
// cannot tell the shard's rows): it holds back its own table's marks
// alone. As a dead letter that decodes to no table it held back every
// table of its topic (users here) until it was deleted.
func TestMarkReadyShardTruncationHoldsItsTableAlone(t *testing.T) {
	l := newOptionsLoader(t, cdc.Options{Format: cdc.FormatDebezium, Shards: []cdc.Shard{{Table: `orders_[0-9]+`, AsTable: "orders"}}})
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders_01", "c", 100, row(1, "a"), "id")
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.at = h.Add(20 * time.Minute)
	l.change(0, "orders_02", "t", 102, nil)
	l.at = h.Add(2*time.Hour + 5*time.Minute)
	l.change(0, "users", "c", 103, row(2, "v"), "id")
	l.flushDeadLettering()
	l.want(`SELECT "offset" FROM cdc_dlq`, "2")
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_users", "cdc_db_users|"+h.Format("2006-01-02 15"), "cdc_db_users|"+h.Add(time.Hour).Format("2006-01-02 15"))
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
}
