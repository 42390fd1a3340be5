package verify

import (
	"fmt"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// A group's committed offset past the end of Kafka's log (the topic was
// deleted and recreated, its offsets left from the old log) is no start
// of this log: the run stops on it rather than load from there. Nothing
// of the partition's 50 records is loaded, and with start_offset earliest
// its lag is those 50; AddStarts took offset 1000 for where loading
// starts and reported a lag of 0 ("nothing loaded yet; loading starts at
// offset 1000"), as if the partition were caught up.
func TestCommittedStartPastTheLogEndIsNoStart(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 50}}
	rep := FromStored(marks, nil, nil, nil, nil, true, nil)
	rep.AddStarts(func() map[sink.TopicPartition]int64 { return map[sink.TopicPartition]int64{tp: 1000} })
	p := rep.Partitions[0]
	if p.Lag != 50 || p.Start != nil {
		start := "none"
		if p.Start != nil {
			start = fmt.Sprint(*p.Start)
		}
		t.Errorf("lag %d, committed start %s; want lag 50 (the log's 50 records, none loaded) and no start", p.Lag, start)
	}
}
