package pipeline_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
)

// positionsDownFirst fails its first n reads of the positions, as a
// remote sink (a Databend server restarting, an Iceberg REST catalog
// answering 503) does for a moment.
type positionsDownFirst struct {
	sink.Sink
	n atomic.Int32
}

func (s *positionsDownFirst) Positions(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	if s.n.Add(-1) >= 0 {
		return nil, errors.New("injected: the sink is down for a moment")
	}
	return s.Sink.Positions(ctx, parts)
}

// With start_offset latest, a sink that cannot answer for a moment when
// the run starts delays the start, as it does with earliest (the worker
// reads the positions at each assignment and rejoins while it fails),
// instead of failing the run: since start_offset latest reads the sink's
// positions before the workers start (which topics the group started
// on), one failed read made the run refuse to start (exit 1, taking the
// OTLP receivers of the process down with it), where the listing of the
// partitions' ends before it is retried for 30 s.
func TestStartOffsetLatestWithTheSinkDownForAMomentStarts(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 10) // before the start: skipped
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Kafka.StartOffset = "latest"
	s := openSink(t, cfg)
	down := &positionsDownFirst{Sink: s}
	down.n.Store(2)
	runIdleWithin(t, cfg, down, nil, 20*time.Second)
	produceNumbers(t, cl, 10, 13)
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 3 {
		t.Errorf("%d rows, want the 3 records produced after the start", n)
	}
	verifyOK(t, cfg, s)
}
