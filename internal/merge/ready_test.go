package merge

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// An hour of a model is marked once every partition feeding its table
// has loaded a change at or past the hour's end and the model is merged
// up to its rows: not while a partition lags, not before the merge, each
// hour once from the table's first; a partition idle for longer than the
// idle time counts as reaching now - idle.
func TestMarkReady(t *testing.T) {
	ctx := context.Background()
	l := newChangeLoader(t)
	// Source times five hours ago: the idle rule compares the loads'
	// wall-clock times with now.
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	// hours are the marks of table from h to the hour before end.
	hours := func(table string, end time.Time) []string {
		var out []string
		for at := h; at.Add(time.Hour).Compare(end) <= 0; at = at.Add(time.Hour) {
			out = append(out, table+"|"+at.Format("2006-01-02 15"))
		}
		return out
	}
	mark := func(idle time.Duration, now time.Time) {
		t.Helper()
		if _, err := l.merger.MarkReady(ctx, Marking{Now: now, Idle: idle}); err != nil {
			t.Fatal(err)
		}
	}
	marks := func(want ...string) {
		t.Helper()
		l.want(`SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready`, want...)
	}
	// orders on partitions 0 and 1, users on 0 only.
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(1, "orders", "c", 101, row(2, "a"), "id")
	l.change(0, "users", "c", 102, row(1, "u"), "id")
	l.flush()
	mark(0, time.Now())
	marks() // not merged yet, and no partition past the first hour's end
	l.mustMerge()
	l.at = h.Add(2*time.Hour + 5*time.Minute) // on partition 0 only
	l.change(0, "users", "u", 103, row(1, "u2"), "id")
	l.flush()
	mark(0, time.Now())
	marks() // users' new row is not merged; orders' partition 1 lags in the first hour
	l.mustMerge()
	mark(0, time.Now())
	// users has had changes on partition 0 only, but its next may come on
	// partition 1 (a new key hashes anywhere), which reached h+10m: it
	// waits, as orders does.
	marks()
	l.at = h.Add(2*time.Hour + 10*time.Minute)
	l.change(1, "orders", "u", 104, row(2, "b"), "id")
	l.flush()
	l.mustMerge()
	mark(0, time.Now())
	users, orders := hours("cdc_db_users", h.Add(2*time.Hour)), hours("cdc_db_orders", h.Add(2*time.Hour))
	marks(append(orders, users...)...)
	mark(0, time.Now())
	marks(append(orders, users...)...) // each hour once
	// With an idle time of 30 minutes, an hour from now both partitions
	// are idle and count as reaching half an hour from now: both tables
	// are complete up to then.
	later := time.Now().Add(time.Hour)
	mark(30*time.Minute, later)
	marks(append(hours("cdc_db_orders", later.Add(-30*time.Minute)), hours("cdc_db_users", later.Add(-30*time.Minute))...)...)
	for table, want := range map[string]bool{"cdc_db_orders": true, "cdc_db_deals": false} {
		got, err := Ready(ctx, l.s.DB(), table, h.Add(time.Hour+25*time.Minute))
		if err != nil || got != want {
			t.Errorf("Ready(%s, the second hour) = %v, %v; want %v", table, got, err, want)
		}
	}
}

