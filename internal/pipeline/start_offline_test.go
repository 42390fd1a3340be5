package pipeline_test

import (
	"sync/atomic"
	"testing"
	"time"

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
	sc := newStartCase(t, nil)
	var back atomic.Bool
	sc.offlineLogStart(&back, startListings)
	await, stop := sc.run(t, pipeline.RunOptions{Stats: &pipeline.Stats{}})
	await("partition 0's records loaded while partition 1 was offline", func() bool { return sc.rows(t, 0) == 5 })
	// Once its leader is back, partition 1 starts: at its log start,
	// committed before it is read.
	back.Store(true)
	await("partition 1's records loaded after its leader came back", func() bool { return sc.rows(t, 1) == 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// As TestOfflinePartitionDoesNotHoldBackTheOthers, for the commit of the
// start: partition 1 has no position, and Kafka refuses every commit of
// its start for a while; partition 0 has a committed offset. Partition 0
// loads meanwhile, nothing of partition 1 is read before its start is
// committed, and it loads once Kafka takes the commit.
func TestRefusedStartCommitDoesNotHoldBackTheOthers(t *testing.T) {
	sc := newStartCase(t, func(cfg *config.Config) { cfg.Kafka.CommitTimeout = config.Duration(500 * time.Millisecond) })
	var release atomic.Bool
	sc.refuseStartCommit(t, &release)
	stats := &pipeline.Stats{}
	await, stop := sc.run(t, pipeline.RunOptions{Stats: stats})
	await("partition 0's records loaded while Kafka refused partition 1's start", func() bool { return sc.rows(t, 0) == 5 })
	time.Sleep(time.Second) // fetches of partition 1, if any, come back meanwhile
	if n := stats.Consumed.Load(); n != 5 {
		stop()
		t.Fatalf("%d records read, want partition 0's 5: partition 1 was read before its start was committed", n)
	}
	release.Store(true)
	await("partition 1's records loaded after Kafka took its start's commit", func() bool { return sc.rows(t, 1) == 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
