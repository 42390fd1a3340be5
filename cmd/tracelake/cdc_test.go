package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/verify"
)

// fixtureValue is the value of a change event fixture of internal/cdc
// (written from the format's documentation).
func fixtureValue(t *testing.T, name string) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "internal", "cdc", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(text), "-- value --\n")
	value, _, _ := strings.Cut(rest, "-- want --")
	return strings.TrimSpace(value)
}

// produceValues produces each value (nil: a tombstone) to testTopic in
// order, keyed by its index so that partition 0 holds them all.
func produceValues(t *testing.T, cl *kgo.Client, values ...*string) {
	t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		r := &kgo.Record{Topic: testTopic, Partition: 0}
		if v != nil {
			r.Value = []byte(*v)
		}
		recs = append(recs, r)
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func ptr(s string) *string { return &s }

// cdcRun runs the binary over testTopic with kafka.format format until
// idle, expects verify to pass, and returns the database for checks.
func cdcRun(t *testing.T, bin, cfgPath string) *sql.DB {
	t.Helper()
	rep := runUntilIdle(t, bin, cfgPath)
	if !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
	db, err := sql.Open("duckdb", filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// wantRows checks a query's rows, each its values joined by "|", NULL as
// "".
func wantRows(t *testing.T, db *sql.DB, q string, want ...string) {
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

// Debezium changes of three source tables in one topic (one with the
// schema wrapper, two without) each go to their changelog table, typed;
// a tombstone and a heartbeat make no row; a message that is not a change
// and one whose column changed type go to the dead-letter table with the
// reason. A second run over new messages adds a column to a table that
// has rows, and doubles nothing: verify passes after each run.
func TestCDCDebeziumRoutesToChangelogTables(t *testing.T) {
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: debezium", "")
	order := func(op, after string, pos int) *string {
		return ptr(`{"before":null,"after":` + after + `,"source":{"db":"inventory","table":"orders","file":"mysql-bin.000003","pos":` +
			strings.Repeat("1", pos) + `,"row":0,"ts_ms":1700000000000},"op":"` + op + `","ts_ms":1700000000100}`)
	}
	produceValues(t, cl,
		ptr(fixtureValue(t, "debezium_mysql_create_schema.txt")),
		order("c", `{"id":1,"sku":"a","qty":3}`, 1),
		nil, // a tombstone
		ptr(`{"before":null,"after":{"code":"p1","label":"Pen"},"source":{"db":"inventory","table":"products","file":"mysql-bin.000003","pos":5,"ts_ms":1700000000000},"op":"r","ts_ms":1}`),
		ptr(`{"source":{"db":"inventory"},"after":{}}`), // no op: not a change
		order("u", `{"id":1,"sku":"a","qty":"three"}`, 2),
		order("u", `{"id":1,"sku":"a","qty":4}`, 3),
	)
	db := cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT log_table, source_database, source_table FROM cdc_routes ORDER BY 1`,
		"cdc_inventory_customers_log|inventory|customers",
		"cdc_inventory_orders_log|inventory|orders",
		"cdc_inventory_products_log|inventory|products")
	wantRows(t, db, `SELECT id, cdc_op, qty, koffset, kindex, cdc_key, cdc_source_time FROM cdc_inventory_orders_log ORDER BY koffset`,
		`1|c|3|1|0||2023-11-14T22:13:20Z`, `1|u|4|6|0||2023-11-14T22:13:20Z`)
	wantRows(t, db, `SELECT cdc_op, code, label FROM cdc_inventory_products_log`, "r|p1|Pen")
	wantRows(t, db, `SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_inventory_customers_log' AND column_name IN ('id', 'price', 'created', 'meta', 'active') ORDER BY column_name`,
		"BOOLEAN", "TIMESTAMP", "INTEGER", "JSON", "DECIMAL(10,2)")
	wantRows(t, db, `SELECT count(*), count(cdc_position) FROM cdc_inventory_customers_log`, "1|1")
	wantRows(t, db, `SELECT "offset", stage, error LIKE '%op is missing%' FROM cdc_dlq WHERE "offset" = 4`, "4|decode|true")
	wantRows(t, db, `SELECT "offset", error LIKE '%column qty of source table "inventory"."orders" is BIGINT%makes it VARCHAR%' FROM cdc_dlq WHERE "offset" = 5`, "5|true")
	db.Close()

	// A column shows up at the source: the table that has rows gains it.
	produceValues(t, cl, order("u", `{"id":1,"sku":"a","qty":5,"note":"gift"}`, 4))
	db = cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT koffset, qty, note FROM cdc_inventory_orders_log ORDER BY koffset`, "1|3|", "6|4|", "7|5|gift")
	wantRows(t, db, `SELECT count(*) FROM cdc_dlq`, "2")
}

// A Canal message of three rows makes three rows of one record (kindex
// 0..2); Maxwell's changes of three tables go to three tables. A second
// run under another consumer group (no committed offsets: it starts from
// the ledger) doubles nothing.
func TestCDCCanalAndMaxwell(t *testing.T) {
	bin := buildBinary(t)
	t.Run("canal", func(t *testing.T) {
		cluster, cl := startKafka(t, 1)
		cfgPath := writeConfig(t, cluster, "format: canal", "")
		msg := func(table, typ, data string, id int) *string {
			return ptr(`{"data":` + data + `,"database":"shop","es":1589373515000,"id":` + strings.Repeat("1", id) +
				`,"isDdl":false,"mysqlType":{"id":"bigint(20)","name":"varchar(255)","price":"decimal(10,2)"},"old":null,"pkNames":["id"],"table":"` + table + `","ts":1589373515477,"type":"` + typ + `"}`)
		}
		produceValues(t, cl,
			msg("items", "INSERT", `[{"id":"1","name":"a","price":"1.50"},{"id":"2","name":"b","price":"2.00"},{"id":"3","name":"c","price":null}]`, 1),
			msg("users", "INSERT", `[{"id":"7","name":"ann"}]`, 2),
			msg("carts", "DELETE", `[{"id":"9"}]`, 3),
			ptr(`{"database":"shop"}`),
		)
		db := cdcRun(t, bin, cfgPath)
		wantRows(t, db, `SELECT koffset, kindex, id, name, price::VARCHAR, cdc_op, cdc_key::VARCHAR FROM cdc_shop_items_log ORDER BY kindex`,
			`0|0|1|a|1.50|c|["id"]`, `0|1|2|b|2.00|c|["id"]`, `0|2|3|c||c|["id"]`)
		wantRows(t, db, `SELECT data_type FROM information_schema.columns WHERE table_name = 'cdc_shop_items_log' AND column_name IN ('id', 'price') ORDER BY column_name`,
			"BIGINT", "DECIMAL(10,2)")
		wantRows(t, db, `SELECT id, name FROM cdc_shop_users_log`, "7|ann")
		wantRows(t, db, `SELECT id, cdc_op FROM cdc_shop_carts_log`, "9|d")
		wantRows(t, db, `SELECT "offset" FROM cdc_dlq`, "3")
		db.Close() // DuckDB lets one process open the file
		if rep := runUntilIdle(t, bin, cfgPath, "TRACELAKE_KAFKA_GROUP=again"); !rep.OK {
			t.Fatalf("verify after the second run: %+v", rep)
		}
		db = cdcRun(t, bin, cfgPath)
		wantRows(t, db, `SELECT count(*) FROM cdc_shop_items_log`, "3")
	})
	t.Run("maxwell", func(t *testing.T) {
		cluster, cl := startKafka(t, 1)
		cfgPath := writeConfig(t, cluster, "format: maxwell", "")
		msg := func(table, typ, data string, pos int) *string {
			return ptr(`{"database":"crm","table":"` + table + `","type":"` + typ + `","ts":1449786310,"xid":940752,"position":"master.000006:` +
				strings.Repeat("9", pos) + `","primary_key_columns":["id"],"data":` + data + `}`)
		}
		produceValues(t, cl,
			msg("leads", "insert", `{"id":1,"name":"Lem","score":10.5}`, 1),
			msg("deals", "update", `{"id":2,"stage":"won"}`, 2),
			msg("notes", "delete", `{"id":3,"body":"x"}`, 3),
			ptr(`{"database":"crm","table":"leads","type":"table-alter","ts":1449786311000,"sql":"ALTER TABLE leads ADD c INT","def":{}}`),
		)
		db := cdcRun(t, bin, cfgPath)
		wantRows(t, db, `SELECT id, name, score, cdc_op, cdc_source_time FROM cdc_crm_leads_log`, "1|Lem|10.5|c|2015-12-10T22:25:10Z")
		wantRows(t, db, `SELECT id, stage, cdc_op FROM cdc_crm_deals_log`, "2|won|u")
		wantRows(t, db, `SELECT id, cdc_op FROM cdc_crm_notes_log`, "3|d")
		wantRows(t, db, `SELECT count(*) FROM cdc_dlq`, "0")
	})
}

