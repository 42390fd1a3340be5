package main

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/reconcile/mariadbtest"
)

// `tracelake reconcile --source` of a changelog model (kafka.format
// canal: no merge.models, which change capture's configuration refuses)
// against the real MariaDB table it models: the model the templates name
// for the source table (cdc_shop_orders for shop.orders), keyed by the
// source's primary key, is found without --model and is EQUAL to the
// source after the stream, and DIFFERENT once a row changes behind the
// stream's back. Found by a hunt: reconcile looked for the model in
// merge.models alone and exited 2 ("0 models in merge.models have target
// or name orders"), so the check README gives for every model row change
// capture may leave wrong could not run on any of them.
func TestReconcileChangelogModelWithMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, starts MariaDB")
	}
	srv, root := startShop(t, `CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, name VARCHAR(40) NOT NULL, price DECIMAL(10,2) NULL)`)
	mariadbtest.Exec(t, root, "INSERT INTO shop.orders VALUES (1, 'a', 1.50), (2, 'b', NULL), (3, 'c', 3.00)")
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: canal", "")
	msg := func(typ, data, old string, batch int) *string {
		return ptr(`{"data":` + data + `,"database":"shop","es":1589373515000,"id":` + fmt.Sprint(batch) +
			`,"isDdl":false,"mysqlType":{"id":"bigint(20)","name":"varchar(40)","price":"decimal(10,2)"},"old":` + old +
			`,"pkNames":["id"],"table":"orders","ts":` + fmt.Sprint(1589373515477+batch) + `,"type":"` + typ + `"}`)
	}
	produceValues(t, cl,
		msg("INSERT", `[{"id":"1","name":"a","price":"1.50"},{"id":"2","name":"x","price":"2.00"},{"id":"4","name":"d","price":null}]`, "null", 1),
		msg("UPDATE", `[{"id":"2","name":"b","price":null}]`, `[{"name":"x","price":"2.00"}]`, 2),
		msg("UPDATE", `[{"id":"3","name":"c","price":"3.00"}]`, `[{"id":"4","price":null}]`, 3),
	)
	if rep := runUntilIdle(t, bin, cfgPath); !rep.OK {
		t.Fatalf("ingest: %v", rep.Problems)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	source := srv.DSN("reader", "r3ad-only", "shop")
	reconcileCmd := func() (string, int) {
		t.Helper()
		cmd := exec.Command(bin, "reconcile", "--config", cfgPath, "--source", source, "--table", "shop.orders")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := reconcileCmd(); code != exitOK || !strings.HasPrefix(out, "EQUAL") || !strings.Contains(out, "rows:            3 vs 3") {
		t.Fatalf("reconcile of the changelog model after the stream: exit %d\n%s", code, out)
	}
	mariadbtest.Exec(t, root, "UPDATE shop.orders SET price = 9.99 WHERE id = 3")
	if out, code := reconcileCmd(); code != exitFailed || !strings.Contains(out, "key 3: values differ") {
		t.Fatalf("reconcile after a change behind the stream: exit %d\n%s", code, out)
	}
}

// A changelog model holds a source DATE as a TIMESTAMP at its midnight
// (UTC) and a TIME as its BIGINT of µs (MySQL's TIME spans ±838 hours,
// which no time-of-day type holds): reconcile --source compares them
// with the source's DATE and TIME as the values they are, EQUAL where
// they agree and DIFFERENT where one does not. Found by a hunt: every row
// with a date or a time was reported different from the source, so
// reconcile could not tell a wrong row from a right one.
func TestReconcileChangelogModelDatesAndTimes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, starts MariaDB")
	}
	srv, root := startShop(t, `CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, ship DATE NULL, at TIME(6) NULL)`)
	mariadbtest.Exec(t, root, "INSERT INTO shop.orders VALUES (1, '2024-05-01', '10:11:12.500000'), (2, NULL, '-12:30:00'), (3, '2024-06-30', '838:59:59')")
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: canal", "")
	produceValues(t, cl, ptr(`{"data":[{"id":"1","ship":"2024-05-01","at":"10:11:12.500000"},{"id":"2","ship":null,"at":"-12:30:00"},`+
		`{"id":"3","ship":"2024-06-30","at":"838:59:59"}],"database":"shop","es":1589373515000,"id":1,"isDdl":false,`+
		`"mysqlType":{"id":"bigint(20)","ship":"date","at":"time(6)"},"old":null,"pkNames":["id"],"table":"orders","ts":1589373515477,"type":"INSERT"}`))
	if rep := runUntilIdle(t, bin, cfgPath); !rep.OK {
		t.Fatalf("ingest: %v", rep.Problems)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	source := srv.DSN("reader", "r3ad-only", "shop")
	reconcileCmd := func() (string, int) {
		t.Helper()
		cmd := exec.Command(bin, "reconcile", "--config", cfgPath, "--source", source, "--table", "shop.orders")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := reconcileCmd(); code != exitOK || !strings.HasPrefix(out, "EQUAL") {
		t.Fatalf("reconcile of a model with dates and times: exit %d\n%s", code, out)
	}
	mariadbtest.Exec(t, root, "UPDATE shop.orders SET ship = '2024-05-02' WHERE id = 1", "UPDATE shop.orders SET at = '-12:30:01' WHERE id = 2")
	if out, code := reconcileCmd(); code != exitFailed || !strings.Contains(out, "key 1: values differ") || !strings.Contains(out, "key 2: values differ") ||
		strings.Contains(out, "key 3") {
		t.Fatalf("reconcile after a date and a time changed behind the stream: exit %d\n%s", code, out)
	}
}
