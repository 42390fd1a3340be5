package duckdb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
)

// routedBatch is offsets [first, last] of partition 0, each record one
// change of db.orders (an id, and from withNote on a note) and one of
// db.users.
func routedBatch(first, last, withNote int64) *sink.Batch {
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: first, Last: last, Records: 2 * (last - first + 1)}}}
	for o := first; o <= last; o++ {
		orders := b.RoutedTo("cdc_db_orders_log", sink.SourceTable{Database: "db", Name: "orders"})
		orders.AddColumn(sink.Column{Name: "id", Type: schema.Int64})
		orders.AddColumn(sink.Column{Name: "price", Type: schema.Decimal, Precision: 10, Scale: 2})
		note := ""
		if o >= withNote {
			orders.AddColumn(sink.Column{Name: "note", Type: schema.String})
			note = fmt.Sprintf(`"note":"n%d",`, o)
		}
		orders.Rows = fmt.Appendf(orders.Rows, `{"id":%d,"price":"1.25",%s"cdc_op":"c","cdc_position":"%020d","cdc_source_time":1700000000000000,"cdc_key":["id"],"ktopic":"t","kpartition":0,"koffset":%d,"kindex":0}`+"\n", o, note, o, o)
		users := b.RoutedTo("cdc_db_users_log", sink.SourceTable{Database: "db", Name: "users"})
		users.AddColumn(sink.Column{Name: "name", Type: schema.String})
		users.Rows = fmt.Appendf(users.Rows, `{"name":"u%d","cdc_op":"u","ktopic":"t","kpartition":0,"koffset":%d,"kindex":1}`+"\n", o, o)
	}
	return b
}

