package pipeline

import "testing"

// The gate opens as soon as every worker of the process owns a partition
// (the assignment is complete), not a settle time later; while the last
// worker's first assignment is still empty (its sibling about to revoke
// what it will get), it stays shut; a worker left with nothing opens it
// only after the settle time.
func TestStartGateOpensWhenEveryWorkerOwns(t *testing.T) {
	g := newStartGate(2)
	g.joined()
	g.owns(0, 4)
	if _, settled := g.state(); settled {
		t.Fatal("open before the second worker joined")
	}
	g.joined() // the second worker's first, empty, cooperative assignment
	g.owns(1, 0)
	if allJoined, settled := g.state(); !allJoined || settled {
		t.Fatalf("joined %v, open %v with a worker owning nothing: want joined and shut", allJoined, settled)
	}
	g.moved() // the first worker's revoke of two
	g.owns(0, 2)
	g.moved() // the second worker's assignment of them
	g.owns(1, 2)
	if _, settled := g.state(); !settled {
		t.Fatal("shut with every worker owning partitions")
	}

	g = newStartGate(2) // one partition for two workers
	g.settle = 0
	g.joined()
	g.owns(0, 1)
	g.joined()
	g.owns(1, 0)
	if _, settled := g.state(); !settled {
		t.Fatal("shut after the settle time with a worker left without partitions")
	}
}
