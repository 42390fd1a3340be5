package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic written by a transactional producer: committed transactions
// load, aborted ones never do, an open one waits. The commit and abort
// markers take offsets: the ledger covers them, the committed offset
// reaches the last stable offset, and exit-when-idle exits with lag 0;
// offsets skipped before the first record read are covered too.
// Before, aborted records were loaded (read uncommitted) and a partition
// ending in a marker never looked caught up.
func TestTransactionalProducer(t *testing.T) {
	c := newCluster(t, 2)
	txn := producer(t, c, kgo.TransactionalID("tx-producer"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx := context.Background()
	want := map[string]bool{}
	produceTxn := func(name string, n int, end kgo.TransactionEndTry) {
		t.Helper()
		must(t, txn.BeginTransaction())
		for i := range n {
			v := fmt.Sprintf(`{"txn": %q, "i": %d}`, name, i)
			produce(t, txn, &kgo.Record{Topic: topic, Value: []byte(v)})
			if end == kgo.TryCommit {
				want[v] = true
			}
		}
		must(t, txn.Flush(ctx))
		if name != "open" {
			must(t, txn.EndTransaction(ctx, end))
		}
	}
	// The log starts with an aborted transaction: the first record read
	// comes after it, and the first range must still start at offset 0.
	produceTxn("aborted0", 5, kgo.TryAbort)
	produceTxn("first", 100, kgo.TryCommit)
	produceTxn("aborted", 50, kgo.TryAbort)
	produceTxn("second", 100, kgo.TryCommit)
	produceTxn("aborted2", 7, kgo.TryAbort)
	// A transaction left open: its records are not readable yet.
	openWant := map[string]bool{}
	must(t, txn.BeginTransaction())
	for i := range 30 {
		v := fmt.Sprintf(`{"txn": "open", "i": %d}`, i)
		produce(t, txn, &kgo.Record{Topic: topic, Value: []byte(v)})
		openWant[v] = true
	}
	must(t, txn.Flush(ctx))

	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	runUntilIdle(t, cfg, s, nil)

	rows, err := s.DB().Query(`SELECT raw_data::VARCHAR FROM trace_raw`)
	must(t, err)
	got := map[string]bool{}
	for rows.Next() {
		var v string
		must(t, rows.Scan(&v))
		if got[v] {
			t.Errorf("loaded twice: %s", v)
		}
		got[v] = true
	}
	must(t, rows.Err())
	for v := range got {
		if !want[v] {
			t.Errorf("loaded a record of an aborted or open transaction: %s", v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("loaded %d records, want the %d of committed transactions", len(got), len(want))
	}
	rep := verifyOK(t, cfg, s)
	adm := kadm.NewClient(txn)
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	must(t, err)
	committed, err := adm.FetchOffsets(ctx, cfg.Kafka.Group)
	must(t, err)
	lso.Each(func(o kadm.ListedOffset) {
		if c, _ := committed.Lookup(topic, o.Partition); c.At != o.Offset {
			t.Errorf("partition %d: committed %d, last stable offset %d", o.Partition, c.At, o.Offset)
		}
	})
	for _, p := range rep.Partitions {
		if p.Lag != 0 {
			t.Errorf("partition %d: lag %d after the run", p.Partition, p.Lag)
		}
	}

	// Once the open transaction commits, its records load too.
	must(t, txn.EndTransaction(ctx, kgo.TryCommit))
	for v := range openWant {
		want[v] = true
	}
	runUntilIdle(t, cfg, s, nil)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != int64(len(want)) {
		t.Errorf("after the open transaction committed: %d rows, want %d", n, len(want))
	}
	verifyOK(t, cfg, s)
}