// routedSink is a prepared sink of routed tables in dir, its options
// changed by each of with.
func routedSink(t *testing.T, dir string, with ...func(*Options)) *Sink {
	t.Helper()
	opt := testOptions(dir)
	opt.Table, opt.Routed = "cdc", true
	for _, f := range with {
		f(&opt)
	}
	s := openWith(t, opt)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// Routed tables are created on first sight and registered, grow a column
// when one shows up, and are fenced by the ledger: the same batch loaded
// again, or a batch re-reading offsets already loaded, adds no row.
func TestRoutedTablesCreatedGrownAndFenced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := routedSink(t, dir)
	if cols := s.RoutedColumns("cdc_db_orders_log"); len(cols) != 0 {
		t.Fatalf("columns of a table not created yet: %v", cols)
	}
	first := routedBatch(0, 4, 100)
	mustLoad(t, s, first)
	// The same offsets again (a lost reply), then offsets 3..9, of which
	// 5..9 are new and from 7 on bring a note column.
	loaded, err := s.Load(ctx, stage(t, s, routedBatch(0, 4, 100), routedBatch(3, 9, 7)))
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.Ranges; len(got) != 1 || got[0].First != 5 || got[0].Last != 9 || got[0].Records != 10 {
		t.Errorf("ledger ranges of the replay: %+v, want 5..9 with 10 rows", got)
	}
	union, err := s.RoutedRows(ctx, s.DB())
	if err != nil {
		t.Fatal(err)
	}
	// The rows are landed, counted by verify, until they are moved.
	for q, want := range map[string]int64{
		`SELECT count(*) FROM cdc_landing`:        20,
		`SELECT count(*) FROM cdc_db_orders_log`:  0,
		`SELECT count(*) FROM cdc_routes_reached`: 0,
		"SELECT count(*) FROM " + union:           20,
	} {
		if got := count(t, s, q); got != want {
			t.Errorf("before the move, %s: %d, want %d", q, got, want)
		}
	}
	if n, err := s.Distribute(ctx); err != nil || n != 20 {
		t.Fatalf("Distribute moved %d rows, %v; want 20", n, err)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM cdc_landing`:                                    0,
		`SELECT count(*) FROM cdc_db_orders_log`:                              10,
		`SELECT count(DISTINCT koffset) FROM cdc_db_orders_log`:               10,
		`SELECT count(*) FROM cdc_db_users_log`:                               10,
		`SELECT count(note) FROM cdc_db_orders_log`:                           3,
		`SELECT count(*) FROM cdc_db_orders_log WHERE price = 1.25`:           10,
		`SELECT count(*) FROM cdc_routes`:                                     2,
		`SELECT sum(records) FROM cdc_ledger`:                                 20,
		`SELECT count(*) FROM cdc_db_users_log WHERE cdc_source_time IS NULL`: 10,
		// What each table reached: partition 0 past offset 9, the
		// orders' source times, none for the users'.
		`SELECT count(*) FROM cdc_routes_reached WHERE next_offset = 10 AND topic = 't' AND "partition" = 0`:                              2,
		`SELECT count(*) FROM cdc_routes_reached WHERE log_table = 'cdc_db_orders_log' AND epoch_us(last_source_time) = 1700000000000000`: 1,
		`SELECT count(*) FROM cdc_routes_reached WHERE log_table = 'cdc_db_users_log' AND last_source_time IS NULL`:                       1,
	} {
		if got := count(t, s, q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
	want := map[string]string{"id": "BIGINT", "price": "DECIMAL(10,2)", "note": "VARCHAR", "cdc_op": "VARCHAR",
		"cdc_position": "VARCHAR", "cdc_source_time": "TIMESTAMP", "cdc_key": "JSON",
		"ktopic": "VARCHAR", "kpartition": "INTEGER", "koffset": "BIGINT", "kindex": "INTEGER"}
	have, err := TableColumns(ctx, s.DB(), "cdc_db_orders_log")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range have {
		if want[c.Name] != c.Type {
			t.Errorf("column %s is %s, want %s", c.Name, c.Type, want[c.Name])
		}
	}
	if len(have) != len(want) {
		t.Errorf("columns %v, want %v", have, want)
	}
	if got := s.RoutedColumns("cdc_db_orders_log"); got["note"] != "VARCHAR" || got["price"] != "DECIMAL(10,2)" {
		t.Errorf("cached columns after the loads: %v", got)
	}
	if got := count(t, s, "SELECT count(*) FROM "+union); got != 20 {
		t.Errorf("rows of every routed table: %d, want 20", got)
	}

	// A second process knows the tables from the registry, without a load.
	s.Close()
	again := routedSink(t, dir)
	if got := again.RoutedColumns("cdc_db_orders_log"); got["note"] != "VARCHAR" || len(got) != len(want) {
		t.Errorf("columns read by Prepare: %v", got)
	}
}

// The types the sink names its routed columns with read back as the same
// logical types (the widening rule compares the catalog's with the
// rows'), and the files of one table in a load are read with the type
// that holds every file's rows of a column, whatever their order.
func TestRoutedTypesReadBackAndJoin(t *testing.T) {
	s := &Sink{}
	text := sink.Column{Type: schema.Decimal} // a String's or a decimal's: VARCHAR
	for _, c := range []struct{ wrote, read sink.Column }{
		{sink.Column{Type: schema.Int32}, sink.Column{Type: schema.Int32}},
		{sink.Column{Type: schema.Int64}, sink.Column{Type: schema.Int64}},
		{sink.Column{Type: schema.Float64}, sink.Column{Type: schema.Float64}},
		{sink.Column{Type: schema.Bool}, sink.Column{Type: schema.Bool}},
		{sink.Column{Type: schema.Timestamp}, sink.Column{Type: schema.Timestamp}},
		{sink.Column{Type: schema.JSON}, sink.Column{Type: schema.JSON}},
		{sink.Column{Type: schema.Decimal, Precision: 38, Scale: 10}, sink.Column{Type: schema.Decimal, Precision: 38, Scale: 10}},
		{sink.Column{Type: schema.Decimal, Precision: 5}, sink.Column{Type: schema.Decimal, Precision: 5}},
		{sink.Column{Type: schema.String}, text},
		{text, text},
	} {
		got, ok := s.ColumnOf(s.ColumnType(c.wrote))
		if !ok || got != c.read {
			t.Errorf("%s reads back as %+v, %v; want %+v", s.ColumnType(c.wrote), got, ok, c.read)
		}
	}
	for _, typ := range []string{"DECIMAL(18,12) ", "DECIMAL(40,2)", "HUGEINT", "INTEGER[]"} {
		if c, ok := logicalOf(typ); ok {
			t.Errorf("%q reads as %+v: a type the sink does not make", typ, c)
		}
	}
	if !holds("BIGINT", "INTEGER") || holds("INTEGER", "BIGINT") || !holds("VARCHAR", "BIGINT") || holds("VARCHAR", "DECIMAL(7,2)") || holds("DECIMAL(7,2)", "DOUBLE") || holds("BIGINT", "VARCHAR") {
		t.Error("holds does not follow sink.Column.Holds")
	}
	files := []sink.RoutedFile{
		{Table: "a", Columns: []sink.Column{{Name: "x", Type: schema.Int64}}, Path: "1"},
		{Table: "b", Columns: []sink.Column{{Name: "y", Type: schema.Int32}}, Path: "2"},
		{Table: "a", Columns: []sink.Column{{Name: "z", Type: schema.Bool}, {Name: "x", Type: schema.Decimal}}, Path: "3"},
		{Table: "a", Columns: []sink.Column{{Name: "x", Type: schema.Int32}}, Path: "4"},
	}
	got := groupRouted(files)
	want := []routedGroup{
		{table: "a", columns: []sink.Column{{Name: "x", Type: schema.Decimal}, {Name: "z", Type: schema.Bool}}},
		{table: "b", columns: []sink.Column{{Name: "y", Type: schema.Int32}}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("groups %+v, want %+v", got, want)
	}
}

// ordersBatch is offsets [first, last] of partition 0, each one change of
// db.orders: its id (id+offset, of type idType) and, with note, a note.
func ordersBatch(first, last int64, idType schema.Type, id int64, note bool) *sink.Batch {
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: first, Last: last, Records: last - first + 1}}}
	orders := b.RoutedTo("cdc_db_orders_log", sink.SourceTable{Database: "db", Name: "orders"})
	orders.AddColumn(sink.Column{Name: "id", Type: idType})
	if note {
		orders.AddColumn(sink.Column{Name: "note", Type: schema.String})
	}
	for o := first; o <= last; o++ {
		n := ""
		if note {
			n = fmt.Sprintf(`"note":"n%d",`, o)
		}
		orders.Rows = fmt.Appendf(orders.Rows, `{"id":%d,%s"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":%d,"kindex":0}`+"\n", id+o, n, o)
	}
	return b
}

// A load that committed but said it failed (its reply lost) added a
// column and widened another: the load's retry finds its rows in the
// ledger and loads nothing, and the sink must still know the table's
// columns as they now are, or the landed rows cannot move into their
// table (read with the columns and types of before) — not then, nor
// after later loads of the table that bring neither column.
func TestRoutedColumnsOfALoadWhoseReplyWasLost(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	mustLoad(t, s, ordersBatch(0, 4, schema.Int32, 1, false))
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatal(err)
	}

	loseNextReply(s)
	files := stage(t, s, ordersBatch(5, 9, schema.Int64, 3_000_000_000, true))
	if _, err := s.Load(ctx, files); err == nil {
		t.Fatal("the load whose reply was lost said it loaded")
	}
	if _, err := s.Load(ctx, files); err != nil { // the worker's retry
		t.Fatal(err)
	}
	if got := s.RoutedColumns("cdc_db_orders_log"); got["id"] != "BIGINT" || got["note"] != "VARCHAR" {
		t.Errorf("columns the sink knows after the retry: %v, want id BIGINT and note VARCHAR", got)
	}
	// A later load of the table brings neither column's change.
	mustLoad(t, s, ordersBatch(10, 12, schema.Int32, 1, false))
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatalf("the landed rows could not move: %v", err)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM cdc_landing`:                                     0,
		`SELECT count(*) FROM cdc_db_orders_log`:                               13,
		`SELECT count(note) FROM cdc_db_orders_log`:                            5,
		`SELECT count(*) FROM cdc_db_orders_log WHERE id >= 3000000005`:        5,
		`SELECT count(*) FROM cdc_routes_reached WHERE next_offset = 13`:       1,
		`SELECT sum(records) FROM cdc_ledger`:                                  13,
		`SELECT count(*) FROM cdc_db_orders_log WHERE koffset BETWEEN 5 AND 9`: 5,
	} {
		if got := count(t, s, q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
}

// A load that created a changelog table and said it failed (its reply
// lost) leaves the table in the catalog and the registry: the next load
// of the table's changes must add to it, not create it again (which
// fails, and with it that load at every retry, every table's).
func TestRoutedTableCreatedByALoadWhoseReplyWasLost(t *testing.T) {
	ctx := context.Background()
	s := routedSink(t, t.TempDir())
	loseNextReply(s)
	files := stage(t, s, ordersBatch(0, 4, schema.Int64, 1, false))
	if _, err := s.Load(ctx, files); err == nil {
		t.Fatal("the load whose reply was lost said it loaded")
	}
	if _, err := s.Load(ctx, files); err != nil { // the worker's retry
		t.Fatal(err)
	}
	if got := s.RoutedSources(); got["cdc_db_orders_log"].Name != "orders" {
		t.Errorf("routed tables the sink knows after the retry: %v", got)
	}
	if _, err := s.Load(ctx, stage(t, s, ordersBatch(5, 7, schema.Int64, 1, true))); err != nil {
		t.Fatalf("a load of the created table's next changes: %v", err)
	}
	if _, err := s.Distribute(ctx); err != nil {
		t.Fatalf("the landed rows could not move: %v", err)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM cdc_db_orders_log`:    8,
		`SELECT count(note) FROM cdc_db_orders_log`: 3,
		`SELECT count(*) FROM cdc_routes`:           1,
		`SELECT count(*) FROM cdc_landing`:          0,
		`SELECT sum(records) FROM cdc_ledger`:       8,
	} {
		if got := count(t, s, q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
}

// loseNextReply makes s's next commit report an error after it committed
// (a reply lost with the connection), and the commits after it succeed.
func loseNextReply(s *Sink) {
	lost := true
	s.replyLost = func() error {
		if lost {
			lost = false
			return errors.New("connection reset after COMMIT")
		}
		return nil
	}
}

// The registry records the Debezium server each changelog table was
// created for (SourceTable.Server), which the next process reads back
// (RoutedSources): its decoder then knows whose drops are the table's. A
// registry made by the release before the column gains it at Prepare,
// its tables' server not known ("").
func TestRoutedSourcesKeepTheirServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := routedSink(t, dir)
	// The release before: its registry has no source_server.
	if _, err := s.DB().ExecContext(ctx, `ALTER TABLE cdc_routes DROP COLUMN source_server`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO cdc_routes (log_table, source_database, source_schema, source_table, first_seen) VALUES ('cdc_db_old_log', 'db', '', 'old', now())`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = routedSink(t, dir)
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t", Partition: 0}, First: 0, Last: 0, Records: 1}}}
	orders := b.RoutedTo("cdc_db_orders_log", sink.SourceTable{Database: "db", Name: "orders", Server: "dbserver1"})
	orders.AddColumn(sink.Column{Name: "id", Type: schema.Int64})
	orders.Rows = []byte(`{"id":1,"cdc_op":"c","ktopic":"t","kpartition":0,"koffset":0,"kindex":0}` + "\n")
	mustLoad(t, s, b)
	s.Close()
	s = routedSink(t, dir)
	want := map[string]sink.SourceTable{
		"cdc_db_old_log":    {Database: "db", Name: "old"},
		"cdc_db_orders_log": {Database: "db", Name: "orders", Server: "dbserver1"},
	}
	if got := s.RoutedSources(); !reflect.DeepEqual(got, want) {
		t.Errorf("routed sources after a restart: %+v, want %+v", got, want)
	}
}
