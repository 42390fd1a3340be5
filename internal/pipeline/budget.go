package pipeline

import "sync/atomic"

// Budget caps the message bytes a process has read from Kafka and not yet
// loaded (max_inflight_bytes), shared by its workers. A worker whose poll
// would go past it pauses fetching until loads free bytes: backlog stays in
// Kafka, not in memory. Safe for concurrent use.
type Budget struct {
	max   int64
	used  atomic.Int64
	peak  atomic.Int64
	avg   atomic.Int64 // bytes per record, recent average
	freed chan struct{}
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget {
	return &Budget{max: max, freed: make(chan struct{}, 1)}
}

// Peak is the most bytes ever in flight.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// pollLimit is how many records the next poll may return: as many as fit in
// what is left at the recent average size, at most max, and 0 when nothing
// fits (the worker pauses). With nothing in flight one record is always
// allowed, so a record larger than the budget still moves.
func (b *Budget) pollLimit(max int) int {
	used := b.used.Load()
	if used == 0 {
		if b.avg.Load() == 0 {
			return 1 // learn the record size first
		}
		return clampInt(int((b.max-used)/b.avg.Load()), 1, max)
	}
	avg := b.avg.Load()
	if avg == 0 {
		avg = 1
	}
	return clampInt(int((b.max-used)/avg), 0, max)
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

// take accounts for n records of size bytes just read.
func (b *Budget) take(n int, size int64) {
	if n == 0 {
		return
	}
	used := b.used.Add(size)
	for {
		p := b.peak.Load()
		if used <= p || b.peak.CompareAndSwap(p, used) {
			break
		}
	}
	rec := size / int64(n)
	if old := b.avg.Load(); old != 0 {
		rec = (old*3 + rec) / 4
	}
	b.avg.Store(max(rec, 1))
}

// release returns size bytes (loaded or dropped) and wakes a paused worker.
func (b *Budget) release(size int64) {
	if size == 0 {
		return
	}
	b.used.Add(-size)
	select {
	case b.freed <- struct{}{}:
	default:
	}
}
