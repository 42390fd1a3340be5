package duckdb

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// wantCounts checks each query's count.
func wantCounts(t *testing.T, s *Sink, when string, want map[string]int64) {
	t.Helper()
	for q, n := range want {
		if got := count(t, s, q); got != n {
			t.Errorf("%s, %s: %d, want %d", when, q, got, n)
		}
	}
}

// routedRowCount counts the rows verify counts: every changelog table's
// and the landed ones.
func routedRowCount(t *testing.T, s *Sink) int64 {
	t.Helper()
	union, err := s.RoutedRows(context.Background(), s.DB())
	if err != nil {
		t.Fatal(err)
	}
	return count(t, s, "SELECT count(*) FROM "+union)
}

// Landed rows are durable: a process that stops (or dies) before moving
// them leaves them landed, counted by verify, and the next process moves
// them, once.
func TestLandedRowsMoveAfterARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := routedSink(t, dir)
	mustLoad(t, s, routedBatch(0, 9, 5))
	s.Close() // no Finish: as a process killed after the load
	s = routedSink(t, dir)
	wantCounts(t, s, "after the restart", map[string]int64{`SELECT count(*) FROM cdc_landing`: 20, `SELECT count(*) FROM cdc_db_orders_log`: 0})
	if got := routedRowCount(t, s); got != 20 {
		t.Errorf("verify counts %d rows, want 20", got)
	}
	if n, err := s.Distribute(ctx); err != nil || n != 20 {
		t.Fatalf("Distribute: %d, %v; want 20 rows", n, err)
	}
	if n, err := s.Distribute(ctx); err != nil || n != 0 {
		t.Fatalf("Distribute again: %d, %v; want nothing to move", n, err)
	}
	wantCounts(t, s, "after the move", map[string]int64{`SELECT count(*) FROM cdc_landing`: 0, `SELECT count(*) FROM cdc_db_orders_log`: 10,
		`SELECT count(note) FROM cdc_db_orders_log`: 5, `SELECT count(*) FROM cdc_db_users_log`: 10})
	if got := routedRowCount(t, s); got != 20 {
		t.Errorf("verify counts %d rows, want 20", got)
	}
}

// A load moves the landed rows once the oldest has waited
// DistributeEvery, and not before.
func TestLoadsMoveLandedRowsWhenDue(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.DistributeEvery = time.Hour })
	mustLoad(t, s, routedBatch(0, 4, 100))
	wantCounts(t, s, "an hour not passed", map[string]int64{`SELECT count(*) FROM cdc_landing`: 10})
	s.opt.DistributeEvery = time.Nanosecond
	mustLoad(t, s, routedBatch(5, 9, 100))
	wantCounts(t, s, "the wait passed", map[string]int64{`SELECT count(*) FROM cdc_landing`: 0, `SELECT count(*) FROM cdc_db_users_log`: 10})
}

