package pipeline_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
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
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// Records Kafka deleted (retention) before they were loaded are lost:
// the run logs and counts them, goes on from the log start, and leaves
// the hole in the ledger, so verify fails naming the lost offsets. Before,
// the next range started at the ledger position and bridged the hole
// silently: verify said OK.
func TestRetentionLossIsReportedNeverBridged(t *testing.T) {
	_, cl, cfg, s := loadedHundred(t)

	produceNumbers(t, cl, 100, 200)
	// Retention deletes 100-149 before they were loaded.
	deleteBelow(t, cl, 150)

	m, err := runIdleCounting(t, cfg, s)
	must(t, err)
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 50 {
		t.Errorf("lost records metric %v, want 50", got)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset BETWEEN 150 AND 199`); n != 50 {
		t.Errorf("%d rows of offsets 150-199, want 50", n)
	}
	rep := verifyReport(t, cfg, s)
	want := []string{topic + "/0: 50 offsets missing (gap: 100-149)"}
	if rep.OK || !slices.Equal(rep.Problems, want) {
		t.Errorf("verify: ok=%v problems %q, want %q", rep.OK, rep.Problems, want)
	}
}

// Records deleted by retention before a partition with no position was
// read at all (a fresh group's, or a partition added to a topic, empty
// when assigned: here its fetches are held while records 0-99 arrive and
// 0-49 are deleted, as during a sink outage longer than retention) are
// reported lost: reading starts at the log start listed at assignment, a
// position of its own, not at the client's reset to a later one. Found by
// a review: nothing said so. verify cannot show it (the ledger starts
// after the loss, as with start_offset latest: README).
func TestRetentionBeforeTheFirstReadIsReported(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	s := openSink(t, cfg)
	// While hold is set, fetches are answered as an empty partition's.
	hold, held := holdFetches(c, 0)
	hold.Store(true)
	stats, m := &pipeline.Stats{}, obs.New()
	_, stop, done := runBehind(t, cfg, s, pipeline.RunOptions{Stats: stats, Metrics: m})
	await(t, "the partition assigned and fetched", func() bool {
		return testutil.ToFloat64(m.Rebalances.WithLabelValues("assigned")) >= 1 && held.Load() > 0
	})
	produceNumbers(t, cl, 0, 100)
	deleteBelow(t, cl, 50) // retention, before the worker read any of them
	hold.Store(false)
	await(t, "the records left loaded", func() bool { return stats.Loaded.Load() >= 50 })
	stop()
	must(t, <-done)
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 50 {
		t.Errorf("lost records metric %v, want 50: records 0-49 were deleted before they were read", got)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 50 {
		t.Errorf("%d rows loaded, want the 50 left", n)
	}
}

// A topic deleted and recreated starts its offsets again below the
// ledger's: those offsets are not the ones the ledger holds, so the run
// stops with an error that says what happened and what to do. Before,
// every record of the new topic was dropped as already batched.
func TestRecreatedTopicStopsTheRun(t *testing.T) {
	c, cl, cfg, s := loadedHundred(t)
	recreateTopic(t, c, cl)
	m, err := runIdleCounting(t, cfg, s)
	if err == nil || !strings.Contains(err.Error(), "deleted and recreated") {
		t.Fatalf("run over a recreated topic: %v; want an error saying it was recreated", err)
	}
	if got := testutil.ToFloat64(m.LogResets.WithLabelValues(topic)); got < 1 {
		t.Errorf("log resets metric %v, want at least 1", got)
	}
	// verify fails too: the ledger reaches past the new log's end. Before,
	// it said OK with a lag of -90 while none of the new records was loaded.
	rep := verifyReport(t, cfg, s)
	rep.CheckLogEnds(func() map[sink.TopicPartition]kafka.Watermarks { return watermarksOf(t, cfg) })
	if rep.OK || len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0], "the ledger reaches offset 99, past the end of Kafka's log (10)") ||
		!rep.Partitions[0].PastLogEnd {
		t.Errorf("verify over a recreated topic: ok=%v problems %q; want the ledger past the log end", rep.OK, rep.Problems)
	}
}

// A topic deleted and recreated under a running worker: the client keeps
// the old topic's id and Kafka answers every fetch UNKNOWN_TOPIC_ID, so
// no record of the new log ever reaches checkContinuity. The run stops
// with the reason once the topic stays unknown (UnknownTopicWait), and
// does not spin meanwhile. Found by a review: it ran on for good, nothing
// of the new topic loaded, logging ten thousand fetch errors a second.
func TestTopicRecreatedUnderTheRunStopsIt(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	stats, m := &pipeline.Stats{}, obs.New()
	ctx, _, done := runBehind(t, cfg, s, pipeline.RunOptions{UnknownTopicWait: 2 * time.Second, Stats: stats, Metrics: m})
	produceNumbers(t, cl, 0, 100)
	await(t, "100 records loaded", func() bool { return stats.Loaded.Load() >= 100 })
	recreateTopic(t, c, cl)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "deleted and recreated") {
			t.Fatalf("run over a topic recreated under it: %v; want an error saying it was recreated", err)
		}
	case <-ctx.Done():
		t.Fatal("the run went on for a minute over a topic deleted and recreated under it")
	}
	if got := testutil.ToFloat64(m.LogResets.WithLabelValues(topic)); got < 1 {
		t.Errorf("log resets metric %v, want at least 1", got)
	}
}

// runIdleCounting runs the pipeline until it is idle (at most a minute),
// with its own metrics, and returns them with the run's error.
func runIdleCounting(t *testing.T, cfg *config.Config, s sink.Sink) (*obs.Metrics, error) {
	t.Helper()
	m := obs.New()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
		ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t), Metrics: m,
	})
	return m, err
}

// runBehind runs the pipeline in the background for at most a minute
// (ctx, which cancel ends sooner), with ro's retries shortened and the
// test's log; the run's error arrives on done.
func runBehind(t *testing.T, cfg *config.Config, s sink.Sink, ro pipeline.RunOptions) (ctx context.Context, cancel func(), done <-chan error) {
	t.Helper()
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ro.RetryBase, ro.Log = 10*time.Millisecond, testLog(t)
	errs := make(chan error, 1)
	go func() { errs <- pipeline.Run(ctx, context.Background(), cfg, s, ro) }()
	return ctx, cancel, errs
}

// As TestTopicRecreatedUnderTheRunStopsIt, on a cluster of two brokers
// (a topic on each) with a busy second topic in the run: its fetches come
// back in polls of their own, which must not restart the recreated
// topic's wait. Found by a review: the run never stopped.
func TestTopicRecreatedBesideABusyTopicStopsTheRun(t *testing.T) {
	const busy = "busy"
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, topic, busy))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// The two topics on two brokers: their fetches are answered apart.
	must(t, c.MoveTopicPartition(topic, 0, 1))
	must(t, c.MoveTopicPartition(busy, 0, 0))
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = []string{topic, busy}
	cfg.Workers = 1
	s := openSink(t, cfg)
	stats, m := &pipeline.Stats{}, obs.New()
	ctx, _, done := runBehind(t, cfg, s, pipeline.RunOptions{UnknownTopicWait: time.Second, Stats: stats, Metrics: m})
	produceNumbers(t, cl, 0, 100)
	await(t, "100 records loaded", func() bool { return stats.Loaded.Load() >= 100 })

	// The busy topic: a record every few milliseconds, until the test ends.
	busyCtx, stopBusy := context.WithCancel(context.Background())
	defer stopBusy()
	go func() {
		for i := 0; busyCtx.Err() == nil; i++ {
			cl.Produce(busyCtx, &kgo.Record{Topic: busy, Value: fmt.Appendf(nil, `{"b": %d}`, i)}, nil)
			select {
			case <-busyCtx.Done():
			case <-time.After(3 * time.Millisecond):
			}
		}
	}()
	recreateTopic(t, c, cl)
	// The recreated topic back on its broker; the busy one is left where
	// it is (moved under the run, with its records, a CI run's worker
	// took it for a truncated log: a data loss, which stops the run
	// first).
	must(t, c.MoveTopicPartition(topic, 0, 1))
	deadline := time.NewTimer(20 * time.Second) // 20 times UnknownTopicWait
	defer deadline.Stop()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "deleted and recreated") {
			t.Fatalf("run over a topic recreated under it: %v; want an error saying it was recreated", err)
		}
	case <-deadline.C:
		t.Fatalf("the run went on for 20s (UnknownTopicWait 1s) over a topic deleted and recreated under it, beside a busy topic; %d records loaded", stats.Loaded.Load())
	case <-ctx.Done():
		t.Fatal("run context ended")
	}
}

// recreateTopic deletes the one-partition topic and creates it again with
// 10 records (cl knows the old topic's id).
func recreateTopic(t *testing.T, c *kfake.Cluster, cl *kgo.Client) {
	t.Helper()
	adm := kadm.NewClient(cl)
	_, err := adm.DeleteTopics(context.Background(), topic)
	must(t, err)
	_, err = adm.CreateTopic(context.Background(), 1, 1, nil, topic)
	must(t, err)
	fresh := producer(t, c)
	for i := range 10 {
		produce(t, fresh, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"new": %d}`, i)})
	}
}

