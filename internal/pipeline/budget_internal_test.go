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
		idle, reserved := b.reserve(100, 2) // the worker with empty partitions
		if idle != 1 {
			t.Fatalf("first reservation: %d records", idle)
		}
		if n, _ := b.reserve(100, 2); n == 0 {
			t.Fatal("a second worker gets nothing while the record size is unknown")
		}
		b.settle(reserved, 0, 0)
		b.settle(1, 0, 0)
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