// A table whose rows cannot move (its changelog table lost a column the
// rows hold) keeps them landed and is named in the error, while the
// other tables' rows move; they move once the table is mended.
func TestLandedRowsOfABrokenTableWaitAlone(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	mustLoad(t, s, routedBatch(0, 4, 100))
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, routedBatch(5, 9, 7))
	if _, err := s.DB().Exec(`ALTER TABLE cdc_db_orders_log DROP COLUMN note`); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		n, err := s.Distribute(ctx)
		if err == nil || !strings.Contains(err.Error(), "changelog table cdc_db_orders_log") {
			t.Fatalf("round %d: Distribute's error %v, want one naming cdc_db_orders_log", round, err)
		}
		if want := []int64{5, 0}[round]; n != want {
			t.Errorf("round %d: %d rows moved, want the users' %d", round, n, want)
		}
		wantCounts(t, s, fmt.Sprint("round ", round), map[string]int64{
			`SELECT count(*) FROM cdc_landing WHERE log_table = 'cdc_db_orders_log'`: 5,
			`SELECT count(*) FROM cdc_landing WHERE log_table = 'cdc_db_users_log'`:  0,
			`SELECT count(*) FROM cdc_db_users_log`:                                  10,
			`SELECT count(*) FROM cdc_db_orders_log`:                                 5,
			// What the orders reached is what moved: offsets 0..4.
			`SELECT count(*) FROM cdc_routes_reached WHERE log_table = 'cdc_db_orders_log' AND next_offset = 5`: 1,
		})
		if got := routedRowCount(t, s); got != 20 {
			t.Errorf("round %d: verify counts %d rows, want 20", round, got)
		}
	}
	// Tried again once its wait has passed, and failing, it waits twice as
	// long.
	f := s.landingFailed["cdc_db_orders_log"]
	f.retry = time.Now()
	s.landingFailed["cdc_db_orders_log"] = f
	if _, err := s.Distribute(ctx); err == nil {
		t.Fatal("Distribute of the broken table once due: no error")
	}
	if got := s.landingFailed["cdc_db_orders_log"].wait; got != 2*DefaultDistributeEvery {
		t.Errorf("wait after a second failure: %v, want %v", got, 2*DefaultDistributeEvery)
	}
	if _, err := s.DB().Exec(`ALTER TABLE cdc_db_orders_log ADD COLUMN note VARCHAR`); err != nil {
		t.Fatal(err)
	}
	// The table is tried again once its wait has passed, not before.
	if n, err := s.Distribute(ctx); err == nil || n != 0 {
		t.Fatalf("Distribute within the broken table's wait: %d, %v; want nothing moved and the table named", n, err)
	}
	f = s.landingFailed["cdc_db_orders_log"]
	f.retry = time.Now()
	s.landingFailed["cdc_db_orders_log"] = f
	if n, err := s.Distribute(ctx); err != nil || n != 5 {
		t.Fatalf("Distribute after the mend: %d, %v; want the orders' 5", n, err)
	}
	wantCounts(t, s, "mended", map[string]int64{`SELECT count(*) FROM cdc_landing`: 0, `SELECT count(note) FROM cdc_db_orders_log`: 3,
		`SELECT count(*) FROM cdc_routes_reached WHERE next_offset = 10`: 2})
}

// A landed value its column's type does not take stops its table's move
// with the reason, as a staged file's did its load, instead of becoming
// a null.
func TestLandedValueItsTypeDoesNotTakeIsNoNull(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 1, Records: 2}}}
	items := b.RoutedTo("cdc_db_items_log", sink.SourceTable{Database: "db", Name: "items"})
	items.AddColumn(sink.Column{Name: "qty", Type: schema.Int64})
	for o, qty := range []string{"3", `"three"`} {
		items.Rows = fmt.Appendf(items.Rows, `{"qty":%s,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":%d,"kindex":0}`+"\n", qty, o)
	}
	mustLoad(t, s, b)
	_, err := s.Distribute(ctx)
	if err == nil || !strings.Contains(err.Error(), `holds a value its column's type does not take`) || !strings.Contains(err.Error(), `"three"`) {
		t.Fatalf("Distribute: %v; want the row's value named", err)
	}
	wantCounts(t, s, "refused", map[string]int64{`SELECT count(*) FROM cdc_landing`: 2, `SELECT count(*) FROM cdc_db_items_log`: 0})
}

// The landing table's rows are stored uncompressed: they leave at the next
// move, and compressing them at a checkpoint would be work thrown away.
func TestLandedRowsAreNotCompressed(t *testing.T) {
	s := routedSink(t, t.TempDir())
	mustLoad(t, s, routedBatch(0, 999, 100))
	if _, err := s.DB().Exec("CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, s, "checkpointed", map[string]int64{
		`SELECT (count(*) > 0)::INTEGER FROM pragma_storage_info('cdc_landing') WHERE segment_type = 'VARCHAR'`:                    1,
		`SELECT count(*) FROM pragma_storage_info('cdc_landing') WHERE segment_type = 'VARCHAR' AND compression <> 'Uncompressed'`: 0,
	})
}

