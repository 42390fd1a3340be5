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
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// replayTest is a transform-mode config loading testTopic's two
// partitions into items (id BIGINT NOT NULL, qty BIGINT).
type replayTest struct {
	t            *testing.T
	bin, cfgPath string
	dbPath       string
	cl           *kgo.Client
}

func newTransformReplayTest(t *testing.T) *replayTest {
	t.Helper()
	return newTransformReplayTestOf(t, 2)
}

// newTransformReplayTestOf is newTransformReplayTest over partitions
// partitions.
func newTransformReplayTestOf(t *testing.T, partitions int32) *replayTest {
	t.Helper()
	cluster, _ := startKafka(t, partitions)
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
	rt := &replayTest{t: t, bin: buildBinary(t), cfgPath: cfgPath, dbPath: filepath.Join(filepath.Dir(cfgPath), "test.duckdb"), cl: cl}
	rt.exec(`CREATE TABLE items (id BIGINT NOT NULL, qty BIGINT)`)
	return rt
}

// exec runs statements on the database file, closed after (run and the
// commands need it free).
func (rt *replayTest) exec(stmts ...string) {
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
func (rt *replayTest) rows(q string, want ...string) {
	rt.t.Helper()
	db, err := sql.Open("duckdb", rt.dbPath)
	if err != nil {
		rt.t.Fatal(err)
	}
	defer db.Close()
	wantRows(rt.t, db, q, want...)
}

// produce produces each value to its partition.
func (rt *replayTest) produce(partition int32, values ...string) {
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
func (rt *replayTest) replay(wantSummary string, args ...string) {
	rt.t.Helper()
	out, err := exec.Command(rt.bin, append([]string{"dlq", "replay", "--config", rt.cfgPath}, args...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), wantSummary) {
		rt.t.Fatalf("dlq replay %v: %v, want %q in\n%s", args, err, wantSummary, out)
	}
}

// verified runs verify and wants it to pass with rows loaded and dlq
// dead letters.
func (rt *replayTest) verified(rows, dlq int64) {
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
func TestLongDLQReplayOfATransformTableInSteps(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("builds and runs the binary; long: run with -run '^TestLong' without -race")
	}
	t.Parallel()
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

// Dead letters of a raw table on two partitions, below what a model
// merged, their values mended by hand and replayed with `dlq replay` in
// two steps (--where one partition, then the rest): each step lowers the
// model's watermarks, so the next `merge` takes the replayed rows in
// (nothing stays pending), the model holds every key once, and verify's
// counts follow each step.
func TestDLQReplayOfARawTableReachesItsModel(t *testing.T) {
	rt := newRawModelReplayTest(t)
	rt.produce(0, `{"id":1,"name":"one"`, `{"id":2,"name":"two"}`)
	rt.produce(1, `{"id":3,"name":"three"}`, `not json 4`, `{"id":5,"name":"five"}`)
	if rep := runUntilIdle(t, rt.bin, rt.cfgPath); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	rt.merge()
	rt.rows(`SELECT id, name FROM people ORDER BY id`, "2|two", "3|three", "5|five")
	rt.verified(3, 2)

	// The fix: the values as they were meant.
	rt.exec(`UPDATE trace_raw_dlq SET "value" = ('{"id":1,"name":"one"}')::BLOB WHERE "partition" = 0`,
		`UPDATE trace_raw_dlq SET "value" = ('{"id":4,"name":"four"}')::BLOB WHERE "partition" = 1`)
	rt.replay("replayed 1 dead-letter rows into trace_raw: 1 loaded, 0 still failing", "--where", `"partition" = 1`)
	rt.verified(4, 1)
	rt.merge()
	rt.rows(`SELECT id, name FROM people ORDER BY id`, "2|two", "3|three", "4|four", "5|five")
	rt.replay("replayed 1 dead-letter rows into trace_raw: 1 loaded, 0 still failing")
	rt.verified(5, 0)
	rt.merge()
	rt.rows(`SELECT id, name, count(*) OVER (PARTITION BY id) FROM people ORDER BY id`, "1|one|1", "2|two|1", "3|three|1", "4|four|1", "5|five|1")
	rep := verifyJSON(t, rt.bin, rt.cfgPath, 0)
	for _, m := range rep.Models {
		if m.Pending != 0 {
			t.Errorf("model %s: %d raw rows pending after the merge", m.Model, m.Pending)
		}
	}
}

// newRawModelReplayTest is a raw-mode config (table trace_raw) over
// testTopic's two partitions with the model people (id, name).
func newRawModelReplayTest(t *testing.T) *replayTest {
	t.Helper()
	cluster, _ := startKafka(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfgPath := writeConfig(t, cluster, "", `merge:
  models:
    - name: people
      key: [id]
      columns:
        id:   {path: $.id, type: BIGINT}
        name: {path: $.name, type: VARCHAR}`)
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text = []byte(strings.Replace(string(text), "sink: {duckdb:", "sink: {table: trace_raw, duckdb:", 1))
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}
	return &replayTest{t: t, bin: buildBinary(t), cfgPath: cfgPath, dbPath: filepath.Join(filepath.Dir(cfgPath), "test.duckdb"), cl: cl}
}

// merge runs `tracelake merge`.
func (rt *replayTest) merge() {
	rt.t.Helper()
	if out, err := exec.Command(rt.bin, "merge", "--config", rt.cfgPath).CombinedOutput(); err != nil {
		rt.t.Fatalf("merge: %v\n%s", err, out)
	}
}

// A replay killed (SIGKILL) once it has staged the rows, inside its
// transaction, leaves the dead-letter table and the table as they were;
// the next replay loads every dead letter once, and verify passes after
// each.
func TestLongDLQReplayKilledMidwayLoadsOnceWhenRunAgain(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("builds and runs the binary; long: run with -run '^TestLong' without -race")
	}
	t.Parallel()
	const n = 40000
	rt := newTransformReplayTestOf(t, 1)
	values := make([]string, n)
	for i := range values {
		values[i] = fmt.Sprintf(`{"id":%d,"qty":"q%d"}`, i, i)
	}
	rt.produce(0, values...)
	if rep := runUntilIdle(t, rt.bin, rt.cfgPath); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	rt.verified(0, n)
	rt.exec(`ALTER TABLE items ALTER qty TYPE VARCHAR`)

	replay := exec.Command(rt.bin, "dlq", "replay", "--config", rt.cfgPath)
	if err := replay.Start(); err != nil {
		t.Fatal(err)
	}
	stage := rt.dbPath + ".stage"
	deadline := time.Now().Add(60 * time.Second)
	for !staged(t, stage) {
		if time.Now().After(deadline) {
			t.Fatal("the replay staged nothing within 60s")
		}
		time.Sleep(time.Millisecond) // polling the stage directory, the condition awaited
	}
	if err := replay.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := replay.Wait(); err == nil {
		t.Skip("the replay committed before it was killed: nothing killed midway")
	}
	rt.rows(`SELECT count(*) FROM items_dlq`, strconv.Itoa(n))
	rt.rows(`SELECT count(*) FROM items`, "0")
	rt.verified(0, n)

	rt.replay(fmt.Sprintf("replayed %d dead-letter rows into items: %d loaded, 0 still failing", n, n))
	rt.rows(`SELECT count(*), count(DISTINCT id) FROM items`, fmt.Sprintf("%d|%d", n, n))
	rt.verified(n, 0)
}

// staged reports whether dir holds a staged file.
func staged(t *testing.T, dir string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(entries) > 0
}

// Change capture's dead letters of two partitions, each a message of two
// rows, replayed in two steps (--where one partition, then the rest):
// each step moves its records from the ledger's dead-letter count to
// their rows', so verify passes after each, the model holds every row
// once, and a third replay finds nothing.
func TestCDCReplayOfTwoPartitionsInSteps(t *testing.T) {
	bin := buildBinary(t)
	cluster, _ := startKafka(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	rt := &replayTest{t: t, bin: bin, cl: cl, cfgPath: writeConfig(t, cluster, "format: canal", "merge: {every: 1h}")}
	rt.dbPath = filepath.Join(filepath.Dir(rt.cfgPath), "test.duckdb")
	msg := func(qtyType string, ids ...int) string {
		rows := make([]string, len(ids))
		for i, id := range ids {
			rows[i] = fmt.Sprintf(`{"id":"%d","qty":"%d"}`, id, 3000000000+id)
		}
		return `{"data":[` + strings.Join(rows, ",") + `],"database":"shop","es":1589373515000,"id":1,"isDdl":false,` +
			`"mysqlType":{"id":"int(11)","qty":"` + qtyType + `"},"old":null,"pkNames":["id"],"table":"items","ts":1589373515477,"type":"INSERT"}`
	}
	rt.produce(0, strings.ReplaceAll(msg("int(11)", 1), "3000000001", "1"))
	rt.produce(1, strings.ReplaceAll(msg("int(11)", 10), "3000000010", "10"))
	if rep := runUntilIdle(t, bin, rt.cfgPath); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	// Widening qty is refused while the index is there: the messages of
	// two rows are dead-lettered.
	rt.exec(`CREATE INDEX items_by_id ON cdc_shop_items_log (id)`)
	rt.produce(0, msg("bigint(20)", 2, 3))
	rt.produce(1, msg("bigint(20)", 11, 12))
	if rep := runUntilIdle(t, bin, rt.cfgPath); !rep.OK {
		t.Fatalf("verify: %v", rep.Problems)
	}
	rt.rows(`SELECT "partition", "offset" FROM cdc_dlq ORDER BY ALL`, "0|1", "1|1")
	rt.exec(`DROP INDEX items_by_id`)

	rt.replay("replayed 1 dead-letter rows into the changelog tables: 1 loaded, 0 still failing", "--where", `"partition" = 1`)
	rt.verified(4, 1)
	rt.merge()
	rt.rows(`SELECT id FROM cdc_shop_items ORDER BY id`, "1", "10", "11", "12")
	rt.replay("replayed 1 dead-letter rows into the changelog tables: 1 loaded, 0 still failing")
	rt.verified(6, 0)
	rt.replay("replayed 0 dead-letter rows into the changelog tables: 0 loaded, 0 still failing")
	rt.merge()
	rt.rows(`SELECT id, qty FROM cdc_shop_items ORDER BY id`, "1|1", "2|3000000002", "3|3000000003", "10|10", "11|3000000011", "12|3000000012")
	rt.verified(6, 0)
}
