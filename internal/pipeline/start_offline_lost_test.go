package pipeline_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
	sc := newStartCase(t, nil)
	var back atomic.Bool
	sc.offlineLogStart(&back, startListings)
	kick := loseOnce(sc.c)
	m := obs.New()
	stats := &pipeline.Stats{}
	await, stop := sc.run(t, pipeline.RunOptions{Stats: stats, Metrics: m})
	await("partition 0 loaded", func() bool { return sc.rows(t, 0) == 5 })
	kick.Store(true)
	await("partitions lost and assigned again", func() bool {
		return testutil.ToFloat64(m.Rebalances.WithLabelValues("lost")) >= 1 &&
			testutil.ToFloat64(m.Rebalances.WithLabelValues("assigned")) >= 2
	})
	time.Sleep(500 * time.Millisecond) // the old session's retries run meanwhile
	if n := stats.Consumed.Load(); n != 5 {
		stop()
		t.Fatalf("%d records read, want partition 0's 5: partition 1 was read before its start was committed", n)
	}
	back.Store(true)
	await("partition 1 loaded", func() bool { return sc.rows(t, 1) == 5 })
	time.Sleep(300 * time.Millisecond)
	must(t, stop())
	if n := queryInt(t, sc.s.DB(), `SELECT count(*) FROM trace_raw`); n != 10 {
		t.Errorf("%d rows, want 10", n)
	}
	verifyOK(t, sc.cfg, sc.s)
}