// Routed rows staged with zstd land and move as uncompressed ones do.
func TestLandedRowsStagedWithZstd(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir(), func(o *Options) { o.Zstd = true })
	files := stage(t, s, routedBatch(0, 99, 50))
	if p := files[0].Routed[0].Path; !strings.HasSuffix(p, ".routed.zst") {
		t.Fatalf("staged %s, want a .routed.zst file", p)
	}
	if _, err := s.Load(ctx, files); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Distribute(ctx); err != nil || n != 200 {
		t.Fatalf("Distribute: %d, %v; want 200 rows", n, err)
	}
	wantCounts(t, s, "moved", map[string]int64{`SELECT count(note) FROM cdc_db_orders_log`: 50, `SELECT count(*) FROM cdc_db_users_log`: 100})
}

// Each table's landed rows move into it whatever order the database's
// collation gives the tables' names (a table's number in the move is
// DuckDB's, read back from it, not Go's order of the names).
func TestLandedRowsMoveToTheirTableUnderAnyCollation(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	if _, err := s.DB().Exec(`SET GLOBAL default_collation = 'nocase'`); err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 1, Records: 2}}}
	for o, table := range []string{"cdc_B_log", "cdc_a_log"} {
		rows := b.RoutedTo(table, sink.SourceTable{Database: "db", Name: table})
		rows.AddColumn(sink.Column{Name: "v", Type: schema.String})
		rows.Rows = fmt.Appendf(rows.Rows, `{"v":%q,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":%d,"kindex":0}`+"\n", table, o)
	}
	mustLoad(t, s, b)
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, s, "moved", map[string]int64{`SELECT count(*) FROM "cdc_B_log" WHERE v = 'cdc_B_log'`: 1, `SELECT count(*) FROM cdc_a_log WHERE v = 'cdc_a_log'`: 1})
}

// A routed row whose JSON holds a carriage return as whitespace (valid
// JSON: a decoder passes a message's object through as it was written)
// lands and moves: DuckDB's CSV reader of the landing lines would end a
// line there, and the load fail at every retry, stalling every table of
// the partition.
func TestLandedRowWithACarriageReturn(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 0, Records: 1}}}
	docs := b.RoutedTo("cdc_db_docs_log", sink.SourceTable{Database: "db", Name: "docs"})
	docs.AddColumn(sink.Column{Name: "id", Type: schema.Int64})
	docs.AddColumn(sink.Column{Name: "doc", Type: schema.JSON})
	docs.Rows = []byte("{\"id\":1,\"doc\":{\r\"a\":1},\"cdc_op\":\"c\",\"ktopic\":\"t\",\"kpartition\":0,\"koffset\":0,\"kindex\":0}\n")
	b.MaxLine = len(docs.Rows)
	if _, err := s.Load(ctx, stage(t, s, b)); err != nil {
		t.Fatalf("load of a row with a carriage return between JSON tokens: %v", err)
	}
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, `SELECT count(*) FROM cdc_db_docs_log WHERE doc->>'a' = '1'`); got != 1 {
		t.Errorf("rows moved: %d, want 1", got)
	}
}

// Prepare removes the landing files an earlier process staged and never
// loaded (killed between Stage and Load), with zstd or not.
func TestPrepareRemovesStaleLandingFiles(t *testing.T) {
	for _, zstd := range []bool{false, true} {
		dir := t.TempDir()
		opt := testOptions(dir)
		opt.Table, opt.Routed, opt.Zstd = "cdc", true, zstd
		s := openWith(t, opt)
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		files := stage(t, s, routedBatch(0, 9, 5)) // killed before the load
		s.Close()
		s = openWith(t, opt)
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if _, err := os.Stat(f.Routed[0].Path); err == nil { // one file per batch
				t.Errorf("zstd %v: stale staged file %s left after Prepare", zstd, f.Routed[0].Path)
			}
		}
	}
}

