package pipeline_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/verify"
)

// cdcConfig is testConfig with kafka.format format (debezium, canal or
// maxwell): changes routed to changelog tables.
func cdcConfig(t *testing.T, c *kfake.Cluster, format string) *config.Config {
	t.Helper()
	cfg := testConfig(t, c)
	cfg.Kafka.Format = format
	cfg.Sink.Table = "cdc"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// openRouted opens the DuckDB sink of cfg with routed tables, as
// `tracelake run` does with kafka.format debezium|canal|maxwell.
func openRouted(t *testing.T, cfg *config.Config) *duckdb.Sink {
	t.Helper()
	return openSinkWith(t, duckdb.Options{
		Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table, Routed: true, Log: testLog(t),
	})
}

// runChanges runs the pipeline until it is idle, failing the test if it
// is not within 30 seconds: a load that fails for good is retried
// without end, so a record the sink cannot take stalls every table.
func runChanges(t *testing.T, cfg *config.Config, s *duckdb.Sink) {
	t.Helper()
	runIdleWithin(t, cfg, s, nil, 30*time.Second)
}

// verifyChanges runs verify over the routed tables, as `tracelake
// verify` does with kafka.format debezium|canal|maxwell.
func verifyChanges(t *testing.T, cfg *config.Config, s *duckdb.Sink) *verify.Report {
	t.Helper()
	main, err := s.RoutedRows(context.Background(), s.DB())
	must(t, err)
	tn := s.Tables()
	rep, err := verify.Run(context.Background(), verify.SQLQuerier{DB: s.DB()},
		verify.Tables{Main: main, DLQ: tn.DLQ, Ledger: tn.Ledger, Raw: true, Topic: "ktopic", Index: "kindex"}, watermarksOf(t, cfg), true)
	must(t, err)
	return rep
}

// produceChanges produces each value to partition 0 of topic, in order.
func produceChanges(t *testing.T, cl *kgo.Client, values ...string) {
	t.Helper()
	for _, v := range values {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
	}
}

// wantQuery checks a query's rows, each its values joined by "|".
func wantQuery(t *testing.T, db *sql.DB, q string, want ...string) {
	t.Helper()
	rows, err := verify.SQLQuerier{DB: db}.QueryText(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	got := make([]string, len(rows))
	for i, r := range rows {
		got[i] = strings.Join(r, "|")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", q, got, want)
	}
}

func canalInsert(table, mysqlTypes, data string) string {
	return `{"data":` + data + `,"database":"shop","es":1589373515000,"id":1,"isDdl":false,"mysqlType":` + mysqlTypes +
		`,"old":null,"pkNames":["id"],"table":"` + table + `","ts":1589373515477,"type":"INSERT"}`
}

// A value the source's type admits by its text but the changelog
// column's type cannot hold (an int(11) of 3000000000, a decimal(5,2) of
// 12345.67, a Debezium int32 beyond 32 bits) used to fail the load of
// every table, retried without end: now the record is dead-lettered with
// the reason, and the other records load.
func TestCDCValueOutOfTypeRangeIsDeadLettered(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	produceChanges(t, cl,
		canalInsert("items", `{"id":"int(11)","qty":"int(11)"}`, `[{"id":"1","qty":"3"}]`),
		canalInsert("items", `{"id":"int(11)","qty":"int(11)"}`, `[{"id":"2","qty":"3000000000"}]`),
		canalInsert("prices", `{"id":"int(11)","price":"decimal(5,2)"}`, `[{"id":"3","price":"12345.67"}]`),
		canalInsert("prices", `{"id":"int(11)","price":"decimal(5,2)"}`, `[{"id":"4","price":"-999.99"}]`),
		canalInsert("small", `{"id":"tinyint(4)"}`, `[{"id":"127"}]`),
		canalInsert("users", `{"id":"int(11)","name":"varchar(10)"}`, `[{"id":"5","name":"ann"}]`),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_items_log`, "1|3")
	wantQuery(t, s.DB(), `SELECT id, price::VARCHAR FROM cdc_shop_prices_log`, "4|-999.99")
	wantQuery(t, s.DB(), `SELECT id FROM cdc_shop_small_log`, "127")
	wantQuery(t, s.DB(), `SELECT id, name FROM cdc_shop_users_log`, "5|ann")
	wantQuery(t, s.DB(), `SELECT "offset", stage, error FROM cdc_dlq ORDER BY "offset"`,
		`1|decode|column qty of source table "shop"."items" (int(11)): 3000000000 is out of the range of a 32-bit integer`,
		`2|decode|column price of source table "shop"."prices" (decimal(5,2)): "12345.67" has more digits than DECIMAL(5,2) holds`)
}

// canalColumn is a Canal insert into shop.<table> of the row id (an
// int(11)) with one more column, col, of MySQL type typ and value v.
func canalColumn(table, col, typ, id, v string) string {
	return canalInsert(table, `{"id":"int(11)","`+col+`":"`+typ+`"}`, `[{"id":"`+id+`","`+col+`":"`+v+`"}]`)
}

func debeziumChange(table, after string, pos int) string {
	return `{"before":null,"after":` + after + `,"source":{"db":"inv","table":"` + table + `","file":"mysql-bin.000003","pos":` +
		strconv.Itoa(pos) + `,"row":0,"ts_ms":1700000000000},"op":"c","ts_ms":1700000000100}`
}

// DuckDB's column names ignore case: a source column named like a
// changelog column in other case (KOFFSET), two source columns that
// differ only in case, or a column whose name changed case used to make
// CREATE or ALTER TABLE fail for the whole load, retried without end.
// Now such a change is dead-lettered with the reason, and the rest load.
func TestCDCColumnNamesDifferingInCaseAreDeadLettered(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	produceChanges(t, cl,
		debeziumChange("a", `{"id":1,"KOFFSET":5}`, 1),
		debeziumChange("b", `{"id":2,"ID":3}`, 2),
		debeziumChange("c", `{"id":3,"Price":5}`, 3),
		debeziumChange("c", `{"id":4,"price":6}`, 4),
		debeziumChange("e", `{"id":5,"Cdc_Op":"x"}`, 5),
		debeziumChange("e", `{"id":6}`, 6),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id, "Price" FROM cdc_inv_c_log`, "3|5")
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_e_log`, "6")
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`,
		`0|source table "inv"."a" has a column KOFFSET, a name the changelog table cdc_inv_a_log uses for its own (DuckDB's column names ignore case)`,
		`1|column ID of source table "inv"."b" is id in the changelog table cdc_inv_b_log: DuckDB's column names ignore case, so they cannot be two columns`,
		`3|column price of source table "inv"."c" is Price in the changelog table cdc_inv_c_log: DuckDB's column names ignore case, so they cannot be two columns`,
		`4|source table "inv"."e" has a column Cdc_Op, a name the changelog table cdc_inv_e_log uses for its own (DuckDB's column names ignore case)`)
}

// Two source tables whose changelog names are one (inv_x.y and inv.x_y
// both make cdc_inv_x_y_log; Orders and orders both cdc_inv_orders_log)
// are refused in one process, but a second process only knew the tables
// it saw itself: the second table's changes went into the first one's
// changelog table, mixed. The tables of the registry now own their names
// from the start.
func TestCDCChangelogNameCollisionAcrossRestarts(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	change := func(db, table, after string, pos int) string {
		return `{"before":null,"after":` + after + `,"source":{"db":"` + db + `","table":"` + table + `","file":"mysql-bin.000003","pos":` +
			strconv.Itoa(pos) + `,"row":0,"ts_ms":1700000000000},"op":"c","ts_ms":1700000000100}`
	}
	produceChanges(t, cl, change("inv_x", "y", `{"id":1}`, 1), change("inv", "Orders", `{"id":2}`, 2))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	s.Close()

	// Another process, the same database file.
	produceChanges(t, cl, change("inv", "x_y", `{"id":3}`, 3), change("inv", "orders", `{"id":4}`, 4),
		change("inv_x", "y", `{"id":5}`, 5), change("inv", "Orders", `{"id":6}`, 6))
	s = openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_x_y_log ORDER BY id`, "1", "5")
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_orders_log ORDER BY id`, "2", "6")
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`,
		`2|source table "inv"."x_y" is routed to cdc_inv_x_y_log, which already holds inv_x..y: map one of them with a shard rule or change the template`,
		`3|source table "inv"."orders" is routed to cdc_inv_orders_log, which already holds inv..Orders: map one of them with a shard rule or change the template`)
}

// Text Go takes for JSON but DuckDB's JSON reader refuses (half a
// surrogate pair, bytes that are not UTF-8, in a value or a column's
// name), and a column's name that is empty or holds a NUL, used to fail the load of every table at each retry: now its
// record is dead-lettered with the reason, and the rest load.
func TestCDCTextDuckDBRefusesIsDeadLettered(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	produceChanges(t, cl,
		debeziumChange("j", `{"id":1,"j":{"a":"\ud800"}}`, 1),
		debeziumChange("s", `{"id":2,"s":"\ud800x"}`, 2),
		debeziumChange("s", "{\"id\":3,\"s\":\"\xff\xfe\"}", 3),
		debeziumChange("s", "{\"id\":4,\"\xff\":\"x\"}", 4),
		debeziumChange("s", `{"id":5,"s":"\ud83d\ude00 \\ud800"}`, 5),
		// Names no database gives a column, which DuckDB's SQL cannot
		// name either: the table's creation failed, and every table's
		// load with it, at each retry.
		debeziumChange("s", `{"id":6,"":"x"}`, 6),
		debeziumChange("s", `{"id":7,"a\u0000b":"x"}`, 7),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id, s FROM cdc_inv_s_log`, `5|😀 \ud800`)
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`,
		`0|column j of source table "inv"."j": {"a":"\ud800"} holds a \u escape of half a UTF-16 surrogate pair, which is no character`,
		`1|column s of source table "inv"."s": "\ud800x" holds a \u escape of half a UTF-16 surrogate pair, which is no character`,
		`2|column s of source table "inv"."s": "\"\xff\xfe\"" is not UTF-8 text`,
		`3|source table "inv"."s" has a column named "\xff", which is not UTF-8 text`,
		`5|source table "inv"."s" has a column named "", which no database names a column`,
		`6|source table "inv"."s" has a column named "a\x00b", which no database names a column`)
}

// A decoder's reason quoting the message's bytes (Debezium's op, clipped
// to 64 bytes: the cut can fall inside a character; Canal's table name,
// bytes that are not UTF-8) was written into the staged dead-letter rows
// as it was: DuckDB's JSON reader refuses text that is not UTF-8, so the
// load failed at every retry and the partition stalled behind one bad
// message. Now the reason is written as UTF-8 (what is not becomes
// U+FFFD), the record is dead-lettered and the rest load.
func TestCDCReasonThatIsNotUTF8IsDeadLettered(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	// Valid JSON of valid UTF-8: the op's first 64 bytes (its quote, xy
	// and 30 é) end inside the 31st é, where the reason's quote of it is
	// cut back to.
	longOp := `{"after":{"id":1},"op":"xy` + strings.Repeat("é", 40) + `","source":{"db":"inv","table":"t","pos":1}}`
	produceChanges(t, cl,
		longOp,
		"{\"after\":{\"id\":2},\"op\":\"\xffx\",\"source\":{\"db\":\"inv\",\"table\":\"t\",\"pos\":2}}",
		debeziumChange("t", `{"id":3}`, 3),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_t_log`, "3")
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`,
		`0|not a Debezium change event: op "xy`+strings.Repeat("é", 30)+"… is not one of c, u, d, r, t",
		"1|not a Debezium change event: op \"\uFFFDx\" is not one of c, u, d, r, t")
}

