package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
)

// stuckSink's loads never commit: each one waits until the run is
// stopped hard, as a load against a database that hangs. entered is
// closed when the first load begins.
type stuckSink struct {
	sink.Sink
	entered chan struct{}
	once    sync.Once
}

func (s *stuckSink) Load(ctx context.Context, _ []sink.File) (sink.Loaded, error) {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return sink.Loaded{}, fmt.Errorf("injected: load hangs: %w", ctx.Err())
}

// ownedAt returns a partition of topic the status page shows owned and
// starting at next, other than not; -1 if none.
func ownedAt(status *obs.Status, next int64, not int32) int32 {
	for _, ps := range status.Snapshot().Partitions {
		if ps.Topic == topic && ps.Partition != not && ps.Next == next {
			return ps.Partition
		}
	}
	return -1
}

// With start_offset latest, a partition assigned with no position in the
// ledger and no committed offset starts at its end, N. Before, that start
// lived only in an offset commit the loader made at its next tick, after
// a load, or at a clean shutdown: a partition gained in a rebalance while
// the loader retried a hanging load, then a crash (kill -9: no shutdown,
// no commit), left it nowhere, and the next run started at the end as it
// was then, skipping every record produced in between (verify counted
// them as skipped on purpose). Every record at N or later must load.
func TestLatestStartSurvivesACrashWhileLoading(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo := func(p int32, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"p": %d, "i": %d}`, p, i)})
		}
	}
	produceTo(0, 0, 10) // before the first start: skipped by latest
	produceTo(1, 0, 10)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.StartOffset = "latest"
	s := openSink(t, cfg)

	// Offset commits fail once the process is "killed": nothing it would
	// commit on its way down reaches Kafka, as after a kill -9.
	var killed atomic.Bool
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !killed.Load() {
			return nil, nil, false
		}
		return failedCommit(req.(*kmsg.OffsetCommitRequest), kerr.CoordinatorNotAvailable), nil, true
	})

	// Another member of the group holds both partitions first, so the
	// run gains its second one in a rebalance, once its loader is stuck.
	assigned := make(chan struct{})
	var assignedOnce sync.Once
	other := producer(t, c,
		kgo.ConsumerGroup(cfg.Kafka.Group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			assignedOnce.Do(func() { close(assigned) })
		}))
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("the other member was not assigned within 30s")
	}

	stuck := &stuckSink{Sink: s, entered: make(chan struct{})}
	status, stats := obs.NewStatus(), &pipeline.Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hard, kill := context.WithCancel(context.Background())
	defer kill()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, hard, cfg, stuck, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Status: status, Stats: stats,
		})
	}()

	first := int32(-1)
	await(t, "the run owns a partition, starting at its end", func() bool { first = ownedAt(status, 10, -1); return first >= 0 })
	produceTo(first, 10, 15)
	select {
	case <-stuck.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no load began within 30s")
	}

	other.Close() // its partition moves to the run
	second := 1 - first
	await(t, "the run gains the other partition, starting at its end", func() bool { return ownedAt(status, 10, first) == second })
	produceTo(second, 10, 15)
	await(t, "the records of both partitions read", func() bool { return stats.Consumed.Load() >= 10 })

	killed.Store(true)
	cancel()
	kill()
	if err := <-done; err == nil {
		t.Fatal("the killed run returned no error, want its load's failure")
	}

	// The next run: every record produced since each partition's start
	// (offsets 10-14 of each) loads.
	produceTo(0, 15, 17)
	produceTo(1, 15, 17)
	killed.Store(false)
	runIdleWithin(t, cfg, s, nil, time.Minute)
	for p := range int32(2) {
		if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = ?`, p); n != 7 {
			t.Errorf("partition %d: %d rows, want 7 (offsets 10-16, everything produced after the run started it at 10)", p, n)
		}
	}
	rep := verifyOK(t, cfg, s)
	for _, p := range rep.Partitions {
		if p.Skipped != 10 {
			t.Errorf("partition %d: verify counts %d offsets skipped on purpose, want 10 (those before the first start)", p.Partition, p.Skipped)
		}
	}
}
