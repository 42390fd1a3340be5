package main

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// transformReplayTest is a transform-mode config loading testTopic's two
// partitions into items (id BIGINT NOT NULL, qty BIGINT).
type transformReplayTest struct {
	t            *testing.T
	bin, cfgPath string
	dbPath       string
	cl           *kgo.Client
}

func newTransformReplayTest(t *testing.T) *transformReplayTest {
	t.Helper()
	cluster, _ := startKafka(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfgPath := writeConfig(t, cluster, "", "mode: transform")
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text = []byte(strings.Replace(string(text), "sink: {duckdb:", "sink: {table: items, duckdb:", 1))
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	rt := &transformReplayTest{t: t, bin: buildBinary(t), cfgPath: cfgPath, dbPath: filepath.Join(filepath.Dir(cfgPath), "test.duckdb"), cl: cl}
	rt.exec(`CREATE TABLE items (id BIGINT NOT NULL, qty BIGINT)`)
	return rt
}

// exec runs statements on the database file, closed after (run and the
// commands need it free).
func (rt *transformReplayTest) exec(stmts ...string) {
	rt.t.Helper()
	db, err := sql.Open("duckdb", rt.dbPath)
	if err != nil {
		rt.t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			rt.t.Fatalf("%s: %v", s, err)
		}
	}
}

// rows is what q returns on the closed database file.
func (rt *transformReplayTest) rows(q string, want ...string) {
	rt.t.Helper()
	db, err := sql.Open("duckdb", rt.dbPath)
	if err != nil {
		rt.t.Fatal(err)
	}
	defer db.Close()
	wantRows(rt.t, db, q, want...)
}

// produce produces each value to its partition.
func (rt *transformReplayTest) produce(partition int32, values ...string) {
	rt.t.Helper()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: testTopic, Partition: partition, Value: []byte(v)})
	}
	if err := rt.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		rt.t.Fatal(err)
	}
}

// replay runs `dlq replay` with args and checks its summary line.
func (rt *transformReplayTest) replay(wantSummary string, args ...string) {
	rt.t.Helper()
	out, err := exec.Command(rt.bin, append([]string{"dlq", "replay", "--config", rt.cfgPath}, args...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), wantSummary) {
		rt.t.Fatalf("dlq replay %v: %v, want %q in\n%s", args, err, wantSummary, out)
	}
}

// verified runs verify and wants it to pass with rows loaded and dlq
// dead letters.
func (rt *transformReplayTest) verified(rows, dlq int64) {
	rt.t.Helper()
	rep := verifyJSON(rt.t, rt.bin, rt.cfgPath, 0)
	if !rep.OK {
		rt.t.Fatalf("verify: %v", rep.Problems)
	}
	if gotRows, gotDLQ := rep.Totals(); gotRows != rows || gotDLQ != dlq {
		rt.t.Fatalf("verify counts %d rows and %d dead letters, want %d and %d", gotRows, gotDLQ, rows, dlq)
	}
}

// Dead letters of two partitions of a transform-mode table, replayed
// after the fix (a column's type changed) in steps: a dry run changes
// nothing, a --where takes one partition's, the rest follow, a row that
// fails again stays with its new reason, and replaying again and loading
// after it adds nothing. verify's counts follow each step and each row is
// in the table once.
func TestDLQReplayOfATransformTableInSteps(t *testing.T) {
	rt := newTransformReplayTest(t)
	rt.produce(0, `{"id":1,"qty":"one"}`, `{"id":2,"qty":2}`)
	rt.produce(1, `{"qty":3}`, `{"id":4,"qty":"four"}`)
	if rep := runUntilIdle(t, rt.bin, rt.cfgPath); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	rt.rows(`SELECT "partition", "offset" FROM items_dlq ORDER BY ALL`, "0|0", "1|0", "1|1")
	rt.verified(1, 3)

	// The fix: qty takes text.
	rt.exec(`ALTER TABLE items ALTER qty TYPE VARCHAR`)
	rt.replay("dry run: would replay 3 dead-letter rows into items: 2 loaded, 1 still failing", "--dry-run")
	rt.rows(`SELECT count(*) FROM items_dlq`, "3")
	rt.rows(`SELECT id FROM items`, "2")
	rt.verified(1, 3)

	rt.replay("replayed 1 dead-letter rows into items: 1 loaded, 0 still failing", "--where", `"partition" = 0`)
	rt.rows(`SELECT id, qty FROM items ORDER BY id`, "1|one", "2|2")
	rt.verified(2, 2)

	rt.replay("replayed 2 dead-letter rows into items: 1 loaded, 1 still failing")
	rt.rows(`SELECT id, qty FROM items ORDER BY id`, "1|one", "2|2", "4|four")
	rt.rows(`SELECT "partition", "offset", stage, error LIKE '%NOT NULL%' FROM items_dlq`, "1|0|load|true")
	rt.verified(3, 1)

	// Again: the row still failing is the only candidate, and stays.
	rt.replay("replayed 1 dead-letter rows into items: 0 loaded, 1 still failing")
	rt.rows(`SELECT "partition", "offset" FROM items_dlq`, "1|0")
	rt.verified(3, 1)

	// Loading on from the ledger reads none of the replayed records again.
	rt.produce(1, `{"id":5,"qty":5}`)
	if rep := runUntilIdle(t, rt.bin, rt.cfgPath); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	rt.rows(`SELECT id, count(*) FROM items GROUP BY id ORDER BY id`, "1|1", "2|1", "4|1", "5|1")
	rt.verified(4, 1)
}
