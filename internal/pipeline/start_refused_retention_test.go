package pipeline_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
	sc := newStartCase(t, func(cfg *config.Config) { cfg.Kafka.CommitTimeout = config.Duration(500 * time.Millisecond) })
	var release atomic.Bool
	sc.refuseStartCommit(t, &release)
	m := obs.New()
	await, stop := sc.run(t, pipeline.RunOptions{Stats: &pipeline.Stats{}, Metrics: m})
	await("partition 0 loaded", func() bool { return sc.rows(t, 0) == 5 })
	sc.deleteRecords(t, 3)
	release.Store(true)
	await("partition 1 loaded", func() bool { return sc.rows(t, 1) == 2 })
	time.Sleep(300 * time.Millisecond)
	must(t, stop())
	if got := testutil.ToFloat64(m.LostRecords.WithLabelValues(topic)); got != 3 {
		t.Errorf("lost records metric %v, want 3", got)
	}
	tn := sc.s.Tables()
	if n := queryInt(t, sc.s.DB(), `SELECT count(*) FROM `+tn.Ledger+` WHERE "partition" = 1 AND first_offset <= 1 AND last_offset >= 1`); n != 0 {
		t.Errorf("a ledger row covers offset 1, deleted before it was read: the gap was bridged")
	}
	rep := verifyReport(t, sc.cfg, sc.s)
	t.Logf("verify: ok=%v problems %q", rep.OK, rep.Problems)
}
