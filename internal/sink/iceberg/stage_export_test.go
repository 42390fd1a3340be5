package iceberg

import "time"

// AgeStaged makes every kept batch look staged d earlier, as a batch
// whose load was retried that long.
func (s *Sink) AgeStaged(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.kept {
		st.at = st.at.Add(-d)
	}
}
