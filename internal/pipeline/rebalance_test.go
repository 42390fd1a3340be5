package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// While a long ingest runs, a second group member joins and leaves again
// and again, moving partitions back and forth mid-batch. At the end every
// record is stored exactly once, the ledger is contiguous, and the group's
// committed offsets equal the ledger (no commit landed out of place).
func TestRebalanceSafety(t *testing.T) {
	const n = 60_000
	c := newCluster(t, 6)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = 700
	cfg.Load.MaxFiles = 3
	s := openSink(t, cfg)
	opts := pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t)}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- pipeline.Run(ctx, context.Background(), cfg, s, opts) }()

	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), cl, topic, n, 5, nil) }()

	// The second member: joins, ingests for a while, leaves; 8 times.
	for i := range 8 {
		bctx, bcancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- pipeline.Run(bctx, context.Background(), cfg, s, opts) }()
		time.Sleep(time.Duration(150+50*i) * time.Millisecond) // how long the member stays is the point
		bcancel()
		if err := <-done; err != nil {
			t.Fatalf("second member, round %d: %v", i, err)
		}
	}
	must(t, <-produced)
	waitRows(t, s, n, nil)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}

	rep := verifyOK(t, cfg, s)
	if rows, _ := rep.Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	committed, err := kadm.NewClient(cl).FetchOffsets(context.Background(), cfg.Kafka.Group)
	must(t, err)
	for _, p := range rep.Partitions {
		o, ok := committed.Lookup(p.Topic, p.Partition)
		if !ok || o.At != p.LedgerNext {
			t.Errorf("partition %d: committed %d, ledger next %d", p.Partition, o.At, p.LedgerNext)
		}
	}
}

// A worker whose loads fail (the database is down) still lets its
// partitions go when another member joins: the revoke waits RevokeWait
// (half of rebalance_timeout), not for loads that cannot finish, and the
// new member loads them. At the end every record is stored exactly once.
func TestRevokeDoesNotWaitForFailingLoads(t *testing.T) {
	const n = 20_000
	c := newCluster(t, 4)
	cl := producer(t, c)
	if err := tracegen.Produce(context.Background(), cl, topic, n, 1, nil); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.RebalanceTimeout = config.Duration(8 * time.Second) // revokes wait at most 4s
	s := openSink(t, cfg)

	run := func(snk sink.Sink, st *obs.Status, m *obs.Metrics) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- pipeline.Run(ctx, context.Background(), cfg, snk, pipeline.RunOptions{
				RetryBase: 10 * time.Millisecond, Log: testLog(t), Status: st, Metrics: m})
		}()
		return func() { cancel(); <-done }
	}
	owned := func(st *obs.Status) int { return len(st.Snapshot().Partitions) }

	down := obs.NewStatus()
	stopDown := run(downSink{s}, down, obs.New())
	await(t, "the failing member owns all 4 partitions", func() bool { return owned(down) == 4 })

	up, upMetrics := obs.NewStatus(), obs.New()
	stopUp := run(s, up, upMetrics)
	await(t, "the failing member let 2 partitions go", func() bool { return owned(down) == 2 })
	await(t, "the new member loads", func() bool { return testutil.ToFloat64(upMetrics.Loads) > 0 })
	stopDown()
	stopUp()

	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
}

// The ledger position seeded at assignment (the ledger ahead of the
// group's committed offset) was committed by the loader's retry tick even
// after a load had committed further: the committed offset went back and
// nothing moved it forward again, so lag stayed and exit-when-idle waited
// forever. A commit never goes below what the worker committed.
func TestSeededCommitNeverMovesBack(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 100)
	// Another group loads the first 100 into the sink: the ledger is
	// ahead of test-group's (absent) commit.
	cfg := testConfig(t, c)
	cfg.Kafka.Group = "first"
	s := openSink(t, cfg)
	runUntilIdle(t, cfg, s, nil)
	must(t, s.Close())
	produceNumbers(t, cl, 100, 200)
	cfg.Kafka.Group = "test-group"
	s = openSink(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Idle after 1.5s: the loader's commit retry tick (every second) runs
	// after the load committed 200.
	must(t, pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
		ExitWhenIdle: 1500 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t),
	}))
	if ctx.Err() != nil {
		t.Error("the run never became idle")
	}
	resp, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "test-group")
	must(t, err)
	if o, _ := resp.Lookup(topic, 0); o.At != 200 {
		t.Errorf("committed offset %d, want 200", o.At)
	}
	verifyOK(t, cfg, s)
}