// A column whose source type is widened (int(11) to bigint(20),
// decimal(5,2) to decimal(7,2)) is widened in its changelog table and its
// model, in the batch that first brings the wider type even when its
// narrower values come first, and after a restart; values of the
// narrower type still load. A change to a type that does not hold the
// column's (a number to a time) is dead-lettered with the reason, and
// the rest load.
func TestCDCWidenedColumnTypes(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	items := func(qtyType, id, qty string) string { return canalColumn("items", "qty", qtyType, id, qty) }
	prices := func(priceType, id, price string) string { return canalColumn("prices", "price", priceType, id, price) }
	produceChanges(t, cl,
		items("int(11)", "1", "3"),
		items("bigint(20)", "2", "3000000000"),
		items("int(11)", "3", "4"),
		prices("decimal(5,2)", "1", "999.99"),
		prices("decimal(7,2)", "2", "12345.67"),
		prices("decimal(5,2)", "3", "1.50"),
		items("datetime", "4", "2020-01-01 00:00:00"),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	types := `SELECT table_name, column_name, data_type FROM information_schema.columns WHERE column_name IN ('qty', 'price') AND table_name LIKE '%_log' ORDER BY ALL`
	wantQuery(t, s.DB(), types, "cdc_shop_items_log|qty|BIGINT", "cdc_shop_prices_log|price|DECIMAL(7,2)")
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_items_log ORDER BY id`, "1|3", "2|3000000000", "3|4")
	wantQuery(t, s.DB(), `SELECT id, price::VARCHAR FROM cdc_shop_prices_log ORDER BY id`, "1|999.99", "2|12345.67", "3|1.50")
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`,
		`6|column qty of source table "shop"."items" is BIGINT in the changelog table cdc_shop_items_log, and this change makes it TIMESTAMP: no type holds every value of both exactly, and tracelake widens a column's type but changes it no other way (rename or alter the table yourself; the changes dead-lettered meanwhile stay in the dead-letter table)`)

	// The models take the changelog's types; widened again after a
	// restart (the types read back from the catalog), they follow.
	mergeModels(t, cfg, s)
	modelTypes := `SELECT table_name, column_name, data_type FROM information_schema.columns WHERE column_name IN ('qty', 'price') AND table_name NOT LIKE '%_log' ORDER BY ALL`
	wantQuery(t, s.DB(), modelTypes, "cdc_shop_items|qty|BIGINT", "cdc_shop_prices|price|DECIMAL(7,2)")
	s.Close()

	produceChanges(t, cl,
		items("int(11)", "5", "5"),
		prices("decimal(9,3)", "4", "123456.789"),
		prices("decimal(5,2)", "5", "2.25"),
	)
	s = openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify after the restart: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), types, "cdc_shop_items_log|qty|BIGINT", "cdc_shop_prices_log|price|DECIMAL(9,3)")
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), modelTypes, "cdc_shop_items|qty|BIGINT", "cdc_shop_prices|price|DECIMAL(9,3)")
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_items ORDER BY id`, "1|3", "2|3000000000", "3|4", "5|5")
	wantQuery(t, s.DB(), `SELECT id, price::VARCHAR FROM cdc_shop_prices ORDER BY id`,
		"1|999.990", "2|12345.670", "3|1.500", "4|123456.789", "5|2.250")
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "1")
}

// mergeModels merges every pending changelog model once, failing the
// test on an error.
func mergeModels(t *testing.T, cfg *config.Config, s *duckdb.Sink) {
	t.Helper()
	dec, err := cdc.NewDecoder(cfg.CDCOptions())
	must(t, err)
	cm := merge.NewChangelogMerger(merge.NewMerger(s.DB(), testLog(t)), s, dec)
	models, err := cm.Pending(context.Background())
	must(t, err)
	for _, m := range models {
		if _, err := cm.Merge(context.Background(), m); err != nil {
			t.Fatalf("merge %s: %v", m.Name, err)
		}
	}
}

// DuckDB changes no column type of a table with an index, even with the
// index dropped in the same transaction. A change that would widen a
// changelog table the operator indexed, or whose model (or its
// tombstones) they indexed, is dead-lettered with the reason, instead of
// failing its load at every retry (every table stalled) or its model's
// merges; the rest load and merge.
func TestCDCWideningAnIndexedTableIsDeadLettered(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	row := func(table, qtyType, id, qty string) string { return canalColumn(table, "qty", qtyType, id, qty) }
	produceChanges(t, cl, row("items", "int(11)", "1", "3"), row("parts", "int(11)", "1", "3"))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	for _, q := range []string{`CREATE INDEX items_by_id ON cdc_shop_items_log (id)`, `CREATE INDEX parts_by_id ON cdc_shop_parts (id)`} {
		if _, err := s.DB().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	produceChanges(t, cl,
		row("items", "bigint(20)", "2", "3000000000"),
		row("parts", "bigint(20)", "2", "3000000000"),
		row("items", "int(11)", "3", "4"),
		row("parts", "int(11)", "3", "4"),
	)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_items ORDER BY id`, "1|3", "3|4")
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_parts ORDER BY id`, "1|3", "3|4")
	wantQuery(t, s.DB(), `SELECT "offset", regexp_extract(error, 'and there are (.*) [(]an index', 1) FROM cdc_dlq ORDER BY "offset"`,
		"2|cdc_shop_items_log.items_by_id", "3|cdc_shop_parts.parts_by_id")
}

// A key column's values compare as its type: a key of numbers never
// becomes text (a decimal whose source type grows past 38 digits would
// read "1.5000" beside the stored "1.50"), and numbers never go into a
// key of text (a varchar key become int(11): "007" is 7 now), or one
// source row would be two model rows. Such changes are dead-lettered; a
// key of text takes text, and a number key widens to a wider number.
func TestCDCKeysStayComparable(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	account := func(table, idType, id, name, typ string) string {
		return strings.Replace(canalInsert(table, `{"id":"`+idType+`","name":"varchar(10)"}`, `[{"id":"`+id+`","name":"`+name+`"}]`),
			`"type":"INSERT"`, `"type":"`+typ+`"`, 1)
	}
	produceChanges(t, cl,
		account("dec", "decimal(10,2)", "1.50", "a", "INSERT"),
		account("txt", "varchar(10)", "007", "a", "INSERT"),
		account("num", "int(11)", "7", "a", "INSERT"),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	produceChanges(t, cl,
		account("dec", "decimal(65,4)", "1.5000", "b", "UPDATE"),
		account("txt", "int(11)", "7", "b", "UPDATE"),
		account("txt", "varchar(12)", "007", "c", "UPDATE"),
		account("num", "bigint(20)", "7", "b", "UPDATE"),
	)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT id::VARCHAR, name FROM cdc_shop_dec`, "1.50|a")
	wantQuery(t, s.DB(), `SELECT id, name FROM cdc_shop_txt`, "007|c")
	wantQuery(t, s.DB(), `SELECT id, name, typeof(id) FROM cdc_shop_num`, "7|b|BIGINT")
	wantQuery(t, s.DB(), `SELECT "offset", error LIKE '%no type holds every value of both exactly%', error LIKE '%part of the primary key%' FROM cdc_dlq ORDER BY "offset"`,
		"3|true|false", "4|false|true")
}

