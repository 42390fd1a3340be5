package verify

import (
	"fmt"
	"slices"
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

// A partition nothing is loaded of whose group offset is past its log
// start: below that offset nothing will be loaded. With start_offset
// earliest those offsets are a gap on a sink without ledger ranges
// (Iceberg, FromStored) as on the ledger sinks; with latest they are
// skipped on purpose, and the report passes.
func TestCommittedStartPastTheLogStart(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 5, High: 50}}
	committed := func() map[sink.TopicPartition]int64 { return map[sink.TopicPartition]int64{tp: 20} }
	for _, fromStart := range []bool{true, false} {
		rep := FromStored(marks, nil, nil, nil, nil, fromStart, nil)
		rep.AddStarts(committed)
		p := rep.Partitions[0]
		switch {
		case p.Lag != 30:
			t.Errorf("earliest %v: lag %d, want 30 (20 to 50)", fromStart, p.Lag)
		case fromStart && (rep.OK || p.Gaps != 15 || !slices.Equal(rep.Problems, []string{"t/0: 15 offsets missing (gap: 5-19)"})):
			t.Errorf("earliest: ok=%v gaps %d problems %q, want offsets 5-19 missing", rep.OK, p.Gaps, rep.Problems)
		case !fromStart && (!rep.OK || p.Gaps != 0 || p.Skipped != 15):
			t.Errorf("latest: ok=%v gaps %d skipped %d, want ok with 15 skipped", rep.OK, p.Gaps, p.Skipped)
		}
	}
}