// With merge.every, a run merges every changelog table into its model
// with no model configured: the latest row per primary key, deletes
// applied; a second run's changes (an older one delivered late among
// them) move the models on, and `tracelake merge` then has nothing left.
func TestCDCModelsMergedByRun(t *testing.T) {
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: maxwell", "merge: {every: 1h}")
	ts := 1449786310 // 2015-12-10T22:25:10Z
	msg := func(table, typ, data string, pos int) *string {
		return ptr(`{"database":"crm","table":"` + table + `","type":"` + typ + `","ts":` + strconv.Itoa(ts) + `,"xid":1,"position":"master.000006:` +
			strconv.Itoa(pos) + `","primary_key_columns":["id"],"data":` + data + `}`)
	}
	ready := func(table string) (string, error) {
		out, err := exec.Command(bin, "ready", "--config", cfgPath, "--table", table, "--hour", "2015-12-10T22").CombinedOutput()
		return string(out), err
	}
	produceValues(t, cl,
		msg("leads", "insert", `{"id":1,"name":"Lem"}`, 100),
		msg("leads", "insert", `{"id":2,"name":"Ann"}`, 110),
		msg("deals", "insert", `{"id":7,"stage":"new"}`, 120),
		msg("leads", "update", `{"id":1,"name":"Stanislaw"}`, 130),
		msg("leads", "delete", `{"id":2,"name":"Ann"}`, 140),
	)
	db := cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT id, name, cdc_position FROM cdc_crm_leads ORDER BY id`, "1|Stanislaw|"+position(6, 130, 0))
	wantRows(t, db, `SELECT id, stage FROM cdc_crm_deals`, "7|new")
	db.Close()
	// Nothing loaded past 23:00 yet: the hour is not done.
	if out, err := ready("cdc_crm_leads"); err == nil || !strings.Contains(out, "not ready") || strings.Contains(out, "no table") {
		t.Errorf("ready before the hour's end: %v\n%s", err, out)
	}
	// A misspelt name is not ready either, and says why.
	if out, err := ready("cdc_crm_laeds"); err == nil || !strings.Contains(out, "not ready (no table of that name") {
		t.Errorf("ready of a table that does not exist: %v\n%s", err, out)
	}
	ts += 3600 // the second run's changes are an hour later

	produceValues(t, cl,
		msg("deals", "update", `{"id":7,"stage":"won"}`, 150),
		msg("leads", "update", `{"id":1,"name":"late"}`, 125), // older than the model's row
		msg("leads", "insert", `{"id":2,"name":"Ann again"}`, 160),
	)
	db = cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT id, name FROM cdc_crm_leads ORDER BY id`, "1|Stanislaw", "2|Ann again")
	wantRows(t, db, `SELECT id, stage FROM cdc_crm_deals`, "7|won")
	db.Close()
	// A change past 23:00 loaded and merged: 22:00 is done for both
	// tables fed by the partition.
	for _, table := range []string{"cdc_crm_leads", "cdc_crm_deals"} {
		if out, err := ready(table); err != nil || !strings.Contains(out, "ready") {
			t.Errorf("ready %s after the hour's end: %v\n%s", table, err, out)
		}
	}
	out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "no changelog table has rows its model lacks") {
		t.Errorf("tracelake merge after the runs: %v\n%s", err, out)
	}
}