// A MySQL TIME is a count of µs in its changelog column; a source column
// become varchar does not make the column text (its older rows would read
// 45000000000 beside 13:00:00): the change is dead-lettered.
func TestCDCNumbersDoNotBecomeStrings(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	items := func(tType, id, v string) string { return canalColumn("items", "t", tType, id, v) }
	produceChanges(t, cl, items("time", "1", "12:30:00"), items("varchar(8)", "2", "13:00:00"))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT id, typeof(t) FROM cdc_shop_items_log`, "1|BIGINT")
	wantQuery(t, s.DB(), `SELECT "offset", error LIKE '%is BIGINT in the changelog table%makes it VARCHAR: no type holds%' FROM cdc_dlq`, "1|true")
}

// Two numbers of which neither holds the other (a bigint(20) and a
// decimal(10,2), as of two shards mapped to one table) make the column
// the DECIMAL that holds both, in either order.
func TestCDCBigintAndDecimalBecomeTheDecimalThatHoldsBoth(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	items := func(table, qtyType, id, qty string) string { return canalColumn(table, "qty", qtyType, id, qty) }
	produceChanges(t, cl,
		items("a", "bigint(20)", "1", "3000000000"), items("a", "decimal(10,2)", "2", "1.50"),
		items("b", "decimal(10,2)", "1", "1.50"), items("b", "bigint(20)", "2", "3000000000"),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT table_name, data_type FROM information_schema.columns WHERE column_name = 'qty' ORDER BY ALL`,
		"cdc_shop_a_log|DECIMAL(21,2)", "cdc_shop_b_log|DECIMAL(21,2)")
	wantQuery(t, s.DB(), `SELECT id, qty::VARCHAR FROM cdc_shop_a_log ORDER BY id`, "1|3000000000.00", "2|1.50")
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
}