// A partition lost (its session expired) and assigned back to the same
// worker while the worker still holds unloaded records of it: reading
// resumes past them, so nothing is read twice, and nothing is loaded
// twice. Before, reading resumed at the ledger (here: the log start), the
// records were batched again and one load held two files covering the
// same offsets, which the ledger fence passed both.
func TestPartitionBackToTheSameWorkerWhileHoldingRecords(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 300)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = 100
	cfg.Load.MaxFiles = 100
	cfg.Load.MaxInterval = config.Duration(time.Hour) // nothing loads before the shutdown flush
	s := openSink(t, cfg)

	kick := loseOnce(c)

	stats := &pipeline.Stats{}
	m := obs.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats, Metrics: m})
	}()
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("%s: not within 30s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	await("300 records read", func() bool { return stats.Consumed.Load() >= 300 })
	kick.Store(true)
	await("partition lost and assigned again", func() bool {
		return testutil.ToFloat64(m.Rebalances.WithLabelValues("lost")) >= 1 &&
			testutil.ToFloat64(m.Rebalances.WithLabelValues("assigned")) >= 2
	})
	produceNumbers(t, cl, 300, 350)
	await("the new records read", func() bool { return stats.Consumed.Load() >= 350 })
	time.Sleep(300 * time.Millisecond) // a re-read, if any, would show in Consumed by now
	cancel()
	must(t, <-done)

	if n := stats.Consumed.Load(); n != 350 {
		t.Errorf("%d records read, want 350: records the worker held were read again", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 350 {
		t.Errorf("%d rows, want 350", n)
	}
	verifyOK(t, cfg, s)
}

// A group coordinator that does not answer offset commits holds neither
// polling nor the status page (the worker's lock is not held across the
// network), and a commit gives up after kafka.commit_timeout and is
// retried. Before, the loader held the worker's lock for the whole commit
// (with no timeout but the hard stop): reading stopped with it.
func TestSlowCoordinatorDoesNotBlockPolling(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.CommitTimeout = config.Duration(500 * time.Millisecond)
	s := openSink(t, cfg)

	// Offset commits stall until release is closed, but for the first:
	// where the partition starts, committed before it is read.
	release := make(chan struct{})
	stalled := make(chan struct{}, 1)
	var started atomic.Bool
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if started.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		select {
		case <-release:
			return nil, nil, false
		default:
		}
		select {
		case stalled <- struct{}{}:
		default:
		}
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})

	stats := &pipeline.Stats{}
	status := obs.NewStatus()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
			ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats, Status: status,
		})
	}()
	produceNumbers(t, cl, 0, 100)
	select {
	case <-stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("no offset commit within 30s")
	}
	produceNumbers(t, cl, 100, 200)
	deadline := time.Now().Add(5 * time.Second)
	for stats.Consumed.Load() < 200 {
		if time.Now().After(deadline) {
			t.Fatalf("%d records read in 5s while a commit stalled; want 200: polling waited for the commit", stats.Consumed.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := make(chan struct{})
	go func() { status.Snapshot(); close(got) }()
	select {
	case <-got:
	case <-time.After(time.Second):
		t.Fatal("the status page waited for the commit")
	}
	close(release)
	must(t, <-done)
	verifyOK(t, cfg, s)
}

// revokeWatch is a log handler noting how many records the process had
// read when each revoke before the shutdown began.
type revokeWatch struct {
	slog.Handler
	*revokes
}

type revokes struct {
	stats    *pipeline.Stats
	mu       sync.Mutex
	at       []int64
	stopping bool
}

func (r revokeWatch) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	switch {
	case strings.HasPrefix(rec.Message, "idle:"):
		r.stopping = true
	case strings.HasPrefix(rec.Message, "partitions revoked") && !r.stopping:
		r.at = append(r.at, r.stats.Consumed.Load())
	}
	r.mu.Unlock()
	return r.Handler.Handle(ctx, rec)
}

func (r revokeWatch) WithAttrs(as []slog.Attr) slog.Handler {
	return revokeWatch{Handler: r.Handler.WithAttrs(as), revokes: r.revokes}
}

// The workers of one process read nothing until all of them joined the
// group, so the first assignment that reads is balanced: no partition
// moves after records of it were read. Before, the first worker to join
// took every partition and started loading; the second one's arrival
// moved half of them, and the revoke waited for their loads (3.5 s of a
// 200,000-message run). Here the second worker's join is delayed by half
// a second to make the race certain.
func TestWorkersOfAProcessStartBalanced(t *testing.T) {
	c := newCluster(t, 4)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 2000)
	var newMembers atomic.Int32
	c.ControlKey(kmsg.JoinGroup.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.JoinGroupRequest).MemberID == "" && newMembers.Add(1) == 2 {
			c.SleepControl(func() { time.Sleep(500 * time.Millisecond) })
		}
		return nil, nil, false
	})
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	stats := &pipeline.Stats{}
	watch := revokeWatch{Handler: testLog(t).Handler(), revokes: &revokes{stats: stats}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
		// Idle only after the delayed join and its rebalance (heartbeats
		// come every 3s).
		ExitWhenIdle: 4 * time.Second, RetryBase: 10 * time.Millisecond, Log: slog.New(watch), Stats: stats,
	}))
	watch.mu.Lock()
	defer watch.mu.Unlock()
	for _, n := range watch.at {
		if n != 0 {
			t.Errorf("a partition moved after %d records were read; revokes began at %v read", n, watch.at)
			break
		}
	}
	verifyOK(t, cfg, s)
}

