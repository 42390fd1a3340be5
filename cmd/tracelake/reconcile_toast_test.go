package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/reconcile/mariadbtest"
)

// `tracelake reconcile --source` of a model whose updates left a large
// value unread (Debezium's placeholder, as its PostgreSQL connector writes
// for a TOAST value an update did not change under REPLICA IDENTITY
// DEFAULT; here a MariaDB table stands in for the source, which reconcile
// reads): the model keeps each such value from the key's earlier change,
// in the round of the update and across rounds, and is EQUAL to the
// source, with and without the schema wrapper.
func TestReconcileToastedModelWithMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary, starts MariaDB")
	}
	srv, root := startShop(t, `CREATE TABLE shop.docs (id BIGINT PRIMARY KEY, v VARCHAR(20) NOT NULL, doc LONGTEXT NULL)`)
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: debezium", "")
	lsn := 1000
	var recs []*kgo.Record
	// change runs stmt on the server and queues its event of row id: the
	// row as the server holds it after, doc as the placeholder when the
	// statement did not change it and unread is set.
	change := func(op string, id int, unread bool, stmt string, args ...any) {
		t.Helper()
		mariadbtest.Exec(t, root, fmt.Sprintf(strings.ReplaceAll(stmt, "?", "%v"), args...))
		var v string
		var doc *string
		if err := root.QueryRow(`SELECT v, doc FROM shop.docs WHERE id = ?`, id).Scan(&v, &doc); err != nil {
			t.Fatal(err)
		}
		docJSON := "null"
		switch {
		case unread:
			docJSON = `"__debezium_unavailable_value"`
		case doc != nil:
			docJSON = fmt.Sprintf("%q", *doc)
		}
		lsn += 10
		ev := fmt.Sprintf(`{"before":null,"after":{"id":%d,"v":%q,"doc":%s},"op":%q,"ts_ms":1700000000001,`+
			`"source":{"connector":"postgresql","name":"pg","db":"shop","schema":"public","table":"docs","lsn":%d,"ts_ms":1700000000000}}`,
			id, v, docJSON, op, lsn)
		if id%2 == 0 {
			ev = `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","optional":true,"fields":[{"field":"id","type":"int64"},` +
				`{"field":"v","type":"string"},{"field":"doc","type":"string","optional":true}]}]},"payload":` + ev + `}`
		}
		recs = append(recs, &kgo.Record{Topic: testTopic, Key: []byte(fmt.Sprintf(`{"id":%d}`, id)), Value: []byte(ev)})
	}
	ingest := func() {
		t.Helper()
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		recs = nil
		if rep := runUntilIdle(t, bin, cfgPath); !rep.OK {
			t.Fatalf("ingest: %v", rep.Problems)
		}
		if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
			t.Fatalf("merge: %v\n%s", err, out)
		}
	}
	big := func(id int) string { return "'" + strings.Repeat(fmt.Sprintf("doc %d ", id), 400) + "'" }
	for id := 1; id <= 4; id++ {
		change("c", id, false, "INSERT INTO shop.docs VALUES (?, 'new', ?)", id, big(id))
		change("u", id, true, "UPDATE shop.docs SET v = 'paid' WHERE id = ?", id) // same round
	}
	ingest()
	change("u", 1, true, "UPDATE shop.docs SET v = 'shipped' WHERE id = ?", 1) // from the model's row
	change("u", 2, false, "UPDATE shop.docs SET doc = 'short' WHERE id = ?", 2)
	change("u", 2, true, "UPDATE shop.docs SET v = 'shipped' WHERE id = ?", 2)
	change("u", 4, true, "UPDATE shop.docs SET v = 'returned' WHERE id = ?", 4)
	ingest()
	cmd := exec.Command(bin, "reconcile", "--config", cfgPath, "--source", srv.DSN("reader", "r3ad-only", "shop"), "--table", "shop.docs")
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitOK || !strings.HasPrefix(string(out), "EQUAL") || !strings.Contains(string(out), "rows:            4 vs 4") {
		t.Fatalf("reconcile: exit %d\n%s", code, out)
	}
}
