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

// A partition with no position (start_offset latest: its end, 0) whose
// start commit Kafka refused waits paused, its retries backing off. When
// it was revoked while the worker's loads hung (the revoke's flush gave up
// after RevokeWait), its start was committed nowhere: the flush that
// commits the seeded starts never reached the loader, and the retries
// stopped with the drop. Kafka took commits again by then, yet the
// partition went to its next owner with no committed offset, and a
// process started later with start_offset latest starts it at its end as
// it is then: the 20 records produced after the first start were skipped,
// acknowledged to their producer and never loaded. A start needs no load:
// it is committed before the partition goes.
func TestRevokeWithHungLoadsCommitsThePendingStart(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.StartOffset = "latest"
	cfg.Kafka.RebalanceTimeout = config.Duration(2 * time.Second) // RevokeWait 1s
	cfg.Retry.MaxDelay = config.Duration(time.Minute)
	s := openSink(t, cfg)
	// Partition 0 has a committed offset: it is read (its load hangs).
	off := kadm.Offsets{}
	off.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), cfg.Kafka.Group, off)
	must(t, err)
	must(t, resp.Error())
	var refuse atomic.Bool
	var refused atomic.Int64
	refuse.Store(true)
	c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if !refuse.Load() || !commitsPartition(r, 1) {
			return nil, nil, false
		}
		refused.Add(1)
		// Not retriable: the client answers at once, and the worker's
		// own retries back off.
		return failedCommit(r, kerr.OffsetMetadataTooLarge), nil, true
	})

	stuck := &stuckSink{Sink: s, entered: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	hard, hardCancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, hard, cfg, stuck, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t)})
	}()
	defer func() { cancel(); hardCancel(); <-done }()
	produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(`{"p": 0}`)})
	<-stuck.entered
	for i := range 20 {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	// Ten refusals: the next retry is seconds away.
	deadline := time.Now().Add(30 * time.Second)
	for refused.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("start of partition 1 refused %d times in 30s, want 10", refused.Load())
		}
		time.Sleep(20 * time.Millisecond) // polling a counter
	}
	refuse.Store(false)

	// Another member joins; the cooperative-sticky balancer moves
	// partition 1 to it.
	assigned := make(chan []int32, 4)
	other := producer(t, c, kgo.ConsumerGroup(cfg.Kafka.Group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { assigned <- a[topic] }))
	go func() {
		for !other.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	for got := false; !got; {
		select {
		case ps := <-assigned:
			got = len(ps) == 1 && ps[0] == 1
		case <-time.After(30 * time.Second):
			t.Fatal("partition 1 not moved to the other member within 30s")
		}
	}
	committed, err := kadm.NewClient(cl).FetchOffsets(context.Background(), cfg.Kafka.Group)
	must(t, err)
	if o, ok := committed.Lookup(topic, 1); !ok || o.At != 0 {
		t.Fatalf("partition 1 handed over with no committed start (committed %v, found %v): a later start_offset latest run skips its 20 records", o.At, ok)
	}
}