// A model the operator gave a primary key (ALTER TABLE … ADD PRIMARY KEY,
// which DuckDB allows on a table with rows and cannot undo) cannot have
// that column's type changed: a change that would widen it (int(11) to
// bigint(20)) is dead-lettered with the reason, where it used to widen
// the changelog table and leave the model failing every merge for good.
func TestCDCWideningUnderAKeyConstraintIsDeadLettered(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	row := func(idType, id, qty string) string {
		return canalInsert("parts", `{"id":"`+idType+`","qty":"int(11)"}`, `[{"id":"`+id+`","qty":"`+qty+`"}]`)
	}
	produceChanges(t, cl, row("int(11)", "1", "3"))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	if _, err := s.DB().Exec(`ALTER TABLE cdc_shop_parts ADD PRIMARY KEY (id)`); err != nil {
		t.Fatal(err)
	}
	produceChanges(t, cl, row("bigint(20)", "2", "4"), row("int(11)", "3", "5"))
	runChanges(t, cfg, s)

	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_parts ORDER BY id`, "1|3", "3|5")
	wantQuery(t, s.DB(), `SELECT "offset", error LIKE '%there are cdc_shop_parts(PRIMARY KEY)%' FROM cdc_dlq ORDER BY "offset"`, "1|true")
}

// A JSON column holding JSON null (Canal writes "null", Debezium's
// io.debezium.data.Json "null") is NULL in the changelog table, and its
// table's changes move: the move's check that every key of a row gave a
// value must not take the null for a value its type does not take.
func TestCDCJSONNullIsNull(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	produceChanges(t, cl,
		canalColumn("docs", "doc", "json", "1", `{\"a\":1}`),
		canalColumn("docs", "doc", "json", "2", `null`),
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)  // ends with the sink's Finish: a distribution
	mergeModels(t, cfg, s) // another
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_landing`, "0")
	wantQuery(t, s.DB(), `SELECT id, coalesce(doc::VARCHAR, 'NULL') FROM cdc_shop_docs_log ORDER BY id`, `1|{"a":1}`, "2|NULL")
	wantQuery(t, s.DB(), `SELECT "offset", error FROM cdc_dlq ORDER BY "offset"`)
}

// A change whose value holds line breaks between JSON tokens (valid
// JSON; Maxwell's object here, passed through as the message has it)
// loads, and so does the change after it: a raw line break would end the
// staged row's line, and the load fail at every retry, stalling every
// table of the partition.
func TestCDCLineBreaksBetweenJSONTokens(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatMaxwell)
	cl := producer(t, c)
	mx := func(table, data string) string {
		return `{"database":"shop","table":"` + table + `","type":"insert","ts":1700000000,"position":"master.000001:100","data":` + data + `}`
	}
	produceChanges(t, cl, mx("docs", "{\"id\":1,\"doc\":{\r\n\"a\":\n1}}"), mx("ok", `{"id":2}`))
	s := openRouted(t, cfg)
	runIdleWithin(t, cfg, s, nil, 10*time.Second)
	wantQuery(t, s.DB(), `SELECT id, doc->>'a' FROM cdc_shop_docs_log`, "1|1")
	wantQuery(t, s.DB(), `SELECT id FROM cdc_shop_ok_log`, "2")
}

// PostgreSQL's json type keeps a document's text as written, and Debezium
// passes it on as io.debezium.data.Json: a JSON null with whitespace
// around it (' null', 'null\n') is JSON null too, NULL in the changelog
// table, and its table's changes move.
func TestCDCJSONNullWithWhitespaceIsNull(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	pg := func(id int, doc string) string {
		return `{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` +
			`{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"doc"}],"optional":true,"name":"pg.public.docs.Value","field":"after"}],` +
			`"optional":false,"name":"pg.public.docs.Envelope"},"payload":{"before":null,"after":{"id":` + strconv.Itoa(id) + `,"doc":` + strconv.Quote(doc) + `},` +
			`"source":{"connector":"postgresql","name":"pg","ts_ms":1700000000000,"db":"shop","schema":"public","table":"docs","lsn":` + strconv.Itoa(100+id) + `},"op":"c","ts_ms":1700000000100}}`
	}
	produceChanges(t, cl, pg(1, `{"a":1}`), pg(2, " null"), pg(3, "null\n"), pg(4, `{"a":4}`))
	s := openRouted(t, cfg)
	runChanges(t, cfg, s) // ends with the sink's Finish: a distribution
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_landing`, "0")
	wantQuery(t, s.DB(), `SELECT id, coalesce(doc::VARCHAR, 'NULL') FROM cdc_shop_docs_log ORDER BY id`,
		`1|{"a":1}`, "2|NULL", "3|NULL", `4|{"a":4}`)
}