// start_offset latest: where a partition began loading is committed, so
// that a later run (or another process, which lists later ends) starts
// there too and loads what was produced after the first start. Before,
// that position was committed only by the loader's commit tick, once a
// second: a run stopped (or a partition revoked) before the tick left no
// commit and no ledger row, and the next run started at the end as it was
// then, skipping the records produced in between; verify counted them as
// skipped on purpose. The shutdown's and the revoke's flush commit it.
func TestStartOffsetLatestCommittedByARunStoppedAtOnce(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 10) // before the first start: skipped
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.StartOffset = "latest"
	s := openSink(t, cfg)

	status, stop := runWithStatus(t, cfg, s)
	await(t, "the partition starts at its end", func() bool { return startsAt(status, 0, 10) })
	stop()
	resp, err := kadm.NewClient(cl).FetchOffsets(context.Background(), cfg.Kafka.Group)
	must(t, err)
	if o, ok := resp.Lookup(topic, 0); !ok || o.At != 10 {
		t.Errorf("committed offset %d after the first run, want 10 (where it began)", o.At)
	}

	produceNumbers(t, cl, 10, 15) // after the first start: loaded
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset >= 10`); n != 5 {
		t.Errorf("%d rows of the records produced after the first start, want 5", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset < 10`); n != 0 {
		t.Errorf("%d rows of the records produced before the first start, want none (latest)", n)
	}
}

// runWithStatus runs the pipeline with a status page until stop is
// called (which fails the test if the run failed).
func runWithStatus(t *testing.T, cfg *config.Config, snk sink.Sink) (*obs.Status, func()) {
	t.Helper()
	status := obs.NewStatus()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, snk, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Status: status,
		})
	}()
	stopped := false
	stop := func() {
		t.Helper()
		if !stopped {
			stopped = true
			cancel()
			must(t, <-done)
		}
	}
	t.Cleanup(stop)
	return status, stop
}

// startsAt says whether the status page shows partition p of topic
// owned, its reading to start at next.
func startsAt(status *obs.Status, p int32, next int64) bool {
	for _, ps := range status.Snapshot().Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return ps.Next == next
		}
	}
	return false
}

// A partition created while running starts at its beginning, also with
// start_offset latest; where it began is committed as any partition's
// start, so that the next run starts there too. Before, nothing was
// committed for it until something of it loaded: a run stopped before
// its first record left no position, and the next run (latest) started
// at its end as it was then, skipping every record produced to it in
// between; verify counted them as skipped on purpose.
func TestPartitionCreatedWhileRunningKeepsItsStart(t *testing.T) {
	c, cl, cfg := latestWithPartitionsToCome(t)
	s := openSink(t, cfg)

	status, stop := runWithStatus(t, cfg, s)
	await(t, "partition 0 starts at its end", func() bool { return startsAt(status, 0, 10) })
	_, err := kadm.NewClient(cl).CreatePartitions(context.Background(), 1, topic)
	must(t, err)
	await(t, "partition 1, created while running, starts at its beginning", func() bool { return startsAt(status, 1, 0) })
	stop()

	cl = producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())) // sees 2 partitions
	for i := range 5 {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`); n != 5 {
		t.Errorf("%d rows of partition 1, created while the first run ran, want its 5 records", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 0`); n != 0 {
		t.Errorf("%d rows of partition 0, want none (latest)", n)
	}
}

