package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// A Canal message holds several rows (data[]): the ledger counts the
// rows a record made (records) or the record dead-lettered (dlq_records),
// and verify compares them with the rows stored. `dlq replay` used to
// turn a dead letter of a message of two rows into two changelog rows and
// leave the ledger's counts as they were (one dead letter), so verify
// failed after the replay: "ledger counts 2 records, tables hold 3". Now
// the replay moves each record from the dead-letter count to its rows'.
func TestCDCReplayOfAMessageOfTwoRowsVerifies(t *testing.T) {
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: canal", "merge: {every: 1h}")
	msg := func(qtyType string, rows ...string) *string {
		return ptr(`{"data":[` + strings.Join(rows, ",") + `],"database":"shop","es":1589373515000,"id":1,"isDdl":false,` +
			`"mysqlType":{"id":"int(11)","qty":"` + qtyType + `"},"old":null,"pkNames":["id"],"table":"items","ts":1589373515477,"type":"INSERT"}`)
	}
	produceValues(t, cl, msg("int(11)", `{"id":"1","qty":"3"}`))
	db := cdcRun(t, bin, cfgPath)
	if _, err := db.Exec(`CREATE INDEX items_by_id ON cdc_shop_items_log (id)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Widening qty is refused while the index is there: the message of
	// two rows is dead-lettered.
	produceValues(t, cl, msg("bigint(20)", `{"id":"2","qty":"3000000000"}`, `{"id":"3","qty":"4"}`))
	db = cdcRun(t, bin, cfgPath)
	wantRows(t, db, `SELECT "offset" FROM cdc_dlq`, "1")
	if _, err := db.Exec(`DROP INDEX items_by_id`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out, err := exec.Command(bin, "dlq", "replay", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 loaded, 0 still failing") {
		t.Fatalf("dlq replay: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	if rep := verifyJSON(t, bin, cfgPath, 0); !rep.OK {
		t.Fatalf("verify after the replay: %v", rep.Problems)
	}
}

// heartbeatTest is a Maxwell source over testTopic's two partitions
// (produced to by partition) with the heartbeat table ops.heartbeat.
type heartbeatTest struct {
	t       *testing.T
	bin     string
	cluster *kfake.Cluster
	cl      *kgo.Client
}

func newHeartbeatTest(t *testing.T) *heartbeatTest {
	t.Helper()
	cluster, _ := startKafka(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &heartbeatTest{t: t, bin: buildBinary(t), cluster: cluster, cl: cl}
}

// msg is a Maxwell change of table (crm's, or ops.heartbeat) on
// partition p of topic at ts (seconds) and binlog position pos.
func (h *heartbeatTest) msg(topic string, p int32, table, data string, ts, pos int) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: p, Value: []byte(`{"database":"` + map[bool]string{true: "ops", false: "crm"}[table == "heartbeat"] +
		`","table":"` + table + `","type":"update","ts":` + strconv.Itoa(ts) + `,"xid":1,"position":"master.000006:` +
		strconv.Itoa(pos) + `","primary_key_columns":["id"],"data":` + data + `}`)}
}

func (h *heartbeatTest) produce(recs ...*kgo.Record) {
	h.t.Helper()
	if err := h.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// ready says whether table is marked done for 2015-12-10T22.
func (h *heartbeatTest) ready(cfgPath, table string) bool {
	h.t.Helper()
	out, err := exec.Command(h.bin, "ready", "--config", cfgPath, "--table", table, "--hour", "2015-12-10T22").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not ready") {
		h.t.Fatalf("ready %s: %v\n%s", table, err, out)
	}
	return err == nil
}

const beatAt = 1449786310 // 2015-12-10T22:25:10Z

// A partition of the heartbeat's topics whose records Kafka deleted
// (retention) before tracelake read them has nothing to load: its log
// starts at its end. The heartbeat's listing of ends names it (end 1),
// the ledger has nothing of it, and MarkReady took it as a partition of
// unknown progress (coalesce(next_offset, 0) >= end failed): it held back
// every table of the topic for good, although the heartbeat proves that
// nothing before 23:05 is still to come on it. Without cdc.heartbeats
// leads would be marked (partition 1 is in neither the ledger nor
// cdc_routes_reached); with them it never was. The same held for a
// partition start_offset latest skipped. Now a partition whose log starts
// at its end has nothing left to load.
func TestCDCHeartbeatWithAPartitionEmptiedByRetention(t *testing.T) {
	h := newHeartbeatTest(t)
	cfgPath := writeConfig(t, h.cluster, "format: maxwell", "merge: {every: 1h}\ncdc: {heartbeats: [{table: ops.heartbeat}]}")
	h.produce(h.msg(testTopic, 1, "deals", `{"id":7,"stage":"new"}`, beatAt, 90))
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: testTopic, Partition: 1, At: 1, LeaderEpoch: -1})
	resp, err := kadm.NewClient(h.cl).DeleteRecords(context.Background(), offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	h.produce(h.msg(testTopic, 0, "leads", `{"id":1,"name":"Lem"}`, beatAt, 100),
		h.msg(testTopic, 0, "heartbeat", `{"id":1,"beat":"23:05"}`, beatAt+2400, 130)) // 23:05
	cdcRun(t, h.bin, cfgPath).Close()
	if !h.ready(cfgPath, "cdc_crm_leads") {
		t.Errorf("cdc_crm_leads's 22:00 is not done after a heartbeat of 23:05, every partition loaded to its end (partition 1 has nothing to load)")
	}
}