// A heartbeat (a change of a heartbeat table, source time T) moves a
// quiet partition of its source's topics to T once that partition has
// loaded everything below its last stable offset as listed after the
// heartbeat was read: not while a record below it is still to load, not
// for a topic of another source.
func TestMarkReadyHeartbeatMovesCaughtUpPartitions(t *testing.T) {
	ctx := context.Background()
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(1, "orders", "c", 101, row(2, "a"), "id") // partition 1 then goes quiet
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "heartbeat", "u", 102, row(1, "beat"), "id")
	l.flush()
	l.mustMerge()
	beat := cdc.Beat{SourceTime: l.at.UnixMicro(), Topics: regexp.MustCompile(`^dbserver1$`)}
	var listed []string
	mark := func(beats []cdc.Beat, end1 int64) {
		t.Helper()
		ends := func(_ context.Context, topics []string) (map[sink.TopicPartition]Offsets, error) {
			listed = append(listed, topics...)
			return map[sink.TopicPartition]Offsets{{Topic: "dbserver1", Partition: 0}: {End: 2}, {Topic: "dbserver1", Partition: 1}: {End: end1},
				{Topic: "dbserver1", Partition: 2}: {}}, nil // never written to: nothing to wait for
		}
		if _, err := l.merger.MarkReady(ctx, Marking{Now: time.Now(), Beats: beats, Ends: ends}); err != nil {
			t.Fatal(err)
		}
	}
	marks := func(want ...string) {
		t.Helper()
		l.want(`SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready WHERE "table" = 'cdc_db_orders' ORDER BY ALL`, want...)
	}
	mark(nil, 1)
	marks() // partition 1 reached h+10m only
	if _, err := l.merger.MarkReady(ctx, Marking{Now: time.Now(), Beats: []cdc.Beat{beat},
		Ends: func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
			return nil, errors.New("no broker")
		}}); err != nil {
		t.Errorf("a round whose heartbeats' ends cannot be listed failed: %v", err)
	}
	marks() // and moved nothing
	mark([]cdc.Beat{beat}, 2)
	marks() // partition 1 has a record below its end not loaded
	mark([]cdc.Beat{{SourceTime: beat.SourceTime, Topics: regexp.MustCompile(`^otherserver\.`)}}, 1)
	marks() // a heartbeat of another source's topics
	if strings.Join(listed, " ") != "dbserver1 dbserver1 dbserver1" {
		t.Errorf("end offsets listed of %q, want the changelog tables' topic dbserver1 at each round", listed)
	}
	mark([]cdc.Beat{beat}, 1)
	at := func(n int) string {
		return "cdc_db_orders|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	marks(at(0), at(1), at(2)) // to the heartbeat's hour
}

// A table whose changes wait in the landing table (here: they cannot
// move, its changelog table lost a column they hold) is not marked past
// them, although its partition moved on with another table's changes;
// once they move and merge, it is.
func TestMarkReadyWaitsForLandedChanges(t *testing.T) {
	ctx := context.Background()
	l, h := ordersCannotMove(t)
	marks := func(want ...string) {
		t.Helper()
		if _, err := l.merger.MarkReady(ctx, Marking{Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		l.want(`SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`, want...)
	}
	l.at = h.Add(time.Hour + 10*time.Minute)
	l.change(0, "orders", "u", 102, row(1, "b"), "id")
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "users", "u", 103, row(1, "u2"), "id")
	if _, err := l.s.Load(ctx, l.stage()); err != nil {
		t.Fatal(err)
	}
	// The users' change moved; the orders' did not, and its model says so.
	res, errs := l.mergeAll()
	if err := errs["cdc_db_orders"]; err == nil || !strings.Contains(err.Error(), "cannot move there from the landing table") {
		t.Errorf("merge of the model whose changes cannot move: %v", err)
	}
	if len(errs) != 1 || res["cdc_db_users"].Read != 1 {
		t.Errorf("the other model: %+v (errors %v)", res["cdc_db_users"], errs)
	}
	l.want(`SELECT count(*) FROM cdc_landing`, "1")
	hour := func(table string, n int) string {
		return table + "|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	marks(hour("cdc_db_users", 0), hour("cdc_db_users", 1), hour("cdc_db_users", 2))
	if _, err := l.s.DB().Exec(`ALTER TABLE cdc_db_orders_log ADD COLUMN v VARCHAR`); err != nil {
		t.Fatal(err)
	}
	// The sink tries the failed table again on its own, after a wait that
	// doubled at each failure meanwhile: a merge round before that try
	// merges what moved. Await the move, then merge.
	for deadline := time.Now().Add(time.Minute); dump(t, l.s.DB(), `SELECT count(*) FROM cdc_landing`)[0] != "0"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the landed change of orders did not move within a minute of its column coming back")
		}
	}
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|b")
	marks(hour("cdc_db_orders", 0), hour("cdc_db_orders", 1), hour("cdc_db_orders", 2),
		hour("cdc_db_users", 0), hour("cdc_db_users", 1), hour("cdc_db_users", 2))
}