// The landed rows of a source that goes quiet after a load (no load
// comes, no merge round) move once DistributeEvery has passed.
func TestLandedRowsOfAQuietSourceMove(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Routed = "cdc", true
	opt.DistributeEvery = 50 * time.Millisecond
	s := openWith(t, opt)
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, routedBatch(0, 4, 100))
	// The source is quiet: no load comes. The move does, soon after
	// distribute_every; a generous deadline fails without it.
	for deadline := time.Now().Add(10 * time.Second); count(t, s, `SELECT count(*) FROM cdc_landing`) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the landed rows of a quiet source did not move within 10s with distribute_every 50ms")
		}
		time.Sleep(10 * time.Millisecond)
	}
	wantCounts(t, s, "moved", map[string]int64{`SELECT count(*) FROM cdc_db_orders_log`: 5})
}

// The rows a killed process left landed move soon after the next one
// starts loading (MoveLanded: tracelake run, after Prepare), even when its
// source is quiet and no load comes; a process that only prepares the
// tables (a command) moves nothing. Found by a review.
func TestLandedRowsOfAQuietSourceMoveAfterARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := routedSink(t, dir, func(o *Options) { o.DistributeEvery = time.Hour })
	mustLoad(t, s, routedBatch(0, 4, 100))
	s.Close() // no Finish: a process killed after its load
	s = routedSink(t, dir, func(o *Options) { o.DistributeEvery = time.Hour })
	if s.moveTimer != nil {
		t.Fatal("Prepare alone arranged a move")
	}
	if err := s.MoveLanded(ctx); err != nil {
		t.Fatal(err)
	}
	// Due at once (the rows waited the downtime), on the move timer; a
	// generous deadline fails only without a move.
	for deadline := time.Now().Add(10 * time.Second); count(t, s, `SELECT count(*) FROM cdc_landing`) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("10s after a restart, %d changes are still landed", count(t, s, `SELECT count(*) FROM cdc_landing`))
		}
	}
	wantCounts(t, s, "moved", map[string]int64{`SELECT count(*) FROM cdc_db_orders_log`: 5, `SELECT count(*) FROM cdc_db_users_log`: 5})
	if err := s.MoveLanded(ctx); err != nil || s.moveTimer != nil {
		t.Fatalf("nothing landed: MoveLanded %v, a move arranged %v", err, s.moveTimer != nil)
	}
}

// Verify (which opens the sink without Prepare) counts the rows of a
// database written before the landing table, which has none.
func TestRoutedRowsOfADatabaseFromBeforeTheLandingTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := routedSink(t, dir)
	mustLoad(t, s, routedBatch(0, 4, 100))
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}
	// As the release before: no landing table.
	if _, err := s.DB().Exec(`DROP TABLE cdc_landing`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	opt := testOptions(dir)
	opt.Table, opt.Routed = "cdc", true
	s = openWith(t, opt) // verify: no Prepare
	union, err := s.RoutedRows(ctx, s.DB())
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := s.DB().QueryRow("SELECT count(*) FROM " + union).Scan(&n); err != nil {
		t.Fatalf("verify's count over a database from before the landing table: %v", strings.SplitN(err.Error(), "\n", 2)[0])
	}
	if n != 10 {
		t.Errorf("rows: %d, want 10", n)
	}
}

// A table whose rows could not move is tried again once its wait has
// passed, also when no load and no merge round comes (a quiet source,
// merge.every off): the next try is a move of its own.
func TestMendedTableOfAQuietSourceMoves(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir(), func(o *Options) { o.DistributeEvery = 50 * time.Millisecond })
	mustLoad(t, s, routedBatch(0, 4, 0))
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().Exec(`ALTER TABLE cdc_db_orders_log DROP COLUMN note`); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, s, routedBatch(5, 9, 0))
	if _, err := s.Distribute(ctx); err == nil {
		t.Fatal("Distribute with the orders' table broken: no error")
	}
	if _, err := s.DB().Exec(`ALTER TABLE cdc_db_orders_log ADD COLUMN note VARCHAR`); err != nil {
		t.Fatal(err)
	}
	// The source is quiet from here: no load, no merge round. The orders'
	// wait is 50ms; give it 100 times that. The move commits, then clears
	// the table from Unmoved(): both are awaited.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		landed, unmoved := count(t, s, `SELECT count(*) FROM cdc_landing`), s.Unmoved()
		if landed == 0 && len(unmoved) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("5s after the table was mended (wait 50ms): %d rows still landed, Unmoved() = %v", landed, unmoved)
		}
	}
}