// A partition assigned while the shutdown's last load runs (created while
// running, as here, or handed over by a member that left) has its start
// seeded after that flush took the seeded positions. The revoke that
// leaving the group makes was the last moment to commit it, and it
// committed nothing: only the loader's commit tick could, racing the
// leave, and once its commit lost the race (or failed) no position was
// left. The next run (start_offset latest) then started the partition at
// its end, skipping every record produced to it in between. Here the
// tick's commit of that partition fails, and the revoke begins once it
// has.
func TestStartAssignedDuringTheFinalFlushIsCommitted(t *testing.T) {
	c, cl, cfg := latestWithPartitionsToCome(t)
	cfg.Batch.MaxInterval = config.Duration(time.Hour)
	cfg.Load.MaxInterval = config.Duration(time.Hour) // the shutdown's flush is the first load
	s := openSink(t, cfg)
	g := &gatedSink{Sink: s, entered: make(chan struct{}), release: make(chan struct{})}

	// Commits of partition 1 fail until the revoke began, and the
	// revoke begins once one failed.
	var revoking atomic.Bool
	failed := make(chan struct{})
	var failOnce sync.Once
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if revoking.Load() || !commitsPartition(r, 1) {
			return nil, nil, false
		}
		failOnce.Do(func() { close(failed) })
		return failedCommit(r, kerr.RequestTimedOut), nil, true
	})
	log := slog.New(onMessage{Handler: testLog(t).Handler(), prefix: "partitions revoked", do: func() {
		select {
		case <-failed:
		case <-time.After(10 * time.Second):
			t.Error("no commit of partition 1 before the revoke within 10s")
		}
		revoking.Store(true)
	}})

	status, stats := obs.NewStatus(), &pipeline.Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, g, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: log, Status: status, Stats: stats,
		})
	}()
	await(t, "partition 0 starts at its end", func() bool { return startsAt(status, 0, 10) })
	produceNumbers(t, cl, 10, 15)
	await(t, "the new records read", func() bool { return stats.Consumed.Load() >= 5 })
	cancel()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the shutdown's flush did not load within 30s")
	}
	_, err := kadm.NewClient(cl).CreatePartitions(context.Background(), 1, topic)
	must(t, err)
	await(t, "partition 1, assigned during the final flush, starts at its beginning", func() bool { return startsAt(status, 1, 0) })
	close(g.release)
	must(t, <-done)

	resp, err := kadm.NewClient(cl).FetchOffsets(context.Background(), cfg.Kafka.Group)
	must(t, err)
	if o, ok := resp.Lookup(topic, 1); !ok {
		t.Error("partition 1: no committed offset after the run, want 0 (where it began)")
	} else if o.At != 0 {
		t.Errorf("partition 1: committed offset %d after the run, want 0 (where it began)", o.At)
	}
	cl = producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())) // sees 2 partitions
	for i := range 5 {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`); n != 5 {
		t.Errorf("%d rows of partition 1, want its 5 records produced after the first run", n)
	}
}

// commitsPartition says whether r commits an offset of partition p.
func commitsPartition(r *kmsg.OffsetCommitRequest, p int32) bool {
	for _, t := range r.Topics {
		for _, rp := range t.Partitions {
			if rp.Partition == p {
				return true
			}
		}
	}
	return false
}

// failedCommit answers r with err for every partition it commits.
func failedCommit(r *kmsg.OffsetCommitRequest, err *kerr.Error) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = err.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// onMessage is a log handler calling do on each record whose message
// begins with prefix.
type onMessage struct {
	slog.Handler
	prefix string
	do     func()
}

func (o onMessage) Handle(ctx context.Context, rec slog.Record) error {
	if strings.HasPrefix(rec.Message, o.prefix) {
		o.do()
	}
	return o.Handler.Handle(ctx, rec)
}

func (o onMessage) WithAttrs(as []slog.Attr) slog.Handler {
	return onMessage{Handler: o.Handler.WithAttrs(as), prefix: o.prefix, do: o.do}
}

// loseOnce makes c answer one heartbeat with UNKNOWN_MEMBER_ID once the
// returned flag is set: the member's partitions are lost, it rejoins and
// gets them back.
func loseOnce(c *kfake.Cluster) *atomic.Bool {
	kick := new(atomic.Bool)
	c.ControlKey(kmsg.Heartbeat.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !kick.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		resp := req.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	return kick
}

// latestWithPartitionsToCome is a one-partition topic holding 10 records
// (skipped: produced before the first start), a producer that picks
// partitions by hand, and a one-worker config starting at latest that
// sees partitions created while it runs within a second.
func latestWithPartitionsToCome(t *testing.T) (*kfake.Cluster, *kgo.Client, *config.Config) {
	t.Helper()
	c := newCluster(t, 1)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceNumbers(t, cl, 0, 10)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.StartOffset = "latest"
	cfg.Kafka.MetadataRefresh = config.Duration(time.Second)
	return c, cl, cfg
}