// loadedHundred is a one-partition topic whose first 100 records are
// loaded into a DuckDB sink.
func loadedHundred(t *testing.T) (*kfake.Cluster, *kgo.Client, *config.Config, *duckdb.Sink) {
	t.Helper()
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	produceNumbers(t, cl, 0, 100)
	runUntilIdle(t, cfg, s, nil)
	return c, cl, cfg, s
}

// Kafka losing records it had acknowledged under a running worker (an
// unclean leader election truncates the log below what was read; the
// client reports kgo.ErrDataLoss and reads again from the log start):
// new records may now hold offsets the ledger has, so the run stops and
// says where, as for a recreated topic. Before, the loss was logged as a
// fetch warning, the records read again were skipped as already loaded,
// and the run went on.
func TestKafkaDataLossStopsTheRun(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 100)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	s := openSink(t, cfg)

	// Once lose is set, the first fetch of the partition is answered
	// OFFSET_OUT_OF_RANGE, and the log then ends at 50 as ListOffsets
	// tells it: below what the worker read.
	var lose, answered atomic.Bool
	c.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.FetchRequest)
		if !lose.Load() || answered.Load() || len(r.Topics) == 0 || len(r.Topics[0].Partitions) == 0 {
			return nil, nil, false
		}
		answered.Store(true)
		return fetchAnswer(r, func(sp *kmsg.FetchResponseTopicPartition) { sp.ErrorCode = kerr.OffsetOutOfRange.Code }), nil, true
	})
	c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !answered.Load() {
			return nil, nil, false
		}
		r := req.(*kmsg.ListOffsetsRequest)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				// The log starts at 0 and ends at 50 (the end answers a
				// look-up by time too: no record is that recent).
				sp.Partition, sp.Timestamp, sp.LeaderEpoch, sp.Offset = rp.Partition, -1, 0, 50
				if rp.Timestamp == -2 {
					sp.Offset = 0
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})

	stats, m := &pipeline.Stats{}, obs.New()
	ctx, _, done := runBehind(t, cfg, s, pipeline.RunOptions{Stats: stats, Metrics: m})
	for stats.Consumed.Load() < 100 {
		select {
		case err := <-done:
			t.Fatalf("run ended before the loss: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	lose.Store(true)
	produceNumbers(t, cl, 100, 101) // the next fetch names the partition
	select {
	case err := <-done:
		// Up to 100 or 101: the fetch that brought record 100 may have
		// been in flight when the loss was staged, or not.
		if err == nil || !strings.Contains(err.Error(), "Kafka lost records it had acknowledged") || !regexp.MustCompile(`read up to offset 10[01] `).MatchString(err.Error()) {
			t.Fatalf("run: %v; want it stopped on the lost records", err)
		}
	case <-ctx.Done():
		t.Fatal("the run went on over records Kafka lost")
	}
	if got := testutil.ToFloat64(m.LogResets.WithLabelValues(topic)); got != 1 {
		t.Errorf("log resets metric %v, want 1", got)
	}
}

// deleteBelow deletes partition 0's records below offset at, as retention
// does (the log start moves to at).
func deleteBelow(t *testing.T, cl *kgo.Client, at int64) {
	t.Helper()
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 0, At: at})
	resp, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del)
	must(t, err)
	must(t, resp.Error())
}