// cdc.idle counts a partition as having reached now - idle when nothing
// has loaded on it for idle: by the ledger, not by what moved. A
// partition catching up on a backlog whose changes land but do not move
// (a table whose moves fail; equally between two moves when idle <
// distribute_every) is not idle: its other tables are not marked done
// while their changes of those hours are still behind in Kafka.
func TestMarkReadyPartitionThatIsLoadingIsNotIdle(t *testing.T) {
	ctx := context.Background()
	l, h := ordersCannotMove(t)
	// That load and move were an hour ago.
	for _, q := range []string{`UPDATE cdc_ledger SET loaded_at = loaded_at - INTERVAL 1 HOUR`,
		`UPDATE cdc_routes_reached SET loaded_at = loaded_at - INTERVAL 1 HOUR`} {
		if _, err := l.s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	const idle = 30 * time.Minute
	// Catching up, five hours behind: partition 0 loads the orders'
	// change of h+20m now (it lands, and cannot move). The users' next
	// change, of h+30m, is behind it in Kafka, not loaded yet.
	l.at = h.Add(20 * time.Minute)
	l.change(0, "orders", "u", 102, row(1, "b"), "id")
	if _, err := l.s.Load(ctx, l.stage()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.merger.MarkReady(ctx, Marking{Now: time.Now(), Idle: idle}); err != nil {
		t.Fatal(err)
	}
	// Partition 0 loaded just now: it is not idle, and reached h+20m at
	// most: no hour of users is complete (its change of h+30m is to come).
	l.want(`SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`)
}

// ordersCannotMove loads a change of orders and one of users on partition
// 0 at h+10m (h five hours ago), merges them, then breaks orders'
// changelog table (a column its changes hold dropped), so that its later
// changes cannot move. The loader moves after every load, and tries a
// broken table again at each.
func ordersCannotMove(t *testing.T) (*changeLoader, time.Time) {
	t.Helper()
	l := newChangeLoader(t, func(o *duckdb.Options) { o.DistributeEvery = time.Nanosecond })
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.flush()
	l.mustMerge()
	if _, err := l.s.DB().Exec(`ALTER TABLE cdc_db_orders_log DROP COLUMN v`); err != nil {
		t.Fatal(err)
	}
	return l, h
}

// A heartbeat of T proves that every change made before T is in Kafka
// below the ends listed after it, on every partition of its topics. A
// table is complete to T only if each partition that may carry its
// changes has loaded to its end; MarkReady used to check only the
// partitions the table's rows had come from (<table>_routes_reached).
// Here orders has loaded one change, of h+10m, on partition 0, which has
// loaded to its end; partition 1 holds orders' change of h+20m, in Kafka
// below its listed end (1) and not loaded yet (its worker is behind);
// the heartbeat of h+3h05m is on partition 2. Orders was marked done for
// h, h+1 and h+2 although the heartbeat's own listing showed partition 1
// behind, and orders' change of h+20m then arrived in an hour marked
// done. Now nothing is marked.
func TestMarkReadyHeartbeatWaitsForPartitionsOfItsTopicsBehind(t *testing.T) {
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	beatAt := h.Add(3*time.Hour + 5*time.Minute)
	l.at = beatAt
	l.change(2, "heartbeat", "u", 102, row(1, "beat"), "id")
	l.flush()
	l.mustMerge()
	beat := cdc.Beat{SourceTime: beatAt.UnixMicro(), Topics: regexp.MustCompile(`^dbserver1$`)}
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "dbserver1", Partition: 0}: {End: 1},
			{Topic: "dbserver1", Partition: 1}: {End: 1}, // orders' change of h+20m, not loaded
			{Topic: "dbserver1", Partition: 2}: {End: 1},
		}, nil
	}
	l.wantMarks(Marking{Now: time.Now(), Beats: []cdc.Beat{beat}, Ends: ends}, "cdc_db_orders")
}

// wantMarks marks the done hours by m and checks table's, each as its
// table and hour (2006-01-02 15).
func (l *changeLoader) wantMarks(m Marking, table string, want ...string) {
	l.t.Helper()
	if _, err := l.merger.MarkReady(context.Background(), m); err != nil {
		l.t.Fatal(err)
	}
	l.want(`SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready WHERE "table" = '`+table+`' ORDER BY ALL`, want...)
}