// flakyRouter is the DuckDB sink whose Widenable cannot answer its first
// fails calls, as when its database fails the read.
type flakyRouter struct {
	*duckdb.Sink
	mu    sync.Mutex
	fails int
}

func (f *flakyRouter) Widenable(table string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return fmt.Errorf("%w: injected: the indexes of %s could not be read", sink.ErrTransient, table)
	}
	return f.Sink.Widenable(table)
}

// A change whose widening the sink could not check (its read of the
// table's indexes failed) used to be dead-lettered with that failure as
// its reason: a valid change kept out of its table, with no way back.
// Now its partition is read again from it after a backoff, and nothing
// after it in the partition is batched past it meanwhile: every change
// lands, none twice, no dead letter.
func TestCDCUnansweredWideningIsReadAgain(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatCanal)
	cl := producer(t, c)
	row := func(table, qtyType, id, qty string) string { return canalColumn(table, "qty", qtyType, id, qty) }
	produceChanges(t, cl,
		row("items", "int(11)", "1", "3"),
		row("parts", "int(11)", "1", "5"),
		row("items", "bigint(20)", "2", "3000000000"), // widens: Widenable fails twice
		row("parts", "int(11)", "2", "6"),
		row("items", "int(11)", "3", "4"),
		row("parts", "bigint(20)", "3", "4000000000"),
	)
	s := openRouted(t, cfg)
	flaky := &flakyRouter{Sink: s, fails: 2}
	runIdleWithin(t, cfg, flaky, nil, 30*time.Second)
	if flaky.fails != 0 {
		t.Fatalf("Widenable was not asked again: %d injected failures left", flaky.fails)
	}
	mergeModels(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
	wantQuery(t, s.DB(), `SELECT id, qty, typeof(qty) FROM cdc_shop_items_log ORDER BY id`, "1|3|BIGINT", "2|3000000000|BIGINT", "3|4|BIGINT")
	wantQuery(t, s.DB(), `SELECT id, qty FROM cdc_shop_parts ORDER BY id`, "1|5", "2|6", "3|4000000000")
}

