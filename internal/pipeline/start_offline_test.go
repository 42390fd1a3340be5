package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// A fresh group (start_offset earliest): partition 1's leader is down,
// so the listing of its log start fails (LEADER_NOT_AVAILABLE) for as
// long as it stays down. Partition 0 is healthy, assigned to the same
// worker in the same session, and its records must load: a partition
// that cannot be started must not hold back the others. Found by a cold
// review: adjustOffsets retried the listing of every new partition of
// the session together until it succeeded for all of them, so one
// offline partition stopped the worker reading anything (before, the
// failed partition fell back to the client's reset and the others went
// on).
func TestOfflinePartitionDoesNotHoldBackTheOthers(t *testing.T) {
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

	// Look-ups of the log start of partition 1 fail until back is set:
	// its leader is down. Partition 0's log start is 0 (nothing was
	// deleted).
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

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: &pipeline.Stats{},
		})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 0`) != 5 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("partition 0's records did not load within 30s while partition 1 was offline")
		}
		time.Sleep(100 * time.Millisecond) // polling the sink
	}
	// Once its leader is back, partition 1 starts: at its log start,
	// committed before it is read.
	back.Store(true)
	deadline = time.Now().Add(30 * time.Second)
	for queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`) != 5 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatal("partition 1's records did not load within 30s of its leader coming back")
		}
		time.Sleep(100 * time.Millisecond) // polling the sink
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// As TestOfflinePartitionDoesNotHoldBackTheOthers, for the commit of the
// start: partition 1 has no position, and Kafka refuses every commit of
// its start for a while; partition 0 has a committed offset. Partition 0
// loads meanwhile, nothing of partition 1 is read before its start is
// committed, and it loads once Kafka takes the commit.
func TestRefusedStartCommitDoesNotHoldBackTheOthers(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		for i := range 5 {
			produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, `{"p": %d, "i": %d}`, p, i)})
		}
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.CommitTimeout = config.Duration(500 * time.Millisecond)
	s := openSink(t, cfg)
	// Partition 0 was read by the group before (nothing of it loaded
	// here, so its rows all load): a committed offset of 0.
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), cfg.Kafka.Group, off)
	must(t, err)
	must(t, resp.Error())

	var release atomic.Bool
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
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

	stats := &pipeline.Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
			RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats,
		})
	}()
	stop := func() {
		cancel()
		<-done
	}
	deadline := time.Now().Add(30 * time.Second)
	for queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 0`) != 5 {
		if time.Now().After(deadline) {
			stop()
			t.Fatal("partition 0's records did not load within 30s while Kafka refused partition 1's start")
		}
		time.Sleep(100 * time.Millisecond) // polling the sink
	}
	time.Sleep(time.Second) // fetches of partition 1, if any, come back meanwhile
	if n := stats.Consumed.Load(); n != 5 {
		stop()
		t.Fatalf("%d records read, want partition 0's 5: partition 1 was read before its start was committed", n)
	}
	release.Store(true)
	deadline = time.Now().Add(30 * time.Second)
	for queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`) != 5 {
		if time.Now().After(deadline) {
			stop()
			t.Fatal("partition 1's records did not load within 30s of Kafka taking its start's commit")
		}
		time.Sleep(100 * time.Millisecond) // polling the sink
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
