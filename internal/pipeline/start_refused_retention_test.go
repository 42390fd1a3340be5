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

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// Partition 1 (no position) starts at its log start 0, whose commit Kafka
// refuses for a while; meanwhile retention deletes offsets 0-2. Once the
// start (0) is committed, reading begins at 3: the 3 records between the
// committed start and the first one read are reported lost, and no range
// bridges them. (verify sees nothing there: the loss is before the
// partition's first ledger range, at its head, which verify does not
// report; the same before the start commit was retried in the background.)
func TestRefusedStartThenRetentionReportsTheLoss(t *testing.T) {
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
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: topic, Partition: 1, At: 3})
	dr, err := kadm.NewClient(cl).DeleteRecords(context.Background(), del)
	must(t, err)
	must(t, dr.Error())
	release.Store(true)
	await("partition 1 loaded", func() bool {
		return queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`) == 2
	})
	time.Sleep(300 * time.Millisecond)
	cancel()
	must(t, <-done)
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 3 {
		t.Errorf("lost records metric %v, want 3", got)
	}
	tn := s.Tables()
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM `+tn.Ledger+` WHERE "partition" = 1 AND first_offset <= 1 AND last_offset >= 1`); n != 0 {
		t.Errorf("a ledger row covers offset 1, deleted before it was read: the gap was bridged")
	}
	rep := verifyReport(t, cfg, s)
	t.Logf("verify: ok=%v problems %q", rep.OK, rep.Problems)
}
