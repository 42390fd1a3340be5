package pipeline

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A worker whose pipeline never ran (Run failed to set up a sibling after
// it, and closes it) leaves the group at once. Its client had joined and
// taken partitions; leaving revokes them, and the revoke waited for the
// loader to take a flush that no loader would ever take: Run reported the
// sibling's failure only after RevokeWait (half of kafka.rebalance_timeout,
// 30s by default), one worker after another. The start committed at
// assignment stays committed.
func TestWorkerThatNeverRanLeavesAtOnce(t *testing.T) {
	const topic = "unrun"
	cluster := kafkatest.Cluster(t, 2, topic)
	cfg := config.Default()
	cfg.Kafka.Brokers, cfg.Kafka.Topics, cfg.Kafka.Group = cluster.ListenAddrs(), []string{topic}, "unrun-group"
	// RevokeWait far past the test's patience: a revoke that waits for
	// it shows.
	w := newUnrunWorker(t, cfg, time.Hour)
	// Both partitions assigned and their starts resolved (the start's
	// commit may still be on its way: the revoke must not lose it).
	started := func() bool {
		ps := w.partitions(nil)
		for _, p := range ps {
			if p.Next < 0 {
				return false
			}
		}
		return len(ps) == 2
	}
	for deadline := time.Now().Add(20 * time.Second); !started(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the worker's partitions were not assigned and started")
		}
	}

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		w.cl.Close() // what Run does to the workers set up before a failure
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatalf("closing a worker that never ran still waits (its revoke waits RevokeWait, %s, for a loader that never started)", w.opt.RevokeWait)
	}

	adm := kadm.NewClient(kafkatest.Client(t, cluster))
	committed, err := adm.FetchOffsets(context.Background(), cfg.Kafka.Group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 2; p++ {
		if o, ok := committed.Lookup(topic, p); !ok || o.At != 0 {
			t.Errorf("partition %d: committed %+v (found %v), want its start 0 committed", p, o, ok)
		}
	}
}

// newUnrunWorker is a worker of cfg's group, on a fresh DuckDB sink,
// whose pipeline is not run: its client joins the group and takes
// partitions (their starts resolved and committed as in a run), nothing
// is read. The test closes its client.
func newUnrunWorker(t *testing.T, cfg *config.Config, revokeWait time.Duration) *Worker {
	t.Helper()
	kopts, err := kafka.ConsumerOptions(cfg.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	snk, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "t.duckdb"), StageDir: filepath.Join(dir, "stage"), Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	if err := snk.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(0, Options{
		KafkaOpts: kopts, Sink: snk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Stats: &Stats{}, Metrics: obs.New(), Ready: &obs.Readiness{}, Budget: NewBudget(64 << 20), Workers: 2,
		MaxRecords: 100, MaxBytes: 1 << 20, MaxInterval: time.Second, LoadMaxFiles: 4, LoadInterval: time.Second,
		RevokeWait: revokeWait,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}
