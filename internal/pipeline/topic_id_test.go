package pipeline_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// A topic deleted and recreated while tracelake was stopped, and refilled
// past the ledger's position: its log no longer ends below the ledger, so
// only Kafka's topic id tells it from the old one. The run must stop as
// for a recreated topic whose log is shorter (same error, metric and
// remedy, naming both ids), with nothing of the new log loaded. Before,
// it resumed at the ledger's offset, and the new topic's records below it
// were never loaded nor reported.
func TestTopicRefilledPastTheLedgerStopsTheRun(t *testing.T) {
	c, cl, cfg, s := loadedHundred(t)
	refillRecreated(t, c, cl, 150)
	wantRefilledStopped(t, cfg, s)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 100 {
		t.Errorf("%d rows, want the old topic's 100: nothing of the new log may be loaded over the old ledger", n)
	}
}

// The same on Databend, whose ledger keeps the topic id alike.
func TestTopicRefilledPastTheLedgerStopsTheRunOnDatabend(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	databendConfig(t, cfg, srv)
	s := openDatabendSink(t, srv, cfg.Sink.Table)
	produceNumbers(t, cl, 0, 100)
	runUntilIdle(t, cfg, s, nil)

	refillRecreated(t, c, cl, 150)
	wantRefilledStopped(t, cfg, s)
	if n := len(srv.Rows(cfg.Sink.Table)); n != 100 {
		t.Errorf("%d rows, want the old topic's 100: nothing of the new log may be loaded over the old ledger", n)
	}
}

// The same on Iceberg, whose tables keep the topic id beside the
// positions.
func TestTopicRefilledPastTheLedgerStopsTheRunOnIceberg(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Sink.Type = config.SinkIceberg
	cfg.Sink.Iceberg.CommitInterval = config.Duration(100 * time.Millisecond)
	dir := t.TempDir()
	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: cfg.Sink.Table, Log: testLog(t)})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	must(t, s.Prepare(context.Background()))
	produceNumbers(t, cl, 0, 100)
	runUntilIdle(t, cfg, s, nil)

	refillRecreated(t, c, cl, 150)
	wantRefilledStopped(t, cfg, s)
	stored, err := s.Stored(context.Background(), false)
	must(t, err)
	if n := stored[sink.TopicPartition{Topic: topic}].Count(); n != 100 {
		t.Errorf("%d rows, want the old topic's 100: nothing of the new log may be loaded over the old positions", n)
	}
}

// refillRecreated deletes the test topic and creates it again (a new
// topic id), with n records: more than the old one's 100.
func refillRecreated(t *testing.T, c *kfake.Cluster, cl *kgo.Client, n int) {
	t.Helper()
	adm := kadm.NewClient(cl)
	_, err := adm.DeleteTopics(context.Background(), topic)
	must(t, err)
	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, topic)
	must(t, err)
	fresh := producer(t, c)
	for i := range n {
		produce(t, fresh, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"new": %d}`, i)})
	}
}

// wantRefilledStopped runs cfg over s and wants it stopped on the
// recreated topic, counted as a log reset.
func wantRefilledStopped(t *testing.T, cfg *config.Config, s sink.Sink) {
	t.Helper()
	m, err := runIdleCounting(t, cfg, s)
	if err == nil || !strings.Contains(err.Error(), "deleted and recreated") || !strings.Contains(err.Error(), "topic id") {
		t.Fatalf("run over a topic recreated and refilled past the ledger: %v; want an error saying it was recreated, naming its topic ids", err)
	}
	if got := testutil.ToFloat64(m.LogResets.WithLabelValues(topic)); got < 1 {
		t.Errorf("log resets metric %v, want at least 1", got)
	}
}

// A ledger an older release left has no topic ids: the column is added
// when the sink opens, its rows are not checked (there is nothing to
// check them by) and the next load records the id, so a topic recreated
// and refilled after that stops the run.
func TestTopicIDRecordedFromTheNextLoadOfAnOldLedger(t *testing.T) {
	c, cl, cfg, s := loadedHundred(t)
	if _, err := s.DB().Exec(`ALTER TABLE trace_raw_ledger DROP COLUMN topic_id`); err != nil {
		t.Fatal(err) // the ledger as an older release made it
	}
	must(t, s.Close())
	s = openSink(t, cfg)
	if n := queryInt(t, s.DB(), `SELECT count(topic_id) FROM trace_raw_ledger`); n != 0 {
		t.Fatalf("%d ledger rows with a topic id after the upgrade, want none: the older rows read null", n)
	}

	produceNumbers(t, cl, 100, 120)
	runUntilIdle(t, cfg, s, nil) // the old rows unchecked: it goes on
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw_ledger WHERE last_offset >= 100 AND topic_id IS NULL`); n != 0 {
		t.Errorf("%d ledger rows of the load after the upgrade without a topic id, want none", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 120 {
		t.Errorf("%d rows, want 120", n)
	}

	refillRecreated(t, c, cl, 150)
	wantRefilledStopped(t, cfg, s)
}

// The stop on a recreated topic must leave the group's committed offsets
// of the new topic as they are (Kafka dropped the old topic's with it):
// the remedy, loading the new topic into a new table, starts a partition
// without a ledger position at its committed offset. Before, the stopped
// run's shutdown committed the old ledger's position for the new topic,
// and the new table was read from there: the new log's records below it
// were never loaded, as if there had been no stop.
func TestTopicRefilledPastTheLedgerLeavesTheNewTopicUncommitted(t *testing.T) {
	c, cl, cfg, s := loadedHundred(t)
	refillRecreated(t, c, cl, 150)
	wantRefilledStopped(t, cfg, s)
	offsets, err := kadm.NewClient(cl).FetchOffsets(context.Background(), cfg.Kafka.Group)
	must(t, err)
	if o, ok := offsets.Lookup(topic, 0); ok && o.At >= 0 {
		t.Errorf("the group's committed offset of the recreated topic is %d after the stop, want none: it is the old ledger's position", o.At)
	}

	must(t, s.Close())
	cfg.Sink.Table = "trace_new" // the remedy
	fresh := openSink(t, cfg)
	runUntilIdle(t, cfg, fresh, nil)
	if n := queryInt(t, fresh.DB(), `SELECT count(*) FROM trace_new`); n != 150 {
		t.Errorf("%d rows in the new table, want the new topic's 150", n)
	}
}