// position is a Maxwell position's text as cdc_position holds it.
func position(file, pos, xoffset int) string {
	return fmt.Sprintf("%0*d.%0*d.%0*d", cdc.PositionDigits, file, cdc.PositionDigits, pos, cdc.PositionDigits, xoffset)
}

// With cdc.heartbeats, a change of the heartbeat table (a row the source
// updates every little while, in its log with every other change) moves
// the done marks of tables whose partitions are quiet: partition 1 holds
// deals' change of 22:25 and nothing after, so without a heartbeat 22:00
// is not done for either table (both may have changes to come on it);
// the heartbeat of 23:05 on partition 0, read while partition 1 had
// loaded everything, proves that every change before 23:05 was in Kafka,
// and 22:00 is done.
func TestCDCHeartbeatMovesQuietTables(t *testing.T) {
	h := newHeartbeatTest(t)
	cfgPath := writeConfig(t, h.cluster, "format: maxwell", "merge: {every: 1h}\ncdc: {heartbeats: [{table: ops.heartbeat}]}")
	h.produce(h.msg(testTopic, 0, "leads", `{"id":1,"name":"Lem"}`, beatAt, 100), h.msg(testTopic, 1, "deals", `{"id":7,"stage":"new"}`, beatAt, 110),
		h.msg(testTopic, 0, "leads", `{"id":2,"name":"Ann"}`, beatAt+2400, 120)) // 23:05
	cdcRun(t, h.bin, cfgPath).Close()
	// Partition 0 reached 23:05, partition 1 22:25; a change of either
	// table may come on either partition (a new key hashes anywhere).
	if h.ready(cfgPath, "cdc_crm_leads") || h.ready(cfgPath, "cdc_crm_deals") {
		t.Fatalf("before the heartbeat, 22:00 is done: leads %v, deals %v", h.ready(cfgPath, "cdc_crm_leads"), h.ready(cfgPath, "cdc_crm_deals"))
	}
	h.produce(h.msg(testTopic, 0, "heartbeat", `{"id":1,"beat":"23:05"}`, beatAt+2410, 130))
	db := cdcRun(t, h.bin, cfgPath)
	wantRows(t, db, `SELECT id, stage FROM cdc_crm_deals`, "7|new")
	db.Close()
	for _, table := range []string{"cdc_crm_leads", "cdc_crm_deals"} {
		if !h.ready(cfgPath, table) {
			t.Errorf("%s's 22:00 is not done after a heartbeat of 23:05 with every partition loaded to its end", table)
		}
	}
}

