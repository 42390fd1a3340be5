package pipeline_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// setBackSink is a sink whose positions were set back below the group's
// committed offsets (as an Iceberg table's are after a rollback, the
// positions set as its error says, or a table rolled back alone read
// again from its own positions): Positions reports back's, and Stage
// records where each staged batch of a partition began.
type setBackSink struct {
	*duckdb.Sink
	back map[sink.TopicPartition]int64

	mu     sync.Mutex
	firsts []int64
}

func (s *setBackSink) Positions(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	out, err := s.Sink.Positions(ctx, parts)
	if err != nil {
		return nil, err
	}
	s.setBack(out, parts)
	return out, nil
}

// PositionsAndTopicIDs is the embedded sink's (sink.LedgerReader, which an
// assignment reads instead of Positions), its positions set back too.
func (s *setBackSink) PositionsAndTopicIDs(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, map[sink.TopicPartition]string, error) {
	out, ids, err := s.Sink.PositionsAndTopicIDs(ctx, parts)
	if err != nil {
		return nil, nil, err
	}
	s.setBack(out, parts)
	return out, ids, nil
}

func (s *setBackSink) setBack(out map[sink.TopicPartition]int64, parts []sink.TopicPartition) {
	for tp, n := range s.back {
		if _, ok := out[tp]; ok && slices.Contains(parts, tp) {
			out[tp] = n
		}
	}
}

func (s *setBackSink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	s.mu.Lock()
	for _, r := range b.Ranges {
		s.firsts = append(s.firsts, r.First)
	}
	s.mu.Unlock()
	return s.Sink.Stage(ctx, b)
}

// A sink's position set back below the group's committed offset (the
// Iceberg recovery of a rolled-back table: its positions set back, then
// a restart) is where the partition is read from: "the ledger wins".
// It resumed at the committed offset instead, so the records between were
// never read again and the rolled-back rows stayed lost.
func TestPositionSetBackBelowTheCommittedOffsetIsReadFrom(t *testing.T) {
	c := newCluster(t, 1)
	produceNumbers(t, producer(t, c), 0, 10)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	s := openSink(t, cfg)
	runUntilIdle(t, cfg, s, &pipeline.Stats{})

	back := &setBackSink{Sink: s, back: map[sink.TopicPartition]int64{{Topic: topic, Partition: 0}: 4}}
	runUntilIdle(t, cfg, back, &pipeline.Stats{})
	back.mu.Lock()
	defer back.mu.Unlock()
	if len(back.firsts) == 0 || back.firsts[0] != 4 {
		t.Errorf("after the position was set back to 4 (committed offset 10), batches began at %v; want the first at 4", back.firsts)
	}
}
