package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/obs"
)

// With start_offset latest, partition 1 is created while the run runs:
// it starts at its beginning. The worker's look-ups of its log start
// fail (its leader unreachable from the worker), so it waited, paused,
// for the listing, and the revoke of leaving the group at shutdown
// committed nothing for it: its start was recorded nowhere. The next run
// (start_offset latest, partition 1 now among the partitions it found at
// its start) started it at its end as it was then, and the 5 records
// produced after the first run took the partition were skipped:
// acknowledged to their producer, never loaded, and verify silent (the
// gap is before the partition's first ledger range).
func TestRevokeWhileLogStartUnlistedKeepsTheStart(t *testing.T) {
	c, cl, cfg := latestWithPartitionsToCome(t)
	s := openSink(t, cfg)
	sc := &startCase{c: c, cl: cl, cfg: cfg, s: s}
	var back atomic.Bool
	sc.offlineLogStart(&back, startListings)

	status, stop := runWithStatus(t, cfg, s)
	await(t, "partition 0 starts at its end", func() bool { return startsAt(status, 0, 10) })
	_, err := kadm.NewClient(cl).CreatePartitions(context.Background(), 1, topic)
	must(t, err)
	await(t, "partition 1, created while running, owned by the run", func() bool { return owns(status, 1) })
	cl = producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())) // sees 2 partitions
	for i := range 5 {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	stop() // the revoke of leaving the group, the listing still failing

	back.Store(true)
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := sc.rows(t, 1); n != 5 {
		t.Errorf("%d rows of partition 1, want the 5 records produced after the first run took it", n)
	}
	verifyOK(t, cfg, s)
}

// owns says whether the status page shows partition p of topic owned.
func owns(status *obs.Status, p int32) bool {
	for _, ps := range status.Snapshot().Partitions {
		if ps.Topic == topic && ps.Partition == p {
			return true
		}
	}
	return false
}
