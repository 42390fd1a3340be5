package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With start_offset latest, partition 1 is added to the topic after the
// group started on it, at a moment no run saw it (here between two runs;
// the same as while a run ran but before its metadata refresh, then a
// restart or a second member). Every record of it came after the group's
// start. The second run listed the ends of the partitions that existed
// when it started, partition 1 among them, and started it at its end:
// the 5 records produced to it were skipped, acknowledged to their
// producer and never loaded, and verify was silent (the gap is before the
// partition's first ledger range). The same when Kafka no longer holds
// the group's offsets (an empty group's expire after
// offsets.retention.minutes, 7 days by default): the sink's ledger says
// the group started on the topic.
func TestPartitionAddedToAStartedTopicStartsAtItsBeginning(t *testing.T) {
	for _, groupDeleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("group deleted %v", groupDeleted), func(t *testing.T) {
			partitionAddedToAStartedTopic(t, groupDeleted)
		})
	}
}

func partitionAddedToAStartedTopic(t *testing.T, groupDeleted bool) {
	c, cl, cfg := latestWithPartitionsToCome(t)
	s := openSink(t, cfg)

	status, stop := runWithStatus(t, cfg, s)
	await(t, "partition 0 starts at its end", func() bool { return startsAt(status, 0, 10) })
	produceNumbers(t, cl, 10, 11) // in the ledger
	await(t, "partition 0 loaded to 11", func() bool { return startsAt(status, 0, 11) })
	stop()

	adm := kadm.NewClient(cl)
	if groupDeleted {
		_, err := adm.DeleteGroup(context.Background(), cfg.Kafka.Group)
		must(t, err)
	}
	_, err := adm.CreatePartitions(context.Background(), 1, topic)
	must(t, err)
	cl = producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())) // sees 2 partitions
	for i := range 5 {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	produceNumbers(t, cl, 11, 14)

	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 1`); n != 5 {
		t.Errorf("%d rows of partition 1, added after the group started, want its 5 records", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = 0`); n != 4 {
		t.Errorf("%d rows of partition 0, want the 4 records produced after the first start", n)
	}
	verifyOK(t, cfg, s)
}
