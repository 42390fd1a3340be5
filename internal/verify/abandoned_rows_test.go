package verify

import (
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// Positions abandoned by a failed load (Iceberg, otlp.mode load) hold
// nothing: their requests were answered with a retry and their clients
// sent them again, at other positions, and abandoning deletes what the
// failed load committed there first. A row there is a request stored
// twice (or a load's rows under positions recorded as never holding
// any); verify took it for covered and printed OK.
func TestRowsAtAbandonedPositionsAreReported(t *testing.T) {
	seq := sink.TopicPartition{Topic: "otlp:traces", Partition: 0}
	next := map[sink.TopicPartition]int64{seq: 10}
	abandoned := map[sink.TopicPartition][]sink.Run{seq: {{First: 3, Last: 5}}}
	at := func(list ...int64) map[sink.TopicPartition]*sink.Offsets {
		var o sink.Offsets
		for _, off := range list {
			o.Add(off)
		}
		return map[sink.TopicPartition]*sink.Offsets{seq: &o}
	}
	if rep := FromStored(nil, next, at(0, 1, 2, 6, 7, 8, 9), nil, abandoned, true, nil); !rep.OK {
		t.Fatalf("nothing at the abandoned positions: %q", rep.Problems)
	}
	for _, c := range []struct {
		name     string
		raw, dlq map[sink.TopicPartition]*sink.Offsets
		want     []string
	}{
		{"a span's message at an abandoned position", at(0, 1, 2, 4, 6, 7, 8, 9), nil, []string{"otlp:traces/0", "rows at 1 abandoned positions", "main table 4-4"}},
		{"a dead letter at an abandoned position", at(0, 1, 2, 6, 7, 8, 9), at(3), []string{"otlp:traces/0", "rows at 1 abandoned positions", "dead-letter table 3-3"}},
	} {
		rep := FromStored(nil, next, c.raw, c.dlq, abandoned, true, nil)
		if rep.OK || !hasProblemWith(rep, c.want...) {
			t.Errorf("%s: ok=%v %q, want a problem with %q", c.name, rep.OK, rep.Problems, c.want)
		}
	}
}

// hasProblemWith says whether one of rep's problems contains each of want.
func hasProblemWith(rep *Report, want ...string) bool {
	for _, p := range rep.Problems {
		all := true
		for _, w := range want {
			all = all && strings.Contains(p, w)
		}
		if all {
			return true
		}
	}
	return false
}

// On Iceberg, as on the ledger sinks, a row stored twice is reported
// with where it is: the offsets held more than once.
func TestFromStoredNamesTheOffsetsStoredTwice(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 12}}
	next := map[sink.TopicPartition]int64{tp: 10}
	rep := FromStored(marks, next, stored(0, 1, 1, 2, 3, 4, 6, 7, 8, 9), stored(5, 6), nil, true, nil)
	if !hasProblemWith(rep, "t/0: 2 offsets stored more than once", "(in 1-1, 6-6)") {
		t.Errorf("problems %q", rep.Problems)
	}
}
