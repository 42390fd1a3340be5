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
	workers int
	waiting int         // workers without a first assignment
	owned   map[int]int // partitions each worker owns, by worker id, once it told
	last    time.Time   // the last assignment or revoke any worker saw
	settle  time.Duration
}

// gateSettle is how long the assignments of the process must stay as they
// are before the gate opens while a worker owns nothing. The last worker's
// first assignment does not end a cooperative rebalance: it is empty while
// a sibling still holds the partitions it must give up, and that sibling's
// revoke comes a moment later. A worker that polled in between would read
// the partitions it is about to give up (franz-go holds the revoke until
// the poll is done).
const gateSettle = 500 * time.Millisecond

func newStartGate(workers int) *startGate {
	return &startGate{workers: workers, waiting: workers, owned: map[int]int{}, settle: gateSettle}
}

// joined notes one worker's first assignment (also an empty one). Called
// once per worker.
func (g *startGate) joined() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting--
	g.last = time.Now()
}

// moved notes an assignment or revoke of any worker after its first.
func (g *startGate) moved() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = time.Now()
}

// owns notes how many partitions worker id owns, after each of its
// assignments, revokes and losses.
func (g *startGate) owns(id, partitions int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.owned[id] = partitions
}

// state reports whether every worker joined, and whether the assignments
// have settled since: every worker owns a partition, or none changed for
// the settle time. Owning is enough: a partition moving between siblings
// reaches its new owner only in the rebalance after the old owner's
// revoke completed (cooperative or eager), so once the last sibling owns
// some, none is about to leave another. The settle time is for a worker
// left without any (fewer partitions than workers, or other processes'
// members own them).
func (g *startGate) state() (allJoined, settled bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	allJoined = g.waiting <= 0
	everyOwns := len(g.owned) == g.workers
	for _, n := range g.owned {
		everyOwns = everyOwns && n > 0
	}
	return allJoined, allJoined && (everyOwns || time.Since(g.last) >= g.settle)
}

// wait returns once every worker joined and the assignments settled (see
// state), after limit, or when ctx ends, calling rejoin every quarter
// second meanwhile. It reports whether the gate opened.
//
// A worker that joined asks to rejoin (kgo's ForceRebalance) while it
// waits: a sibling's join makes the coordinator wait for the members it
// knows to rejoin, which they otherwise learn only from their next
// heartbeat (3 s); the rejoin completes that rebalance at once, with
// everyone.
func (g *startGate) wait(ctx context.Context, limit time.Duration, rejoin func()) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	check := time.NewTicker(25 * time.Millisecond)
	defer check.Stop()
	lastRejoin := time.Now()
	for {
		allJoined, settled := g.state()
		if settled {
			return true
		}
		select {
		case <-check.C:
			// Only while a sibling is missing: a rejoin after that would
			// move assignments again and keep them from settling.
			if !allJoined && time.Since(lastRejoin) >= 250*time.Millisecond {
				rejoin()
				lastRejoin = time.Now()
			}
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
