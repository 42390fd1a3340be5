package pipeline_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// Partition 1 (no position) is paused while Kafka refuses the commit of
// its start. The loader's 1 s commit tick put that start into the same
// commit as partition 0's loaded offsets, so Kafka's refusal of partition
// 1 refused partition 0's too: its committed offset stayed behind what was
// loaded (lag reported, exit-when-idle waiting) until partition 1's start
// was committed. Loads of partition 0 come after a tick here (a load
// waits 2 s for more files), and its commits must land on their own.
func TestRefusedStartCommitHoldsNoHealthyCommitBack(t *testing.T) {
	sc := newStartCase(t, func(cfg *config.Config) {
		cfg.Load.MaxInterval = config.Duration(2 * time.Second)
		cfg.Kafka.CommitTimeout = config.Duration(500 * time.Millisecond)
	})
	var release atomic.Bool
	sc.refuseStartCommit(t, &release)
	await, stop := sc.run(t, pipeline.RunOptions{Stats: &pipeline.Stats{}})
	defer func() { release.Store(true); must(t, stop()) }()
	await("partition 0 loaded", func() bool { return sc.rows(t, 0) == 5 })
	committed := func() int64 {
		resp, err := kadm.NewClient(sc.cl).FetchOffsets(context.Background(), sc.cfg.Kafka.Group)
		must(t, err)
		o, _ := resp.Lookup(topic, 0)
		return o.At
	}
	await("partition 0's loaded offsets committed while partition 1's start is refused", func() bool { return committed() == 5 })
	if sc.rows(t, 1) != 0 {
		t.Errorf("partition 1 read while its start was not committed")
	}
}
