package sink

import "testing"

// A batch keeps its name across retries of its staging; two batches of the
// same offsets (two owners, a re-read) never share one.
func TestBatchNamesAreUniquePerStaging(t *testing.T) {
	ranges := []Range{{TopicPartition: TopicPartition{Topic: "t/x", Partition: 3}, First: 10, Last: 19}}
	a := &Batch{Ranges: ranges, ID: NewBatchID()}
	b := &Batch{Ranges: ranges, ID: NewBatchID()}
	if a.Name() != a.Name() {
		t.Error("a batch's name changed between two calls")
	}
	if a.Name() == b.Name() {
		t.Errorf("two stagings of the same offsets share the name %s", a.Name())
	}
	if want := "t_x-3-10-19-n1-"; a.Name()[:len(want)] != want {
		t.Errorf("name %s does not start with %s", a.Name(), want)
	}
}