// debeziumAt is a Debezium insert into db.table of row (key id) at
// source time at.
func debeziumAt(db, table string, id int, at time.Time) []byte {
	return fmt.Appendf(nil, `{"before":null,"after":{"id":%d},"source":{"db":%q,"table":%q,"file":"mysql-bin.000003","pos":%d,"row":0,"ts_ms":%d},"op":"c","ts_ms":%d}`,
		id, db, table, id, at.UnixMilli(), at.UnixMilli())
}

// A heartbeat speaks for its own source's topics only (README "Done
// marks": "give each heartbeat the topics its source writes to"). Two
// MySQL servers run the same heartbeat.action.query, so both have a
// table ops.heartbeat, configured once per source with its topics.
// dbserver2's heartbeat of h+3h05m says nothing about dbserver1, whose
// connector has sent orders' change of h+10m and nothing since (it may be
// hours behind its binlog). Beats.See used to match the table by name
// only, never looking at the record's topic, so dbserver2's heartbeat was
// taken as dbserver1's too, and cdc_inv_orders was marked done for h, h+1
// and h+2 while dbserver1's changes of those hours were still to come.
func TestCDCHeartbeatOfAnotherSourceMovesNoPartition(t *testing.T) {
	const one, two = "dbserver1.inv", "dbserver2.inv"
	c, cfg := debeziumTopics(t, []config.CDCHeartbeat{{Table: "ops.heartbeat", Topics: `^dbserver1\.`}, {Table: "ops.heartbeat", Topics: `^dbserver2\.`}}, one, two)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	cl := producer(t, c)
	produce(t, cl, &kgo.Record{Topic: one, Key: []byte(`{"id":1}`), Value: debeziumAt("inv", "orders", 1, h.Add(10*time.Minute))})
	produce(t, cl, &kgo.Record{Topic: two, Key: []byte(`{"id":1}`), Value: debeziumAt("ops", "heartbeat", 1, h.Add(3*time.Hour+5*time.Minute))})

	s := openRouted(t, cfg)
	beats := runWithBeats(t, cfg, s)
	for _, b := range beats.Latest() {
		if b.Topics.MatchString(one) {
			t.Errorf("a heartbeat of %s's source (%s) is kept, but only %s's was read", one, time.UnixMicro(b.SourceTime).UTC(), two)
		}
	}

	markWithBeats(t, cfg, s, beats)
	wantQuery(t, s.DB(), `SELECT "table", strftime(hour, '%H') FROM tracelake_ready WHERE "table" = 'cdc_inv_orders' ORDER BY ALL`)
}

