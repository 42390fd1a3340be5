package pipeline

import (
	"testing"
	"time"
)

// Until the record size is known every worker may take one record: a
// worker whose partitions are empty, reserving again after each empty
// poll, must not starve a worker that has records (it did: the tests hung
// when all records were in the other worker's partition).
func TestBudgetLearningDoesNotStarve(t *testing.T) {
	b := NewBudget(1 << 20)
	for range 3 {
		idle, reserved := b.reserve(100, 2, true) // the worker with empty partitions
		if idle != 1 {
			t.Fatalf("first reservation: %d records", idle)
		}
		if n, _ := b.reserve(100, 2, false); n == 0 {
			t.Fatal("a second worker gets nothing while the record size is unknown")
		}
		b.settle(reserved, 0, 0)
		b.settle(1, 0, 0)
	}
}

// Once records are known to be larger than a worker's share, the one
// record allowed with nothing in flight goes to the worker that has
// records too, whatever an idle worker (its partitions empty) reserved
// for its next, empty poll; the idle one still may poll.
func TestBudgetIdleWorkerLeavesTheLargeRecordToTheOthers(t *testing.T) {
	b := NewBudget(1 << 20)
	n, reserved := b.reserve(100, 2, false)
	b.settle(reserved, n, 3<<19) // a record of 1.5 MiB read
	b.release(3 << 19)           // and loaded
	for range 3 {
		idle, held := b.reserve(100, 2, true)
		if idle != 1 {
			t.Fatalf("idle worker: %d records; want one, or what arrives for it is never read", idle)
		}
		busy, reserved := b.reserve(100, 2, false)
		if busy != 1 {
			t.Fatal("the worker that has records gets nothing while an idle worker's poll is out")
		}
		b.settle(held, 0, 0)
		b.settle(reserved, 1, 3<<19)
		if again, _ := b.reserve(100, 2, true); again != 0 {
			t.Fatalf("%d more records while a record larger than the budget is held", again)
		}
		b.release(3 << 19)
	}
}

// Aligned loads come at LoadPhase + k·LoadInterval, whenever the first
// file arrived: the workers of a process load at the same moments.
func TestAlignedLoadMoments(t *testing.T) {
	w := &Worker{opt: Options{LoadInterval: time.Second, AlignLoads: true, LoadPhase: 300 * time.Millisecond}}
	for at, want := range map[time.Duration]time.Duration{
		0: 300 * time.Millisecond, 300 * time.Millisecond: time.Second, 900 * time.Millisecond: 400 * time.Millisecond,
	} {
		if got := w.untilLoad(time.Unix(1_800_000_000, int64(at))); got != want {
			t.Errorf("first file at +%v: load in %v, want %v", at, got, want)
		}
	}
	w.opt.AlignLoads = false
	if got := w.untilLoad(time.Unix(1_800_000_000, 0)); got != time.Second {
		t.Errorf("not aligned: load in %v, want the interval", got)
	}
}
