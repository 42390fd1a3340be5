package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/pipeline"
)

// Messages larger than a worker's share of max_inflight_bytes (here 600
// KB, a 1 MiB budget shared by two workers), all in one partition: the
// worker owning the other, empty partition reserves a message's worth for
// each of its polls, which come back empty, and the worker that has the
// messages must still read them, one at a time. Before, it got no
// reservation (the budget was never free of the idle worker's), and
// reading stopped for good after a few messages.
func TestMessagesLargerThanAWorkersShareKeepMoving(t *testing.T) {
	const n, size, bound = 10, 600 << 10, 1 << 20
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	filler := bytes.Repeat([]byte("x"), size)
	for i := range n {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, `{"i": %d, "pad": "%s"}`, i, filler)})
	}
	cfg := testConfig(t, c)
	cfg.MaxInflightBytes = bound
	must(t, cfg.Validate())
	s := openSink(t, cfg)
	stats := &pipeline.Stats{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{
		ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats,
	})
	must(t, err)
	if ctx.Err() != nil {
		t.Fatalf("not idle within 20s: %d of %d messages read", stats.Consumed.Load(), n)
	}
	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
}
