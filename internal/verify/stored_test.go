package verify

import (
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// FromStored finds duplicates (in one table or across both), gaps below
// the resume position, and lag against Kafka.
func TestFromStored(t *testing.T) {
	tp := sink.TopicPartition{Topic: "t", Partition: 0}
	offs := func(list ...int64) map[sink.TopicPartition]*sink.Offsets {
		var o sink.Offsets
		for _, off := range list {
			o.Add(off)
		}
		return map[sink.TopicPartition]*sink.Offsets{tp: &o}
	}
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 12}}
	next := map[sink.TopicPartition]int64{tp: 10}
	clean := FromStored(marks, next, offs(0, 1, 2, 3, 4, 6, 7, 8, 9), offs(5), true)
	if !clean.OK || clean.Partitions[0].Lag != 2 || clean.Partitions[0].Rows != 9 || clean.Partitions[0].DLQRows != 1 {
		t.Errorf("clean: %+v", clean)
	}
	bad := FromStored(marks, next, offs(0, 1, 1, 2, 4, 6, 7, 8, 9), offs(6), true)
	want := []string{"t/0: 2 offsets missing (gap)", "t/0: 2 offsets stored more than once"} // 3 and 5; 1 twice, 6 in both tables
	if bad.OK || !slices.Equal(bad.Problems, want) {
		t.Errorf("problems %q, want %q", bad.Problems, want)
	}
}