// hoursAgo is a change loader and the hour five hours ago, where the
// tests' source times start: hours that can be marked done, recent
// enough for cdc.idle's wall-clock rule.
func hoursAgo(t testing.TB) (*changeLoader, time.Time) {
	t.Helper()
	return newChangeLoader(t), time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
}

// ordersMerged is hoursAgo with orders' change of h+10m loaded, moved and
// merged.
func ordersMerged(t testing.TB) (*changeLoader, time.Time) {
	t.Helper()
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	return l, h
}

// partitionOneBehind lists dbserver1's partition 0 loaded to its end (2)
// and partition 1 holding a record none of which loaded (orders' change
// of h+20m, in the tests that use it).
func partitionOneBehind(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
	return map[sink.TopicPartition]Offsets{{Topic: "dbserver1", Partition: 0}: {End: 2}, {Topic: "dbserver1", Partition: 1}: {End: 1}}, nil
}

// usersPastOrders is hoursAgo with orders' change of h+10m and users' of
// h+3h05m loaded on partition 0, moved and merged: partition 0 is past
// the first hours, and orders waits only for the other partitions.
func usersPastOrders(t testing.TB) *changeLoader {
	t.Helper()
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.flush()
	l.mustMerge()
	return l
}

// A MySQL change's source time is when its statement began, and its
// transaction comes in the binlog at its commit: a transaction begun at
// h+59m59s that commits after users' change of h+1h00m30s comes after it.
// With Marking.Delay (cdc.ready_delay) an hour waits for its partitions to
// be that far past its end; without, h is marked at once.
func TestMarkReadyWaitsTheDelayPastTheHour(t *testing.T) {
	for _, delay := range []time.Duration{0, time.Minute} {
		l, h := ordersMerged(t)
		l.at = h.Add(time.Hour + 30*time.Second)
		l.change(0, "users", "c", 101, row(1, "u"), "id")
		l.flush()
		l.mustMerge()
		var want []string
		if delay == 0 {
			want = []string{"cdc_db_orders|" + h.Format("2006-01-02 15")}
		}
		l.wantMarks(Marking{Now: time.Now(), Delay: delay}, "cdc_db_orders", want...)
		if delay == 0 {
			continue
		}
		l.at = h.Add(time.Hour + 2*time.Minute) // the late transaction, then more
		l.change(0, "orders", "c", 102, row(2, "b"), "id")
		l.flush()
		l.mustMerge()
		l.wantMarks(Marking{Now: time.Now(), Delay: delay}, "cdc_db_orders", "cdc_db_orders|"+h.Format("2006-01-02 15"))
	}
}

// A source time in the future (a source clock ahead of ours, a row with a
// wrong time) moves its partition no further than now: an hour that has
// not ended is never marked done, or a batch job waiting on it would run
// before its changes arrive.
func TestMarkReadyMarksNoHourNotEnded(t *testing.T) {
	l, h := ordersMerged(t)
	now := time.Now().UTC()
	l.at = now.Add(3 * time.Hour)
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.flush()
	l.mustMerge()
	var want []string
	for at := h; !at.Add(time.Hour).After(now); at = at.Add(time.Hour) {
		want = append(want, "cdc_db_orders|"+at.Format("2006-01-02 15"))
	}
	l.wantMarks(Marking{Now: now}, "cdc_db_orders", want...)
}

// A change that comes after its hour was marked (a transaction longer
// than cdc.ready_delay, a source clock behind, a connector further behind
// than cdc.idle or a heartbeat's lag allow) merges into the model as any
// other; the mark stays, and later hours are marked on from it (README
// "Done marks").
func TestMarkReadyLateChangeMergesAndTheMarkStays(t *testing.T) {
	l, h := hoursAgo(t)
	l.at = h.Add(10 * time.Minute)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.at = h.Add(3*time.Hour + 5*time.Minute)
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.flush()
	l.mustMerge()
	at := func(n int) string {
		return "cdc_db_orders|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders", at(0), at(1), at(2))
	l.at = h.Add(20 * time.Minute) // late, in h
	l.change(0, "orders", "c", 102, row(2, "late"), "id")
	l.at = h.Add(4*time.Hour + 5*time.Minute)
	l.change(0, "users", "u", 103, row(1, "u2"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a", "2|late")
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders", at(0), at(1), at(2), at(3))
}
