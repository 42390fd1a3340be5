package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// As TestOfflinePartitionDoesNotHoldBackTheOthers, but the worker loses
// its membership while partition 1 waits for its log start (paused, its
// retries running) and gets both partitions back in a new session, where
// partition 1 is still offline: the drop resumes it, the new session
// pauses it again, and the old session's retries must neither resume it
// nor leave it paused once its leader is back. Each record loads once.
func TestOfflinePartitionLostAndAssignedBack(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		for i := range 5 {
			produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"p": %d, "i": %d}`, p, i)})
		}
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	s := openSink(t, cfg)

	var back atomic.Bool
	c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if back.Load() {
			return nil, nil, false
		}
		r := req.(*kmsg.ListOffsetsRequest)
		offline := false
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.Timestamp != -2 {
					return nil, nil, false
				}
				offline = offline || rt.Topic == topic && rp.Partition == 1
			}
		}
		if !offline {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition, sp.Timestamp, sp.LeaderEpoch, sp.Offset = rp.Partition, -1, 0, 0
				if rt.Topic == topic && rp.Partition == 1 {
					sp.ErrorCode, sp.LeaderEpoch, sp.Offset = kerr.LeaderNotAvailable.Code, -1, -1
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	kick := loseOnce(c)

	m := obs.New()
	stats := &pipeline.Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats, Metrics: m,
		})
	}()
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				cancel()
				<-done
				t.Fatalf("%s: not within 30s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	await("partition 0 loaded", func() bool {
		return queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 0`) == 5
	})
	kick.Store(true)
	await("partitions lost and assigned again", func() bool {
		return testutil.ToFloat64(m.Rebalances.WithLabelValues("lost")) >= 1 &&
			testutil.ToFloat64(m.Rebalances.WithLabelValues("assigned")) >= 2
	})
	time.Sleep(500 * time.Millisecond) // the old session's retries run meanwhile
	if n := stats.Consumed.Load(); n != 5 {
		cancel()
		<-done
		t.Fatalf("%d records read, want partition 0's 5: partition 1 was read before its start was committed", n)
	}
	back.Store(true)
	await("partition 1 loaded", func() bool {
		return queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`) == 5
	})
	time.Sleep(300 * time.Millisecond)
	cancel()
	must(t, <-done)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
	verifyOK(t, cfg, s)
}
