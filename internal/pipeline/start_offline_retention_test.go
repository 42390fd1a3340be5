package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// Partition 1's log start cannot be listed by the worker (its kadm
// look-ups, isolation level 0, fail) while the client's own reset
// listing (read committed) succeeds at offset 0: the client's cursor
// waits, paused, at 0. Retention then deletes offsets 0-2 before the
// worker lists the log start (3) and commits it. Reading starts at 3: no
// record is lost from the committed start, so none is reported lost and
// the ledger holds no gap; the client's fetch at 0 resets to 3.
func TestOfflineStartListedAfterRetention(t *testing.T) {
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
	var clientListed atomic.Bool
	c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if r.IsolationLevel != 0 {
			for _, rt := range r.Topics {
				for _, rp := range rt.Partitions {
					if rt.Topic == topic && rp.Partition == 1 {
						clientListed.Store(true)
					}
				}
			}
		}
		if back.Load() || r.IsolationLevel != 0 {
			return nil, nil, false
		}
		offline := false
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
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

	m := obs.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: &pipeline.Stats{}, Metrics: m,
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
	if !clientListed.Load() {
		t.Log("the client did not list partition 1 itself while paused")
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 1, At: 3})
	dr, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del)
	must(t, err)
	must(t, dr.Error())
	back.Store(true)
	await("partition 1 loaded", func() bool {
		return queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`) == 2
	})
	time.Sleep(300 * time.Millisecond)
	cancel()
	must(t, <-done)
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 0 {
		t.Errorf("lost records metric %v, want 0: reading started at the committed start", got)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 7 {
		t.Errorf("%d rows, want 7", n)
	}
	verifyOK(t, cfg, s)
}
