package pipeline_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	sc := newStartCase(t, nil)
	var back, clientListed atomic.Bool
	sc.offlineLogStart(&back, func(r *kmsg.ListOffsetsRequest) bool {
		if r.IsolationLevel == 0 {
			return true // the worker's look-up
		}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == topic && rp.Partition == 1 {
					clientListed.Store(true)
				}
			}
		}
		return false
	})
	m := obs.New()
	await, stop := sc.run(t, pipeline.RunOptions{Stats: &pipeline.Stats{}, Metrics: m})
	await("partition 0 loaded", func() bool { return sc.rows(t, 0) == 5 })
	if !clientListed.Load() {
		t.Log("the client did not list partition 1 itself while paused")
	}
	sc.deleteRecords(t, 3)
	back.Store(true)
	await("partition 1 loaded", func() bool { return sc.rows(t, 1) == 2 })
	time.Sleep(300 * time.Millisecond)
	must(t, stop())
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 0 {
		t.Errorf("lost records metric %v, want 0: reading started at the committed start", got)
	}
	if n := queryInt(t, sc.s.DB(), `SELECT count(*) FROM trace_raw`); n != 7 {
		t.Errorf("%d rows, want 7", n)
	}
	verifyOK(t, sc.cfg, sc.s)
}
