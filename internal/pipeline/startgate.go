package pipeline

import (
	"context"
	"sync"
	"time"
)

// startGate holds the workers of a process back from reading until every
// one of them has joined the group (or a while has passed). The group
// coordinator completes a rebalance as soon as the members it knows have
// joined: the first worker to arrive gets every partition, and the next
// one's arrival moves half of them. Moving a partition before anything of
// it was read costs nothing; moving it after, the revoke waits for its
// pending data to load. So nothing is read until the first assignment is
// balanced.
type startGate struct {
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func newStartGate(workers int) *startGate {
	g := &startGate{waiting: workers, open: make(chan struct{})}
	if workers <= 0 {
		close(g.open)
	}
	return g
}

// joined notes one worker's first assignment (also an empty one). Called
// once per worker.
func (g *startGate) joined() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting--
	if g.waiting == 0 {
		close(g.open)
	}
}

// wait returns once every worker joined, after limit, or when ctx ends,
// calling rejoin every quarter second meanwhile. It reports whether every
// worker joined.
//
// A worker that joined asks to rejoin (kgo's ForceRebalance) while it
// waits: a sibling's join makes the coordinator wait for the members it
// knows to rejoin, which they otherwise learn only from their next
// heartbeat (3 s); the rejoin completes that rebalance at once, with
// everyone.
func (g *startGate) wait(ctx context.Context, limit time.Duration, rejoin func()) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-g.open:
			return true
		case <-tick.C:
			rejoin()
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
