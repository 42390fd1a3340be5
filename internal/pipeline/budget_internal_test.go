package pipeline

import "testing"

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