// `tracelake dlq replay` takes change capture's dead letters through the
// changelog decoder: here a change that would widen a column the
// operator indexed is dead-lettered, and one whose number became a time
// can never fit. Once the index is dropped, a replay loads the first
// into its changelog table (widening the column) and puts the second back
// with its reason; the next merge brings the model up to the replayed
// change, although the model had merged past its offset; verify passes.
func TestCDCReplayDeadLetteredChanges(t *testing.T) {
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: canal", "merge: {every: 1h}")
	msg := func(qtyType, id, qty string) *string {
		return ptr(`{"data":[{"id":"` + id + `","qty":"` + qty + `"}],"database":"shop","es":1589373515000,"id":1,"isDdl":false,` +
			`"mysqlType":{"id":"int(11)","qty":"` + qtyType + `"},"old":null,"pkNames":["id"],"table":"items","ts":1589373515477,"type":"INSERT"}`)
	}
	produceValues(t, cl, msg("int(11)", "1", "3"))
	db := cdcRun(t, bin, cfgPath)
	if _, err := db.Exec(`CREATE INDEX items_by_id ON cdc_shop_items_log (id)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	produceValues(t, cl, msg("bigint(20)", "2", "3000000000"), msg("datetime", "3", "2020-01-01 00:00:00"), msg("int(11)", "4", "4"))
	db = cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT id, qty FROM cdc_shop_items ORDER BY id`, "1|3", "4|4")
	wantRows(t, db, `SELECT "offset" FROM cdc_dlq ORDER BY "offset"`, "1", "2")
	if _, err := db.Exec(`DROP INDEX items_by_id`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	replay := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"dlq", "replay", "--config", cfgPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("dlq replay: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := replay("--dry-run"); !strings.Contains(out, "dry run: would replay 2 dead-letter rows into the changelog tables: 1 loaded, 1 still failing") {
		t.Errorf("dry run:\n%s", out)
	}
	if out := replay(); !strings.Contains(out, "replayed 2 dead-letter rows into the changelog tables: 1 loaded, 1 still failing") ||
		!strings.Contains(out, "TIMESTAMP") {
		t.Errorf("replay:\n%s", out)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	if rep := verifyJSON(t, bin, cfgPath, 0); !rep.OK {
		t.Fatalf("verify: %+v", rep)
	}
	db, err := sql.Open("duckdb", filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wantRows(t, db, `SELECT id, qty, typeof(qty) FROM cdc_shop_items ORDER BY id`, "1|3|BIGINT", "2|3000000000|BIGINT", "4|4|BIGINT")
	wantRows(t, db, `SELECT "offset" FROM cdc_dlq`, "2")
}
