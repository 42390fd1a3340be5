package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/reconcile"
	"github.com/tracelake/tracelake/internal/reconcile/mariadbtest"
)

// shopModel models shop.orders from its Debezium change events; the model's
// types differ from the source's where CDC models usually do (a wider
// DECIMAL, TIMESTAMP for DATETIME).
const shopModel = `merge:
  models:
    - name: orders
      format: debezium
      key: [order_id]
      columns:
        order_id: {path: $.order_id, type: BIGINT}
        customer: {path: $.customer, type: VARCHAR}
        status: {path: $.status, type: VARCHAR}
        total: {path: $.total, type: "DECIMAL(18,4)"}
        placed_at: {path: $.placed_at, type: TIMESTAMP}
        ship_date: {path: $.ship_date, type: DATE}
        note: {path: $.note, type: VARCHAR}`

// sourceWriter writes changes to shop.orders and, for each, produces the change
// event Debezium's MySQL connector would (decimal.handling.mode=string,
// temporal values as ISO-8601 text), row images read back from the
// server: what the binary log would carry.
type sourceWriter struct {
	t    *testing.T
	db   *sql.DB
	prod *kgo.Client
	recs []*kgo.Record
}

// image is the row of order id as the server holds it, as JSON; "" if
// there is none.
func (c *sourceWriter) image(id int) string {
	c.t.Helper()
	var (
		orderID                 int64
		customer, status, total string
		placedAt                time.Time
		shipDate                sql.NullTime
		note                    sql.NullString
	)
	err := c.db.QueryRow(`SELECT order_id, customer, status, CAST(total AS CHAR), placed_at, ship_date, note FROM shop.orders WHERE order_id = ?`, id).
		Scan(&orderID, &customer, &status, &total, &placedAt, &shipDate, &note)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		c.t.Fatal(err)
	}
	row := map[string]any{"order_id": orderID, "customer": customer, "status": status, "total": total,
		"placed_at": placedAt.UTC().Format("2006-01-02T15:04:05.000000Z"), "ship_date": nil, "note": nil}
	if shipDate.Valid {
		row["ship_date"] = shipDate.Time.Format(time.DateOnly)
	}
	if note.Valid {
		row["note"] = note.String
	}
	b, err := json.Marshal(row)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

// change runs stmt (about order id) on the server and queues its event;
// a delete is followed by its tombstone.
func (c *sourceWriter) change(id int, stmt string, args ...any) {
	c.t.Helper()
	before := c.image(id)
	if _, err := c.db.Exec(stmt, args...); err != nil {
		c.t.Fatalf("%s: %v", stmt, err)
	}
	after := c.image(id)
	op := map[bool]map[bool]string{true: {true: "u", false: "d"}, false: {true: "c"}}[before != ""][after != ""]
	null := func(s string) string { return cmpOr(s, "null") }
	key := []byte(fmt.Sprintf(`{"order_id":%d}`, id))
	ev := fmt.Sprintf(`{"before":%s,"after":%s,"source":{"connector":"mysql","db":"shop","table":"orders"},"op":%q,"ts_ms":%d}`,
		null(before), null(after), op, time.Now().UnixMilli())
	if id%2 == 0 { // with and without the schema wrapper, as converters are configured
		ev = `{"schema":{"type":"struct","optional":false},"payload":` + ev + `}`
	}
	c.recs = append(c.recs, &kgo.Record{Topic: testTopic, Key: key, Value: []byte(ev)})
	if op == "d" {
		c.recs = append(c.recs, &kgo.Record{Topic: testTopic, Key: key})
	}
}

