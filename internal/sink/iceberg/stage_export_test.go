package iceberg

import (
	"context"
	"time"
)

// RenewLeases writes the staging leases now, as the renewal every
// leaseInterval does.
func (s *Sink) RenewLeases(ctx context.Context) error { return s.renewLeases(ctx) }

// AgeStaged makes every kept batch look staged d earlier, as a batch
// whose load was retried that long.
func (s *Sink) AgeStaged(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.kept {
		st.at = st.at.Add(-d)
	}
}

// LeaseStaleAfter is leaseStaleAfter.
const LeaseStaleAfter = leaseStaleAfter

// CommittedEarly is how many batches are remembered as committed with an
// earlier load, until their own.
func (s *Sink) CommittedEarly() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.committedEarly)
}

// PeakRefenceRows is the most rows the last refence held at once.
func PeakRefenceRows() int64 { return peakRefenceRows.Load() }

// KeptBatches is how many staged batches are kept for their loads.
func (s *Sink) KeptBatches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.kept)
}
