package pipeline

import (
	"sync/atomic"

	"github.com/tracelake/tracelake/internal/sink"
)

// Stats counts what all workers of a process did. Safe for concurrent use.
type Stats struct {
	Consumed    atomic.Int64 // records read from Kafka
	Loaded      atomic.Int64 // rows loaded into the main table
	DLQ         atomic.Int64 // rows loaded into the dead-letter table
	Files       atomic.Int64 // staged files
	StagedBytes atomic.Int64 // staged bytes (after compression)
	Loads       atomic.Int64 // load transactions
	Retries     atomic.Int64 // failed stage or load attempts
	Inflight    atomic.Int64 // message bytes read and held in memory (see Budget)
}

func (s *Stats) addConsumed(n int) { s.Consumed.Add(int64(n)) }

func (s *Stats) addFile(bytes int64) {
	s.Files.Add(1)
	s.StagedBytes.Add(bytes)
}

func (s *Stats) addLoad(l sink.Loaded) {
	s.Loads.Add(1)
	for _, r := range l.Ranges {
		s.Loaded.Add(r.Records)
		s.DLQ.Add(r.DLQ)
	}
}

func (s *Stats) addRetry() { s.Retries.Add(1) }
