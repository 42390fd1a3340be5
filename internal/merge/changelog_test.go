package merge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// changeLoader loads Debezium change events (schemas off) through the
// pipeline's changelog decoder into a real DuckDB sink's changelog tables,
// one load per flush, as a run does.
type changeLoader struct {
	t       testing.TB
	s       *duckdb.Sink
	dec     *pipeline.ChangelogDecoder
	next    map[int32]int64
	pending map[int32][]*kgo.Record
	merger  *ChangelogMerger
	// at is the source time of the changes queued next (Debezium's
	// source.ts_ms); 2023-11-14T22:13:20Z when zero.
	at time.Time
	// topic is the topic of the changes queued next; dbserver1 when "".
	// A flush must not queue two topics on one partition.
	topic string
}

func newChangeLoader(t testing.TB, with ...func(*duckdb.Options)) *changeLoader {
	t.Helper()
	return newFormatLoader(t, cdc.FormatDebezium, with...)
}

// newFormatLoader is newChangeLoader for changes of format (queued as
// they are with raw).
func newFormatLoader(t testing.TB, format cdc.Format, with ...func(*duckdb.Options)) *changeLoader {
	t.Helper()
	return newOptionsLoader(t, cdc.Options{Format: format}, with...)
}

// newOptionsLoader is newFormatLoader with the decoder's options.
func newOptionsLoader(t testing.TB, opts cdc.Options, with ...func(*duckdb.Options)) *changeLoader {
	t.Helper()
	dir := t.TempDir()
	opt := duckdb.Options{Path: filepath.Join(dir, "c.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: "cdc", Routed: true, Log: slog.New(slog.DiscardHandler)}
	for _, f := range with {
		f(&opt)
	}
	s, err := duckdb.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	dec, err := pipeline.NewChangelogDecoder(opts, s)
	if err != nil {
		t.Fatal(err)
	}
	names, err := cdc.NewDecoder(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &changeLoader{t: t, s: s, dec: dec, next: map[int32]int64{}, pending: map[int32][]*kgo.Record{},
		merger: NewChangelogMerger(NewMerger(s.DB(), slog.New(slog.DiscardHandler)), s, names)}
}

// change queues a Debezium event of db.<table> on partition p: op, the
// binlog position pos (file 1; none for a negative pos), the row (before
// image for a delete) and its key columns.
func (l *changeLoader) change(p int32, table, op string, pos int, row map[string]any, key ...string) {
	l.t.Helper()
	k := map[string]any{}
	for _, c := range key {
		k[c] = row[c]
	}
	ms := int64(1700000000000)
	if !l.at.IsZero() {
		ms = l.at.UnixMilli()
	}
	src := map[string]any{"connector": "mysql", "db": "db", "table": table, "file": "mysql-bin.000001", "pos": pos, "row": 0, "ts_ms": ms}
	if pos < 0 {
		delete(src, "file")
		delete(src, "pos")
	}
	v := map[string]any{"op": op, "ts_ms": ms, "source": src}
	if op == "d" {
		v["before"], v["after"] = row, nil
	} else {
		v["before"], v["after"] = nil, row
	}
	value, err := json.Marshal(v)
	if err != nil {
		l.t.Fatal(err)
	}
	var keyJSON []byte
	if len(key) > 0 {
		if keyJSON, err = json.Marshal(k); err != nil {
			l.t.Fatal(err)
		}
	}
	topic := l.topic
	if topic == "" {
		topic = "dbserver1"
	}
	l.pending[p] = append(l.pending[p], &kgo.Record{Topic: topic, Partition: p, Offset: l.next[p], Key: keyJSON, Value: value})
	l.next[p]++
}

// flush loads the queued events, one batch per partition, in one load,
// and moves them into their changelog tables.
func (l *changeLoader) flush() {
	l.t.Helper()
	if _, err := l.s.Load(context.Background(), l.stage()); err != nil {
		l.t.Fatal(err)
	}
	l.distribute()
}

// distribute moves the landed changes into their changelog tables.
func (l *changeLoader) distribute() {
	l.t.Helper()
	if _, err := l.s.Distribute(context.Background()); err != nil {
		l.t.Fatal(err)
	}
}

// stage stages the queued events, one batch per partition.
func (l *changeLoader) stage() []sink.File {
	l.t.Helper()
	ctx := context.Background()
	var files []sink.File
	for p, recs := range l.pending {
		b := &sink.Batch{}
		var rows int64
		for _, r := range recs {
			n, err := l.dec.AppendRows(b, r)
			if err != nil {
				l.t.Fatalf("decode %s: %v", r.Value, err)
			}
			rows += int64(n)
		}
		b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: recs[0].Topic, Partition: p},
			First: recs[0].Offset, Last: recs[len(recs)-1].Offset, Records: rows}}
		f, err := l.s.Stage(ctx, b)
		if err != nil {
			l.t.Fatal(err)
		}
		files = append(files, f)
	}
	clear(l.pending)
	return files
}

