package pipeline

import "sync/atomic"

// Budget caps the message bytes a process has read from Kafka and holds in
// memory (max_inflight_bytes): not yet loaded, or, with a sink.FileStager,
// not yet staged, or, with a sink.CommitReporter, not yet read by a load.
// Shared by the workers. A worker whose poll would go past it pauses
// fetching until loads free bytes: backlog stays in Kafka, not in memory.
// Safe for concurrent use.
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

// Max is the budget, max_inflight_bytes.
func (b *Budget) Max() int64 { return b.max }

// Peak is the most bytes ever in flight.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// reserve reserves room for one worker's next poll and returns how many
// records it may return and the bytes reserved for them: its share
// (1/workers) of what is left at the recent average record size, at most
// max; 0 when nothing fits (the worker pauses). Reserving, rather than only
// reading what is left, keeps a poll computed from an old picture from
// overshooting; taking a share leaves room for the other workers while a
// reservation waits in a poll that returns nothing. With nothing in flight
// one record is always allowed, so a record larger than the budget moves;
// until the record size is known, each poll takes one record. idle says
// the worker's last poll returned nothing and none of its partitions has
// records waiting.
func (b *Budget) reserve(max, workers int, idle bool) (int, int64) {
	for {
		used, avg := b.used.Load(), b.avg.Load()
		n, per := 0, avg
		switch {
		case avg == 0:
			// Learn the record size first: one record per poll. Every
			// worker may, not just one: a worker whose partitions are
			// empty would otherwise hold the only such reservation poll
			// after poll and starve a worker that has records.
			n, per = 1, 1
		case avg > 0:
			n = clampInt(int((b.max-used)/avg/int64(workers)), 0, max)
			if n == 0 && used == 0 {
				n = 1
				if idle {
					// Records larger than a worker's share: the one
					// record allowed. An idle worker reserves nothing
					// for it, for the same reason as above: its
					// reservation, taken again after each empty poll,
					// left the budget never free for a worker that has
					// records, and their reading stopped. A record its
					// poll does return counts at settle: at most one
					// record per worker past the budget.
					per = 0
				}
			}
		}
		if n == 0 {
			return 0, 0
		}
		if b.used.CompareAndSwap(used, used+int64(n)*per) {
			return n, int64(n) * per
		}
	}
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

// settle replaces a reservation with what the poll returned: n records of
// size bytes in total.
func (b *Budget) settle(reserved int64, n int, size int64) {
	used := b.used.Add(size - reserved)
	for {
		p := b.peak.Load()
		if used <= p || b.peak.CompareAndSwap(p, used) {
			break
		}
	}
	if n > 0 {
		rec := size / int64(n)
		if old := b.avg.Load(); old != 0 {
			rec = (old*3 + rec) / 4
		}
		b.avg.Store(max(rec, 1))
	}
	if size < reserved {
		b.wake()
	}
}

// release returns size bytes (loaded or dropped) and wakes a paused worker.
func (b *Budget) release(size int64) {
	if size == 0 {
		return
	}
	b.used.Add(-size)
	b.wake()
}

// wake tells a paused worker that room was freed.
func (b *Budget) wake() {
	select {
	case b.freed <- struct{}{}:
	default:
	}
}
