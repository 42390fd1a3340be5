package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
	"github.com/tracelake/tracelake/internal/sink"
)

// A partition paused until its start is committed (startLater) has that
// start committed by startPending's retries (commitPending) or, at a
// revoke, by commitRevokedStarts; meanwhile the loader may have committed
// the partition further (a revoke's or the shutdown's flush commits the
// paused partitions' positions too, and the records this worker still
// held of it load). The start's commit then set Kafka's committed offset
// back below that: no rows are lost (the ledger wins at the next
// assignment), but consumer lag and exit-when-idle read the old offset,
// and the loader, taking the partition as committed that far, never
// committed it forward again. A start's commit never moves a partition's
// committed offset back; the start is recorded by the offset past it.
func TestStartCommitNeverMovesTheCommittedOffsetBack(t *testing.T) {
	const topic = "backwards"
	tp := sink.TopicPartition{Topic: topic, Partition: 0}
	cases := []struct {
		name        string
		commitStart func(t *testing.T, w *Worker, ps *pendingStart)
		resumes     bool // the partition is read on (a revoke drops it next)
	}{
		{"retried start", func(t *testing.T, w *Worker, ps *pendingStart) {
			starts := map[string]map[int32]kgo.EpochOffset{topic: {0: {Epoch: -1, Offset: ps.at[tp]}}}
			if err := w.commitPending(context.Background(), ps, starts); err != nil {
				t.Errorf("commit the start: %v", err)
			}
		}, true},
		{"revoke", func(_ *testing.T, w *Worker, _ *pendingStart) {
			w.commitRevokedStarts(map[string][]int32{topic: {0}})
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cluster := kafkatest.Cluster(t, 1, topic)
			cfg := config.Default()
			cfg.Kafka.Brokers, cfg.Kafka.Topics, cfg.Kafka.Group = cluster.ListenAddrs(), []string{topic}, "backwards-group"
			w := newUnrunWorker(t, cfg, time.Second)
			defer w.cl.Close()
			started := func() bool {
				ps := w.partitions(nil)
				return len(ps) == 1 && ps[0].Committed == 0 // its start, 0, committed at assignment
			}
			for deadline := time.Now().Add(20 * time.Second); !started(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the partition was not assigned and its start committed within 20s")
				}
			}
			// The loader commits the partition further.
			dirty := map[sink.TopicPartition]int64{tp: 5}
			w.commit(context.Background(), dirty, false)
			if len(dirty) != 0 {
				t.Fatal("the commit of offset 5 was not accepted")
			}
			// Its start, 0, still to commit, as startLater leaves it.
			ps := &pendingStart{cancel: func() {}, at: map[sink.TopicPartition]int64{tp: 0}}
			w.mu.Lock()
			w.pending[tp] = ps
			w.mu.Unlock()

			c.commitStart(t, w, ps)
			committed, err := kadm.NewClient(kafkatest.Client(t, cluster)).FetchOffsets(context.Background(), cfg.Kafka.Group)
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := committed.Lookup(topic, 0); !ok || o.At != 5 {
				t.Errorf("committed offset %d (found %v) after the start's commit, want 5: moved back", o.At, ok)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if c.resumes && w.pending[tp] != nil {
				t.Error("the partition is still paused: its start is recorded (by the offset past it)")
			}
		})
	}
}