// flush produces the queued events.
func (c *sourceWriter) flush() {
	c.t.Helper()
	if err := c.prod.ProduceSync(context.Background(), c.recs...).FirstErr(); err != nil {
		c.t.Fatal(err)
	}
	c.recs = nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// startShop starts MariaDB with the database shop made by stmts and a
// user reader (password r3ad-only) that may only SELECT from it over TCP
// (srv.DSN("reader", "r3ad-only", "shop")); root is a pool as root.
func startShop(t *testing.T, stmts ...string) (srv *mariadbtest.Server, root *sql.DB) {
	t.Helper()
	srv = mariadbtest.Start(t)
	root = srv.Root(t, "")
	mariadbtest.Exec(t, root, append(append([]string{"CREATE DATABASE shop"}, stmts...),
		"CREATE USER 'reader'@'127.0.0.1' IDENTIFIED BY 'r3ad-only'",
		"GRANT SELECT ON shop.* TO 'reader'@'127.0.0.1'")...)
	return srv, root
}

// comSelect is the number of SELECT statements the server has run.
func comSelect(t *testing.T, db *sql.DB) int {
	t.Helper()
	var name string
	var n int
	if err := db.QueryRow(`SHOW GLOBAL STATUS LIKE 'Com_select'`).Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// `tracelake reconcile --source` against a real MariaDB: orders are
// inserted, updated, deleted and one re-inserted on the server while their
// Debezium change events go through Kafka, tracelake run and merge into the
// orders model; reconcile, reading the source in key ranges of four rows
// as a user with only SELECT, finds model and source EQUAL. Then, behind
// the stream's back, one order is changed, one deleted and one inserted on
// the server: reconcile exits 1 naming each key and how it differs.
func TestReconcileWithMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, starts MariaDB")
	}
	srv, root := startShop(t,
		`CREATE TABLE shop.orders (order_id BIGINT PRIMARY KEY, customer VARCHAR(40) NOT NULL, status VARCHAR(20) NOT NULL,
			total DECIMAL(12,2) NOT NULL, placed_at DATETIME(6) NOT NULL, ship_date DATE NULL, note VARCHAR(100) NULL)`,
		"CREATE TABLE shop.audit (at DATETIME, what TEXT)")
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 2)
	cfgPath := writeConfig(t, cluster, "group: cdc", shopModel)
	c := &sourceWriter{t: t, db: root, prod: prod}
	placed := time.Date(2024, 5, 1, 10, 11, 12, 123456000, time.UTC)
	ingest := func() {
		t.Helper()
		c.flush()
		if rep := runUntilIdle(t, bin, cfgPath); !rep.OK {
			t.Fatalf("ingest: %v", rep.Problems)
		}
		if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
			t.Fatalf("merge: %v\n%s", err, out)
		}
	}
	const n = 20
	for id := 1; id <= n; id++ {
		var ship, note any
		if id%3 != 0 {
			ship = placed.AddDate(0, 0, id).Format(time.DateOnly)
		}
		if id%4 == 0 {
			note = fmt.Sprintf("gift wrap, Grüße #%d", id)
		}
		c.change(id, `INSERT INTO shop.orders VALUES (?, ?, 'new', ?, ?, ?, ?)`,
			id, fmt.Sprintf("customer-%d", id%7), fmt.Sprintf("%d.%02d", id*10, id), placed.Add(time.Duration(id)*time.Minute), ship, note)
	}
	ingest()
	for _, id := range []int{2, 5, 8, 13} {
		c.change(id, `UPDATE shop.orders SET status = 'paid', total = total + 0.01, note = NULL WHERE order_id = ?`, id)
	}
	c.change(5, `UPDATE shop.orders SET status = 'shipped', ship_date = '2024-06-01' WHERE order_id = ?`, 5)
	for _, id := range []int{3, 9, 17} {
		c.change(id, `DELETE FROM shop.orders WHERE order_id = ?`, id)
	}
	c.change(9, `INSERT INTO shop.orders VALUES (9, 'customer-9', 'new', 99.90, ?, NULL, 'ordered again')`, placed.Add(time.Hour))
	ingest()

	source := srv.DSN("reader", "r3ad-only", "shop")
	reconcileCmd := func(extra ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"reconcile", "--config", cfgPath, "--source", source, "--table", "shop.orders", "--batch", "4"}, extra...)...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	selects := comSelect(t, root)
	out, code := reconcileCmd()
	if code != exitOK || !strings.HasPrefix(out, "EQUAL: shop.orders vs orders over 7 columns") || !strings.Contains(out, "rows:            18 vs 18") {
		t.Fatalf("reconcile after the stream: exit %d\n%s", code, out)
	}
	// 18 rows in key ranges of 4: at least 5 SELECTs on the source (besides
	// the look-ups of the table), none reading it whole.
	if got := comSelect(t, root) - selects; got < 5 {
		t.Errorf("the source was read in %d SELECTs, want at least 5 key ranges of 4 rows", got)
	}

	// Behind the stream's back.
	mariadbtest.Exec(t, root,
		"UPDATE shop.orders SET total = 1000.00 WHERE order_id = 7",
		"DELETE FROM shop.orders WHERE order_id = 11",
		"INSERT INTO shop.orders VALUES (21, 'customer-0', 'new', 1.00, '2024-05-02 00:00:00', NULL, NULL)")
	out, code = reconcileCmd()
	if code != exitFailed {
		t.Fatalf("reconcile after changes behind the stream: exit %d, want %d\n%s", code, exitFailed, out)
	}
	for _, want := range []string{"DIFFERENT", "key 7: values differ", "key 11: missing in shop.orders", "key 21: missing in orders",
		"differing keys read again: 3, of which agree now (changed during the scan): 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	out, _ = reconcileCmd("--json", "--rate", "1000")
	var rep reconcile.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Equal || rep.LeftRows != 18 || rep.RightRows != 18 || rep.Differ != 1 || rep.OnlyLeft != 1 || rep.OnlyRight != 1 || rep.LeftSum == rep.RightSum {
		t.Errorf("report: %+v", rep)
	}
	// Comparing only columns the change did not touch: only the missing rows.
	out, _ = reconcileCmd("--json", "--columns", "order_id,status")
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Differ != 0 || rep.OnlyLeft != 1 {
		t.Errorf("--columns: %v %+v", err, rep)
	}

	// Arguments that cannot be used: one error naming what is wrong, exit 2,
	// the password never shown.
	for _, c := range []struct{ source, table, want string }{
		{"mysql//reader:r3ad-only@127.0.0.1/shop", "shop.orders", "--source: want mysql://user:password@host:port/database"},
		{source, "shop.nope", "source table shop.nope does not exist"},
		{source, "shop.audit", "source table shop.audit has no primary key"},
		{source, "orders", ""}, // the URL's database
	} {
		cmd := exec.Command(bin, "reconcile", "--config", cfgPath, "--source", c.source, "--table", c.table)
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		if c.want == "" {
			if code != exitFailed || !strings.Contains(string(out), "key 7: values differ") {
				t.Errorf("--table %s: exit %d\n%s", c.table, code, out)
			}
			continue
		}
		if code != exitUsage || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "r3ad-only") {
			t.Errorf("--source %s --table %s: exit %d, want %d and %q\n%s", c.source, c.table, code, exitUsage, c.want, out)
		}
	}
}