// debeziumTopics is a cluster of topics (a partition each) and the config
// of a run reading Debezium changes from them with heartbeats.
func debeziumTopics(t *testing.T, heartbeats []config.CDCHeartbeat, topics ...string) (*kfake.Cluster, *config.Config) {
	t.Helper()
	c := kafkatest.Cluster(t, 1, topics...)
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = topics
	cfg.Kafka.Format = config.FormatDebezium
	cfg.Sink.Table = "cdc"
	cfg.CDC.Heartbeats = heartbeats
	must(t, cfg.Validate())
	return c, cfg
}

// runWithBeats runs the pipeline until it is idle, keeping the
// heartbeats of cfg's cdc.heartbeats, as `tracelake run` does.
func runWithBeats(t *testing.T, cfg *config.Config, s *duckdb.Sink) *cdc.Beats {
	t.Helper()
	beats := cdc.NewBeats(cfg.Heartbeats())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must(t, pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
		ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t), Beats: beats,
	}))
	if ctx.Err() != nil {
		t.Fatal("pipeline did not become idle within 30s")
	}
	return beats
}

// markWithBeats merges the models and marks the done hours with the
// heartbeats read, listing the end offsets from cfg's Kafka (of the
// changelog tables' topics and every topic read), as a merge
// round of `tracelake run` does.
func markWithBeats(t *testing.T, cfg *config.Config, s *duckdb.Sink, beats *cdc.Beats) {
	t.Helper()
	mergeModels(t, cfg, s)
	admin, err := kafka.NewAdmin(cfg.Kafka)
	must(t, err)
	defer admin.Close()
	ends := func(ctx context.Context, topics []string) (map[sink.TopicPartition]merge.Offsets, error) {
		// And every other topic read, as tracelake run lists them.
		for _, read := range cfg.Kafka.Topics {
			if !slices.Contains(topics, read) {
				topics = append(slices.Clip(topics), read)
			}
		}
		w, err := admin.ExistingWatermarks(ctx, topics)
		out := map[sink.TopicPartition]merge.Offsets{}
		for tp, m := range w {
			out[tp] = merge.Offsets{Start: m.Low, End: m.High}
		}
		return out, err
	}
	dec, err := cdc.NewDecoder(cfg.CDCOptions())
	must(t, err)
	cm := merge.NewChangelogMerger(merge.NewMerger(s.DB(), testLog(t)), s, dec)
	if _, err := cm.MarkReady(context.Background(), merge.Marking{Now: time.Now(), Beats: beats.Latest(), Ends: ends}); err != nil {
		t.Fatal(err)
	}
}

// Debezium's heartbeat messages (cdc.heartbeats with a topic) move the
// partitions of their server's topics, loaded to their end, to their time
// less the configured lag; they are no changes (no dead letter, no row).
func TestCDCHeartbeatMessagesMoveQuietTables(t *testing.T) {
	const orders, beat = "dbserver1.inv.orders", "__debezium-heartbeat.dbserver1"
	c, cfg := debeziumTopics(t, []config.CDCHeartbeat{{Topic: beat, Lag: config.Duration(30 * time.Minute)}}, orders, beat)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	cl := producer(t, c)
	produce(t, cl, &kgo.Record{Topic: orders, Key: []byte(`{"id":1}`), Value: debeziumAt("inv", "orders", 1, h.Add(10*time.Minute))})
	s := openRouted(t, cfg)
	markWithBeats(t, cfg, s, runWithBeats(t, cfg, s))
	wantQuery(t, s.DB(), `SELECT count(*) FROM tracelake_ready`, "0") // orders' partition reached h+10m
	produce(t, cl, &kgo.Record{Topic: beat, Key: []byte(`{"serverName":"dbserver1"}`),
		Value: fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}]},"payload":{"ts_ms":%d}}`, h.Add(3*time.Hour+5*time.Minute).UnixMilli())})
	markWithBeats(t, cfg, s, runWithBeats(t, cfg, s))
	// Reached h+3h05m less 30m: h, h+1 done, h+2 not.
	at := func(n int) string {
		return "cdc_inv_orders|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	wantQuery(t, s.DB(), `SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`, at(0), at(1))
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
}

// Beats.SeeMessage took every record of a configured heartbeat topic
// for a heartbeat message, whatever it held, and AppendRows then made no
// row of it: a topic of changes given as the heartbeat topic (here
// dbserver1.inv.orders, which ParseHeartbeatTopic accepts as <prefix>.
// <server>) lost every change on it without a trace: no row, no dead
// letter, the ledger counting the records as having made none, so verify
// passed. Now, as in the Debezium decoder, a message with an op is a
// change, not a heartbeat.
func TestCDCChangeOnTheHeartbeatTopicIsNotLost(t *testing.T) {
	const orders = "dbserver1.inv.orders"
	c, cfg := debeziumTopics(t, []config.CDCHeartbeat{{Topic: orders}}, orders)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	produce(t, producer(t, c), &kgo.Record{Topic: orders, Key: []byte(`{"id":1}`), Value: debeziumAt("inv", "orders", 1, h.Add(10*time.Minute))})
	s := openRouted(t, cfg)
	runWithBeats(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT count(*), sum(records + dlq_records)::BIGINT FROM cdc_ledger`, "1|1")
}