// countingHandler counts the log records at level Error.
type countingHandler struct{ errors atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelError {
		h.errors.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// A move that fails whole (here the landing table is gone) is tried again
// a wait later, not at once and again: without a load or a merge round,
// the timer makes one try per DistributeEvery.
func TestAFailingMoveIsTriedAgainAWaitLater(t *testing.T) {
	h := &countingHandler{}
	s := routedSink(t, t.TempDir(), func(o *Options) { o.DistributeEvery = 50 * time.Millisecond; o.Log = slog.New(h) })
	mustLoad(t, s, routedBatch(0, 4, 100))
	if _, err := s.DB().Exec(`DROP TABLE cdc_landing`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); h.errors.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed moves in 5s with distribute_every 50ms, want a try every 50ms", h.errors.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	start, tries := time.Now(), h.errors.Load()
	time.Sleep(500 * time.Millisecond)
	// At most one try per 50ms (10 in 500ms), with room for timers firing late.
	if n := h.errors.Load() - tries; n > 15 {
		t.Errorf("%d tries in %v with distribute_every 50ms: the failing move is tried at once and again", n, time.Since(start).Round(time.Millisecond))
	}
}

// Moves take at most about a tenth of the time: after a move that took
// long (a thousand tables), the next waits nine times as long, if that is
// longer than DistributeEvery.
func TestMovesWaitNineTimesTheirLength(t *testing.T) {
	s := routedSink(t, t.TempDir(), func(o *Options) { o.DistributeEvery = time.Second })
	now := time.Now()
	s.landedSince = now
	for took, want := range map[time.Duration]time.Duration{0: time.Second, 100 * time.Millisecond: time.Second, 3 * time.Second: 27 * time.Second} {
		s.moveTook = took
		if at, ok := s.nextMove(); !ok || at.Sub(now) != want {
			t.Errorf("after a move of %v: next move in %v, want %v", took, at.Sub(now), want)
		}
	}
}

// A changelog row's Timestamp of infinity or -infinity (change capture's
// PostgreSQL infinite dates and timestamps, schema.TimestampInfinity)
// moves into its table as DuckDB's 'infinity' and '-infinity', where
// make_timestamp refuses int64's bounds and the move failed.
func TestLandedInfiniteTimestampIsInfinity(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 2, Records: 3}}}
	items := b.RoutedTo("cdc_db_items_log", sink.SourceTable{Database: "db", Name: "items"})
	items.AddColumn(sink.Column{Name: "valid_to", Type: schema.Timestamp})
	for o, v := range []int64{schema.TimestampInfinity, schema.TimestampNegativeInfinity, 1700000000000000} {
		items.Rows = fmt.Appendf(items.Rows, `{"valid_to":%d,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":%d,"kindex":0}`+"\n", v, o)
	}
	mustLoad(t, s, b)
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, s, "moved", map[string]int64{
		`SELECT count(*) FROM cdc_db_items_log WHERE valid_to = 'infinity'::TIMESTAMP AND koffset = 0`:           1,
		`SELECT count(*) FROM cdc_db_items_log WHERE valid_to = '-infinity'::TIMESTAMP AND koffset = 1`:          1,
		`SELECT count(*) FROM cdc_db_items_log WHERE valid_to = TIMESTAMP '2023-11-14 22:13:20' AND koffset = 2`: 1,
	})
}