// mergeAll merges every changelog model with new rows once and returns
// each model's result or error by name.
func (l *changeLoader) mergeAll() (map[string]Result, map[string]error) {
	l.t.Helper()
	models, err := l.merger.Pending(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	res, errs := map[string]Result{}, map[string]error{}
	for _, m := range models {
		r, err := l.merger.Merge(context.Background(), m)
		if err != nil {
			errs[m.Name] = err
			continue
		}
		res[m.Name] = r
	}
	return res, errs
}

func (l *changeLoader) mustMerge() map[string]Result {
	l.t.Helper()
	res, errs := l.mergeAll()
	for name, err := range errs {
		l.t.Fatalf("merge %s: %v", name, err)
	}
	return res
}

func (l *changeLoader) want(q string, want ...string) {
	l.t.Helper()
	if got := dump(l.t, l.s.DB(), q); !slices.Equal(got, want) {
		l.t.Errorf("%s:\n got %q\nwant %q", q, got, want)
	}
}

func row(id int, v string) map[string]any { return map[string]any{"id": id, "v": v} }

// A changelog model is the latest row per key in source order, deletes
// applied: a second merge changes nothing, a change older than the
// model's row or than a delete (a late delivery, a snapshot read after
// the row changed) is not applied, a newer one is.
func TestChangelogModelLatestBySourcePosition(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 110, row(2, "b"), "id")
	l.change(0, "orders", "c", 120, row(3, "c"), "id")
	l.change(0, "orders", "u", 130, row(2, "b2"), "id")
	l.change(0, "orders", "d", 140, row(3, "c"), "id")
	l.flush()
	res := l.mustMerge()
	if r := res["cdc_db_orders"]; r.Read != 5 || r.Changed != 3 {
		t.Errorf("first merge: %+v, want 5 read, 3 keys changed", r)
	}
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a", "2|b2")
	// Registered, so that the read path keeps it the operator's.
	l.want(`SELECT model_table FROM cdc_routes WHERE log_table = 'cdc_db_orders_log'`, "cdc_db_orders")
	if res := l.mustMerge(); len(res) != 0 {
		t.Errorf("merge with nothing new: %v", res)
	}
	// Late: an update of 2 older than the model's row, a snapshot read of
	// 3 older than its delete; new: 1 updated, 4 inserted.
	l.change(0, "orders", "u", 125, row(2, "stale"), "id")
	l.change(0, "orders", "r", 90, row(3, "resurrected"), "id")
	l.change(0, "orders", "u", 150, row(1, "a2"), "id")
	l.change(0, "orders", "c", 160, row(4, "d"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a2", "2|b2", "4|d")
	// 3 inserted again after its delete comes back.
	l.change(0, "orders", "c", 170, row(3, "again"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a2", "2|b2", "3|again", "4|d")
	l.want(`SELECT count(*) FROM cdc_db_orders_tombstones`, "0")
}

// Within one increment the changes of a key on two partitions are
// ordered by their source position, not by Kafka, and a change delivered
// twice is applied once.
func TestChangelogModelOrdersAcrossPartitions(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "u", 300, row(1, "newest"), "id")
	l.change(1, "orders", "c", 100, row(1, "first"), "id")
	l.change(1, "orders", "u", 200, row(1, "middle"), "id")
	l.change(1, "orders", "u", 200, row(1, "middle"), "id") // delivered twice
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|newest")
}

// A column the source adds is added to the model; rows changed before it
// read null there.
func TestChangelogModelGrowsWithTheSource(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "c", 110, map[string]any{"id": 2, "v": "b", "note": "new"}, "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v, coalesce(note, '-') FROM cdc_db_orders`, "1|a|-", "2|b|new")
}

// A truncation removes every row changed before it, and what is changed
// after it stays; a change from before it delivered late is not applied.
func TestChangelogModelTruncate(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 110, row(2, "b"), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "t", 200, nil)
	l.change(0, "orders", "c", 210, row(3, "c"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "3|c")
	l.change(0, "orders", "u", 150, row(2, "late"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "3|c")
}

// A truncation at the same position as changes (Canal's (es, id, row):
// messages of one batch within one millisecond) is ordered against them
// by the log: what came before it is removed, in its merge or an
// earlier one, and what came after it stays.
func TestChangelogModelTruncateAtAnEqualPosition(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "c", 200, row(2, "b"), "id")
	l.change(0, "orders", "t", 200, nil)
	l.change(0, "orders", "c", 200, row(3, "c"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "3|c")
	// A second truncation at the position of the first removes what came
	// between them.
	l.change(0, "orders", "t", 200, nil)
	l.change(0, "orders", "c", 200, row(4, "d"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "4|d")
	// Merged in a round before the truncation's.
	l.change(0, "orders", "c", 300, row(5, "e"), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "t", 300, nil)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`)
}

// A truncation and changes at its position on different Kafka partitions
// (Canal sends a TRUNCATE, DDL, to partition 0 and hashes rows over the
// others) make the same model whether they are merged at once or one
// merge apart. The log does not order them, and the change stays; it went
// with the truncation when merged before it, and in one merge when its
// partition's number was lower.
func TestChangelogModelTruncateAtAnEqualPositionAcrossPartitionsAndMerges(t *testing.T) {
	for _, c := range []struct {
		name             string
		rowP, truncP     int32
		truncFirst, want bool // want: the row stays
	}{
		{"row on a higher partition merged first", 1, 0, false, true},
		{"row on a lower partition merged after", 0, 1, true, true},
	} {
		for _, split := range []bool{false, true} {
			l := newChangeLoader(t)
			l.change(0, "orders", "c", 100, row(1, "a"), "id")
			l.flush()
			l.mustMerge()
			first := func() { l.change(c.rowP, "orders", "c", 200, row(3, "c"), "id") }
			second := func() { l.change(c.truncP, "orders", "t", 200, nil) }
			if c.truncFirst {
				first, second = second, first
			}
			first()
			if split {
				l.flush()
				l.mustMerge()
			}
			second()
			l.flush()
			l.mustMerge()
			var want []string
			if c.want {
				want = []string{"3|c"}
			}
			if got := dump(t, l.s.DB(), `SELECT id, v FROM cdc_db_orders`); !slices.Equal(got, want) {
				t.Errorf("%s, split %v: model %q, want %q", c.name, split, got, want)
			}
		}
	}
}

// A table whose key changes, or that has none, stops alone with a reason;
// the other tables merge.
func TestChangelogModelFailureIsIsolated(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "users", "c", 100, row(1, "u"), "id")
	l.change(0, "nokey", "c", 100, row(1, "n"))
	l.flush()
	_, errs := l.mergeAll()
	if err := errs["cdc_db_nokey"]; err == nil || !strings.Contains(err.Error(), "without a primary key") {
		t.Errorf("table without a key: %v", err)
	}
	l.change(0, "orders", "u", 110, row(1, "b"), "id", "v")
	l.change(0, "users", "u", 110, row(1, "u2"), "id")
	l.flush()
	res, errs := l.mergeAll()
	if err := errs["cdc_db_orders"]; err == nil || !strings.Contains(err.Error(), "primary key") {
		t.Errorf("key changed: %v", err)
	}
	if r, ok := res["cdc_db_users"]; !ok || r.Changed != 1 {
		t.Errorf("the other table: %+v (errors %v)", r, errs)
	}
	l.want(`SELECT id, v FROM cdc_db_users`, "1|u2")
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a")
}

// A changelog table dropped by hand holds back its own changes alone,
// also when they bring a column the table would gain: adding it failed
// the load, of every table, at each retry. Its changes stay landed and
// its model is reported failed, as when it lacks a column they hold.
func TestChangelogTableDroppedByHandHoldsBackItsOwnChanges(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "users", "c", 101, row(1, "u"), "id")
	l.flush()
	l.mustMerge()
	if _, err := l.s.DB().Exec(`DROP TABLE cdc_db_orders_log`); err != nil {
		t.Fatal(err)
	}
	l.change(0, "orders", "c", 102, map[string]any{"id": 2, "v": "b", "note": "new"}, "id")
	l.change(0, "users", "c", 103, row(2, "v"), "id")
	if _, err := l.s.Load(context.Background(), l.stage()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Distribute(context.Background()); err == nil || !strings.Contains(err.Error(), "cdc_db_orders_log") {
		t.Errorf("the move: %v", err)
	}
	_, errs := l.mergeAll()
	if err := errs["cdc_db_orders"]; err == nil || !strings.Contains(err.Error(), "cdc_db_orders_log") {
		t.Errorf("the dropped table's model: %v", err)
	}
	l.want(`SELECT id, v FROM cdc_db_users`, "1|u", "2|v")
	l.want(`SELECT log_table, count(*) FROM cdc_landing GROUP BY ALL`, "cdc_db_orders_log|1")
}

// A merge that fails midway leaves the model, its tombstones and its
// watermark as they were: the next merge applies the increment once.
func TestChangelogModelFailedMergeRollsBack(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 110, row(2, "b"), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "d", 120, row(1, "a"), "id")
	l.change(0, "orders", "u", 130, row(2, "b2"), "id")
	l.flush()
	models, err := l.merger.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	failAfterMerge = func() error { cancel(); return fmt.Errorf("injected") }
	_, err = l.merger.Merge(ctx, models[0])
	failAfterMerge = nil
	if err == nil {
		t.Fatal("the failed merge reported no error")
	}
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|a", "2|b")
	if r := l.mustMerge()["cdc_db_orders"]; r.Read != 2 {
		t.Errorf("merge after the failure read %d rows, want 2", r.Read)
	}
	l.want(`SELECT id, v FROM cdc_db_orders`, "2|b2")
}

// Pending finds the tables a load reached past their models' watermarks:
// every table before its first merge, none after, then only the table
// that changed — also when the load's records reached it on one of
// several partitions and another table on the other.
func TestChangelogPendingTables(t *testing.T) {
	l := newChangeLoader(t)
	pending := func(want ...string) {
		t.Helper()
		models, err := l.merger.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range models {
			got = append(got, m.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("pending: %q, want %q", got, want)
		}
	}
	pending()
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 101, row(2, "a"), "id")
	l.change(0, "users", "c", 102, row(1, "u"), "id")
	l.change(1, "orders", "c", 103, row(3, "a"), "id")
	l.flush()
	pending("cdc_db_orders", "cdc_db_users")
	l.mustMerge()
	pending()
	l.change(1, "users", "u", 104, row(1, "u2"), "id")
	l.change(1, "users", "u", 105, row(1, "u3"), "id")
	l.flush()
	pending("cdc_db_users")
	if r := l.mustMerge()["cdc_db_users"]; r.Read != 2 {
		t.Errorf("merge of users: %+v, want 2 rows read", r)
	}
	pending()
}

// The model of source table audit_log is named cdc_db_audit_log, the
// changelog table's name of source table audit. One process refuses the
// second of the two; but a restarted one knew only the registry's
// changelog names, not their models' names: audit's changes were routed
// to cdc_db_audit_log, whose CREATE TABLE then failed every load of every
// table at each retry (or, before the model was made, its merge deleted
// and inserted rows of audit's changelog table). A restarted process now
// refuses them as the first one does.
func TestChangelogModelNameOwnedAcrossRestarts(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "audit_log", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_audit_log`, "1|a")
	// Another process, the same database file.
	dec, err := pipeline.NewChangelogDecoder(cdc.Options{Format: cdc.FormatDebezium}, l.s)
	if err != nil {
		t.Fatal(err)
	}
	l.dec = dec
	l.change(0, "audit", "c", 110, row(2, "b"), "id")
	b := &sink.Batch{}
	_, err = l.dec.AppendRows(b, l.pending[0][0])
	if err == nil || !strings.Contains(err.Error(), "cdc_db_audit_log") {
		t.Fatalf("a change of db.audit, whose changelog name is db.audit_log's model: %v, want it refused", err)
	}
	clear(l.pending)
	l.change(0, "audit_log", "u", 120, row(1, "a2"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_audit_log`, "1|a2")
}

// A change without a position (Maxwell's bootstrap rows, or all its rows
// with output_binlog_position off) sorts before every position, as
// cdc.Position says, and within one increment it did; but against the
// model or a tombstone from an earlier merge it won: a bootstrap row read
// before a key's delete, merged after it, brought the row back, and one
// read before an update undid it. The same changes now make the same
// model whether they are merged at once or one merge apart.
func TestChangelogModelChangeWithoutPositionIsOldest(t *testing.T) {
	changes := func(l *changeLoader, split bool) {
		l.change(0, "orders", "c", 100, row(1, "a"), "id")
		l.change(0, "orders", "d", 120, row(1, "a"), "id")
		l.change(0, "orders", "u", 130, row(2, "b2"), "id")
		l.change(0, "orders", "u", 140, row(4, "d2"), "id")
		if split {
			l.flush()
			l.mustMerge()
		}
		l.change(0, "orders", "r", -1, row(1, "a"), "id")
		l.change(0, "orders", "r", -1, row(2, "b"), "id")
		l.change(0, "orders", "r", -1, row(3, "c"), "id")
		l.flush()
		l.mustMerge()
		// Without positions, Kafka order: the later one wins.
		l.change(0, "orders", "r", -1, row(3, "c2"), "id")
		l.flush()
		l.mustMerge()
	}
	for _, split := range []bool{false, true} {
		l := newChangeLoader(t)
		changes(l, split)
		l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "2|b2", "3|c2", "4|d2")
	}
}

// A registered changelog table whose model would be named like another
// changelog table (source tables orders and orders_log) gets no model,
// with a warning, and holds back no other table's.
func TestChangelogModelNamedLikeAChangelogTableIsLeftOut(t *testing.T) {
	l := newChangeLoader(t)
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	if _, err := l.s.DB().Exec(`CREATE TABLE cdc_db_orders_log_log AS SELECT * FROM cdc_db_orders_log;
		INSERT INTO cdc_routes (log_table, source_database, source_schema, source_table, first_seen) VALUES ('cdc_db_orders_log_log', 'db', '', 'orders_log', now())`); err != nil {
		t.Fatal(err)
	}
	models, err := l.merger.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 1 || models[0].Name != "cdc_db_orders" {
		t.Errorf("models: %+v, want cdc_db_orders alone", models)
	}
}

// A column inferred as an integer (Debezium without schemas) that later
// gets a fraction becomes its exact text, in the changelog table and the
// model, and integers still load into it as theirs.
func TestChangelogModelWidensAnInferredInteger(t *testing.T) {
	l := newChangeLoader(t)
	price := func(id int, p any) map[string]any { return map[string]any{"id": id, "price": p} }
	l.change(0, "orders", "c", 100, price(1, 10), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "c", 110, price(2, 7), "id")
	l.change(0, "orders", "c", 120, price(3, json.Number("12.50")), "id")
	l.change(1, "orders", "c", 130, price(4, 8), "id")
	l.flush()
	l.mustMerge()
	l.change(0, "orders", "u", 140, price(1, 11), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT table_name, data_type FROM information_schema.columns WHERE column_name = 'price'`,
		"cdc_db_orders_log|VARCHAR", "cdc_db_orders|VARCHAR") // sorted
	l.want(`SELECT id, price FROM cdc_db_orders ORDER BY id`, "1|11", "2|7", "3|12.50", "4|8")
}

// A load that widens a column and then fails rolls the widening back
// with it; its retry widens the column again: the sink's columns are
// those committed, not those of a load that failed.
func TestChangelogWideningOfAFailedLoadIsRetried(t *testing.T) {
	l := newChangeLoader(t)
	price := func(id int, p any) map[string]any { return map[string]any{"id": id, "price": p} }
	l.change(0, "orders", "c", 100, price(1, 10), "id")
	l.flush()
	l.change(0, "orders", "c", 110, price(2, json.Number("12.5")), "id")
	widen := l.stage()
	l.change(1, "users", "c", 120, row(1, "a"), "id")
	broken := l.stage()
	if err := os.Remove(broken[0].Routed[0].Path); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Load(context.Background(), append(slices.Clone(widen), broken...)); err == nil {
		t.Fatal("a load of a staged file that is gone succeeded")
	}
	l.want(`SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_db_orders_log' AND column_name = 'price'`, "BIGINT")
	if _, err := l.s.Load(context.Background(), widen); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	l.want(`SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_db_orders_log' AND column_name = 'price'`, "VARCHAR")
	l.distribute()
	l.want(`SELECT id, price FROM cdc_db_orders_log`, "1|10", "2|12.5")
}
