package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// The start tests' set-up (start_*_test.go): two partitions of five
// records each, read by one worker into a fresh sink.
type startCase struct {
	c   *kfake.Cluster
	cl  *kgo.Client // the producer, also for admin requests
	cfg *config.Config
	s   *duckdb.Sink
}

func newStartCase(t *testing.T, adjust func(*config.Config)) *startCase {
	t.Helper()
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		for i := range 5 {
			produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"p": %d, "i": %d}`, p, i)})
		}
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	if adjust != nil {
		adjust(cfg)
	}
	return &startCase{c: c, cl: cl, cfg: cfg, s: openSink(t, cfg)}
}

// offlineLogStart makes the look-ups of partition 1's log start that
// lists takes fail (LEADER_NOT_AVAILABLE: its leader is down) until back
// is set; other look-ups are answered by the cluster (partition 0's log
// start is 0: nothing was deleted).
func (sc *startCase) offlineLogStart(back *atomic.Bool, takes func(*kmsg.ListOffsetsRequest) bool) {
	sc.c.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sc.c.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if back.Load() || !takes(r) {
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
}

// startListings takes the look-ups of log starts only (timestamp -2).
func startListings(r *kmsg.ListOffsetsRequest) bool {
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			if rp.Timestamp != -2 {
				return false
			}
		}
	}
	return true
}

// refuseStartCommit gives partition 0 a committed offset of 0 (read by
// the group before, nothing of it loaded here) and makes Kafka refuse
// every commit naming partition 1 until release is set.
func (sc *startCase) refuseStartCommit(t *testing.T, release *atomic.Bool) {
	t.Helper()
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := kadm.NewClient(sc.cl).CommitOffsets(context.Background(), sc.cfg.Kafka.Group, off)
	must(t, err)
	must(t, resp.Error())
	sc.c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sc.c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rp.Partition == 1 && !release.Load() {
					return failedCommit(r, kerr.CoordinatorNotAvailable), nil, true
				}
			}
		}
		return nil, nil, false
	})
}

// deleteRecords deletes partition 1's records below offset at
// (retention).
func (sc *startCase) deleteRecords(t *testing.T, at int64) {
	t.Helper()
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 1, At: at})
	dr, err := kadm.NewClient(sc.cl).DeleteRecords(context.Background(), del)
	must(t, err)
	must(t, dr.Error())
}

// rows counts the sink's raw rows of partition p.
func (sc *startCase) rows(t *testing.T, p int) int64 {
	return queryInt(t, sc.s.DB(), fmt.Sprintf(`SELECT count(*) FROM trace_raw WHERE kpartition = %d`, p))
}

// run starts the pipeline with opt (RetryBase and Log set here) and
// returns await, which polls cond until it holds or fails the test after
// 30 s, and stop, which ends the run and returns its error.
func (sc *startCase) run(t *testing.T, opt pipeline.RunOptions) (await func(what string, cond func() bool), stop func() error) {
	t.Helper()
	opt.RetryBase, opt.Log = 10*time.Millisecond, testLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- pipeline.Run(ctx, context.Background(), sc.cfg, sc.s, opt) }()
	stopped := false
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	await = func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				stop()
				t.Fatalf("%s: not within 30s", what)
			}
			time.Sleep(50 * time.Millisecond) // polling the sink
		}
	}
	return await, stop
}