// pgChange is a Debezium PostgreSQL insert (schemas on) into
// postgres.public.<table> of the row id with column valid_to, a
// MicroTimestamp of value us, and valid_from, a Date of value days.
func pgChange(table string, id int, us, days string, lsn int) string {
	return `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","optional":true,"fields":[` +
		`{"field":"id","type":"int32"},{"field":"valid_to","type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1},` +
		`{"field":"valid_from","type":"int32","optional":true,"name":"io.debezium.time.Date","version":1}]}],"optional":false},` +
		`"payload":{"before":null,"after":{"id":` + strconv.Itoa(id) + `,"valid_to":` + us + `,"valid_from":` + days + `},"op":"c",` +
		`"source":{"connector":"postgresql","db":"postgres","schema":"public","table":"` + table + `","lsn":` + strconv.Itoa(lsn) + `,"ts_ms":1700000000000}}}`
}

// PostgreSQL's infinity and -infinity, which Debezium writes as sentinel
// values (9223372036825200000 µs, -2147472692 days), land in the
// changelog table and its model as DuckDB's 'infinity' and '-infinity':
// the timestamp was stored as 294247-01-10 and the date dead-lettered.
func TestCDCPostgresInfinityIsInfinity(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	key := func(id int) []byte { return []byte(`{"id":` + strconv.Itoa(id) + `}`) }
	produce(t, cl,
		&kgo.Record{Topic: topic, Partition: 0, Key: key(1), Value: []byte(pgChange("plans", 1, "9223372036825200000", "-2147472691", 10))},
		&kgo.Record{Topic: topic, Partition: 0, Key: key(2), Value: []byte(pgChange("plans", 2, "-9223372036832400000", "-2147472692", 11))},
		&kgo.Record{Topic: topic, Partition: 0, Key: key(3), Value: []byte(pgChange("plans", 3, "1700000000000000", "19675", 12))},
	)
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	if rep := verifyChanges(t, cfg, s); !rep.OK {
		t.Errorf("verify: %v", rep.Problems)
	}
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_dlq`, "0")
	mergeModels(t, cfg, s)
	for _, table := range []string{"cdc_postgres_plans_log", "cdc_postgres_plans"} {
		wantQuery(t, s.DB(), `SELECT id, valid_to::VARCHAR, valid_from::VARCHAR FROM `+table+` ORDER BY id`,
			"1|infinity|-infinity", "2|-infinity|infinity", "3|2023-11-14 22:13:20|2023-11-14 00:00:00")
	}
}

// Debezium's ByLogicalTableRouter adds __dbz__physicalTableIdentifier to
// the record key (key.enforce.uniqueness): no column of the row, it made
// the model's key a column the model has not, and the model never merged.
func TestCDCRouterKeyFieldLeavesTheModelKeyed(t *testing.T) {
	c := newCluster(t, 1)
	cfg := cdcConfig(t, c, config.FormatDebezium)
	cl := producer(t, c)
	key := `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":false,"field":"__dbz__physicalTableIdentifier"}],"optional":false,"name":"plans_all.Key"},` +
		`"payload":{"id":1,"__dbz__physicalTableIdentifier":"srv.public.plans"}}`
	produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte(pgChange("plans", 1, "1700000000000000", "19675", 10))})
	s := openRouted(t, cfg)
	runChanges(t, cfg, s)
	mergeModels(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT id, cdc_key::VARCHAR FROM cdc_postgres_plans_log`, `1|["id"]`)
	wantQuery(t, s.DB(), `SELECT id FROM cdc_postgres_plans`, "1")
}
