package pipeline_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// Retention deletes records while the worker holds unloaded files of the
// partition from before the hole: the files before and after the hole
// must not load together, and the hole stays in the ledger (README
// "Retention is loud, never bridged"). Found by a review: they loaded in
// one load, whose ledger row went from the first file's first offset to
// the last file's last, over the hole, and verify said OK.
func TestRetentionGapInsidePendingFilesNotBridged(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = 50
	cfg.Batch.MaxInterval = config.Duration(100 * time.Millisecond)
	cfg.Load.MaxFiles = 100
	cfg.Load.MaxInterval = config.Duration(8 * time.Second)
	s := openSink(t, cfg)

	// While hold is set, fetches are answered with no records.
	hold, held := holdFetches(c, 100)

	stats := &pipeline.Stats{}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats,
		})
	}()
	produceNumbers(t, cl, 0, 100)
	for stats.Consumed.Load() < 100 {
		time.Sleep(10 * time.Millisecond)
	}
	hold.Store(true)
	// A fetch answered held: the one in flight before (one at a time to
	// a broker) has ended, so no record past 99 is read until released.
	for held.Load() == 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond) // polling a condition: the held fetches
	}
	produceNumbers(t, cl, 100, 200)
	deleteBelow(t, cl, 150)
	hold.Store(false)
	for stats.Consumed.Load() < 150 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // the final flush loads the pending files 0-49, 50-99, 150-199 in one load
	must(t, <-done)

	holeKept(t, cfg, s)
}

// holeKept checks a partition whose records 100-149 Kafka deleted
// before they were loaded, 0-99 and 150-199 loaded: 150 rows, no ledger
// row over the hole, and verify reporting it.
func holeKept(t *testing.T, cfg *config.Config, s *duckdb.Sink) {
	t.Helper()
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 150 {
		t.Errorf("%d rows, want 150", n)
	}
	tn := s.Tables()
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM `+tn.Ledger+` WHERE first_offset <= 120 AND last_offset >= 120`); n != 0 {
		t.Errorf("a ledger row covers offset 120, deleted by Kafka before it was loaded: the retention gap 100-149 was bridged")
	}
	rep := verifyReport(t, cfg, s)
	want := []string{topic + "/0: 50 offsets missing (gap: 100-149)"}
	if rep.OK || !slices.Equal(rep.Problems, want) {
		t.Errorf("verify: ok=%v problems %q, want %q", rep.OK, rep.Problems, want)
	}
}

// fetchAnswer is a fetch response to r with no records: each partition
// asked for, as set makes it.
// holdFetches makes c answer every fetch, while hold is set, with no
// records, as a partition whose log ends at end and starts at 0; held
// counts those answers.
func holdFetches(c *kfake.Cluster, end int64) (hold *atomic.Bool, held *atomic.Int32) {
	hold, held = new(atomic.Bool), new(atomic.Int32)
	c.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !hold.Load() {
			return nil, nil, false
		}
		held.Add(1)
		return fetchAnswer(req.(*kmsg.FetchRequest), func(sp *kmsg.FetchResponseTopicPartition) {
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = end, end, 0
		}), nil, true
	})
	return hold, held
}

func fetchAnswer(r *kmsg.FetchRequest, set func(*kmsg.FetchResponseTopicPartition)) *kmsg.FetchResponse {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			set(&sp)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// A partition that comes back to the worker while its open batch still
// holds records of it, to resume past them: here the partition was lost
// with records 0-99 in the open batch, nothing committed past its start
// (the group coordinator failed the commits after the start's, which
// comes before reading) and nothing loaded, and meanwhile
// retention deleted 100-149, so reading resumes at the log start, 150.
// The open batch's range of the partition must not go on from 99 to 150:
// it would cover offsets the worker never read, and the ledger row would
// bridge the retention hole (README "Retention is loud, never bridged").
// The loss is logged and counted too. Before, the batcher cut the open
// range only when a partition resumed below it, so the range became
// 0-199, verify said OK and nothing counted the loss.
func TestRetentionGapAcrossAResumeNotBridged(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxInterval = config.Duration(time.Hour)
	cfg.Load.MaxInterval = config.Duration(time.Hour) // nothing loads before the shutdown's flush
	s := openSink(t, cfg)

	hold, held := holdFetches(c, 100)
	// Commits fail once the first one, of where the partition starts,
	// has landed.
	var failCommits, started atomic.Bool
	failCommits.Store(true)
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !failCommits.Load() || started.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		return failedCommit(req.(*kmsg.OffsetCommitRequest), kerr.RequestTimedOut), nil, true
	})
	kick := loseOnce(c) // the partition lost and assigned back

	stats, m := &pipeline.Stats{}, obs.New()
	_, stop, done := runBehind(t, cfg, s, pipeline.RunOptions{Stats: stats, Metrics: m})
	produceNumbers(t, cl, 0, 100)
	await(t, "records 0-99 read", func() bool { return stats.Consumed.Load() >= 100 })
	hold.Store(true)
	// A fetch answered held: the one in flight before has ended, so
	// nothing past 99 is read until released.
	await(t, "a fetch held", func() bool { return held.Load() > 0 })
	produceNumbers(t, cl, 100, 200)
	deleteBelow(t, cl, 150)
	kick.Store(true)
	await(t, "partition lost and assigned again", func() bool {
		return testutil.ToFloat64(m.Rebalances.WithLabelValues("lost")) >= 1 &&
			testutil.ToFloat64(m.Rebalances.WithLabelValues("assigned")) >= 2
	})
	hold.Store(false)
	failCommits.Store(false)
	await(t, "records 150-199 read", func() bool { return stats.Consumed.Load() >= 150 })
	stop()
	must(t, <-done)

	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 50 {
		t.Errorf("lost records metric %v, want 50: records 100-149 were deleted before they were read", got)
	}
	holeKept(t, cfg, s)
}
