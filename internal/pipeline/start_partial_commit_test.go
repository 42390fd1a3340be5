package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/pipeline"
)

// Kafka answers each partition of an offset commit on its own. When it
// refused partition 1 of a commit and took partition 0, the worker took
// the whole commit as failed: the start of partition 0 (no position yet,
// committed with partition 1's in one request) was counted as refused, and
// partition 0 stayed paused, nothing of it read, for as long as Kafka
// refused partition 1, though its start was committed.
func TestPartlyRefusedStartCommitStartsThePartitionsTaken(t *testing.T) {
	sc := newStartCase(t, nil)
	var release atomic.Bool
	sc.c.ControlKey(kmsg.OffsetCommit.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		sc.c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if release.Load() || !commitsPartition(r, 1) {
			return nil, nil, false
		}
		// Partition 1 refused, the others answered as taken (kfake does
		// not keep them: a later commit of partition 0 alone does).
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID // by id from v10
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				if p.Partition == 1 {
					rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	await, stop := sc.run(t, pipeline.RunOptions{Stats: &pipeline.Stats{}})
	defer func() { release.Store(true); must(t, stop()) }()
	await("partition 0 loaded while Kafka refuses partition 1's start", func() bool { return sc.rows(t, 0) == 5 })
	if n := sc.rows(t, 1); n != 0 {
		t.Errorf("partition 1 read (%d rows) while its start was refused", n)
	}
	release.Store(true)
	await("partition 1 loaded once its start is taken", func() bool { return sc.rows(t, 1) == 5 })
	for p := int32(0); p < 2; p++ {
		await(fmt.Sprintf("partition %d's loaded offsets committed", p), func() bool {
			resp, err := kadm.NewClient(sc.cl).FetchOffsets(context.Background(), sc.cfg.Kafka.Group)
			must(t, err)
			o, _ := resp.Lookup(topic, p)
			return o.At == 5
		})
	}
}