// A topic of the heartbeat's topics that is deleted (a Debezium topic of
// a source table dropped, or of a connector removed) stays in the ledger
// and in cdc_routes_reached, so MarkReady asks its end offsets at every
// round; the listing failed for the topic Kafka no longer knows, and with
// it the heartbeats of every topic: "done marks go by the changes alone
// this round", every round. Now a deleted topic is left out of it. leads's partition 1 reached 22:26 and
// has loaded everything; the heartbeat of 23:05 should mark 22:00 done.
func TestCDCHeartbeatAfterATopicIsDeleted(t *testing.T) {
	h := newHeartbeatTest(t)
	const other = "llm-traces-other"
	if _, err := kadm.NewClient(h.cl).CreateTopic(context.Background(), 1, 1, nil, other); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {brokers: [%q], topic_regex: '^llm-traces', format: maxwell}\nmerge: {every: 1h}\ncdc: {heartbeats: [{table: ops.heartbeat}]}\nsink: {duckdb: {path: %q}}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
		h.cluster.ListenAddrs()[0], filepath.Join(dir, "test.duckdb"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	h.produce(h.msg(testTopic, 0, "leads", `{"id":1,"name":"Lem"}`, beatAt, 100),
		h.msg(testTopic, 1, "leads", `{"id":2,"name":"Ann"}`, beatAt+60, 110),
		h.msg(other, 0, "deals", `{"id":7,"stage":"new"}`, beatAt+300, 120))
	cdcRun(t, h.bin, cfgPath).Close()
	if _, err := kadm.NewClient(h.cl).DeleteTopics(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	h.produce(h.msg(testTopic, 0, "heartbeat", `{"id":1,"beat":"23:05"}`, beatAt+2400, 130))
	run := exec.Command(h.bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if !h.ready(cfgPath, "cdc_crm_leads") {
		t.Errorf("cdc_crm_leads's 22:00 is not done after a heartbeat of 23:05, every partition of its topic loaded to its end")
	}
}

// With kafka.start_offset latest a partition with neither a ledger
// position nor a committed offset starts at its end as the run started:
// the records before are skipped on purpose, and nothing goes into the
// ledger for them (the start is committed to the group alone). MarkReady
// listed the partition (log start 0, end 1), found nothing of it in the
// ledger, and took it as a partition with records to load and none
// loaded: it held every table of the topic back until a change loaded
// on it — for good on a quiet partition, whatever the heartbeats or
// cdc.idle said. Now the group's committed offset, listed before the
// marks' snapshot, is where the partition's records to load start. Here partition 1
// had a change of deals before the first run; after it, leads changes
// on partition 0 at 22:25 and the heartbeat of 23:05 loads, and
// partition 1 has nothing to load: leads's 22:00 is complete.
func TestCDCStartOffsetLatestPartitionDoesNotHoldMarks(t *testing.T) {
	h := newHeartbeatTest(t)
	cfgPath := writeConfig(t, h.cluster, "format: maxwell, start_offset: latest", "merge: {every: 1h}\ncdc: {heartbeats: [{table: ops.heartbeat}]}")
	h.produce(h.msg(testTopic, 1, "deals", `{"id":7,"stage":"new"}`, beatAt-3600, 90)) // before the first run: skipped
	cdcRun(t, h.bin, cfgPath).Close()
	h.produce(h.msg(testTopic, 0, "leads", `{"id":1,"name":"Lem"}`, beatAt, 100),
		h.msg(testTopic, 0, "heartbeat", `{"id":1,"beat":"23:05"}`, beatAt+2400, 130)) // 23:05
	db := cdcRun(t, h.bin, cfgPath)
	wantRows(t, db, `SELECT count(*) FROM cdc_crm_leads`, "1")
	db.Close()
	if !h.ready(cfgPath, "cdc_crm_leads") {
		t.Errorf("cdc_crm_leads's 22:00 is not done after a heartbeat of 23:05, every partition read to its end (partition 1's record skipped by start_offset latest)")
	}
}

// The done marks' listing of offsets (merge.Marking.Ends) named only the
// topics the changelog tables' changes had come from: a shard on a topic
// of its own (Debezium's dbserver1.db.order_01 beside order_00, mapped to
// one table by cdc.shards) whose changes had not loaded yet was not
// listed, and its table was marked done with them still in Kafka. Now
// the listing names every topic read too (not the others), so that
// MarkReady sees its records to load.
func TestMarkListingNamesEveryTopicRead(t *testing.T) {
	topics := []string{"dbserver1.db.order_00", "dbserver1.db.order_01", "dbserver2.db.order_00"}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("kafka: {brokers: [%q], topic_regex: '^dbserver1\\.', format: debezium}\nsink: {duckdb: {path: %q}}\n",
		cluster.ListenAddrs()[0], filepath.Join(dir, "test.duckdb"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.FromFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	hb, closeHB, err := newMarkSources(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeHB)
	asked := []string{"dbserver1.db.order_00"}
	listed, err := hb.ends(context.Background(), asked)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for tp := range listed {
		got = append(got, fmt.Sprintf("%s/%d", tp.Topic, tp.Partition))
	}
	slices.Sort(got)
	want := []string{"dbserver1.db.order_00/0", "dbserver1.db.order_00/1", "dbserver1.db.order_01/0", "dbserver1.db.order_01/1"}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if len(asked) != 1 {
		t.Errorf("the caller's topics changed: %v", asked)
	}
}
