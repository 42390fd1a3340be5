package verify

import (
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

// A partition whose position (Iceberg's tracelake.position.<t>.<p>) says
// offsets 0-9 were loaded, but whose rows are in neither table, while
// Kafka holds a committed record at each of them: every one of them is
// missing. verify must report the gap as it does when one row of the
// partition survives (TestFromStored).
func TestFromStoredPartitionWithAPositionAndNoRows(t *testing.T) {
	other := sink.TopicPartition{Topic: "t", Partition: 1}
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 10}, other: {Low: 0, High: 10}}
	next := map[sink.TopicPartition]int64{tp: 10, other: 10}
	all := func(tps ...sink.TopicPartition) map[sink.TopicPartition]*sink.Offsets {
		out := map[sink.TopicPartition]*sink.Offsets{}
		for _, p := range tps {
			var o sink.Offsets
			for off := int64(0); off < 10; off++ {
				o.Add(off)
			}
			out[p] = &o
		}
		return out
	}
	// Kafka: every offset of both partitions is a committed record.
	records := func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		return all(tp, other), nil
	}
	raw := all(tp) // partition 1's rows are all gone
	rep := FromStored(marks, next, raw, nil, nil, true, records)
	var p1 *Partition
	for i := range rep.Partitions {
		if rep.Partitions[i].Partition == 1 {
			p1 = &rep.Partitions[i]
		}
	}
	if rep.OK || p1 == nil || p1.Gaps != 10 {
		t.Errorf("partition 1: position 10, no row stored, Kafka holds records 0-9: report OK=%v problems=%q partition=%+v; want 10 offsets missing (gap: 0-9)",
			rep.OK, rep.Problems, p1)
	}
	// Control: one surviving row makes the other nine a gap.
	one := all(tp)
	var o sink.Offsets
	o.Add(9)
	one[other] = &o
	if rep := FromStored(marks, next, one, nil, nil, true, records); rep.OK {
		t.Errorf("control (one row of partition 1 stored): OK, want a gap of 9")
	}
	// A position over records all aborted (Kafka holds no committed data
	// record there) has nothing to store: no gap.
	if rep := FromStored(marks, next, all(tp), nil, nil, true, func(map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		return all(tp), nil
	}); !rep.OK {
		t.Errorf("partition 1 of aborted records only: %q, want OK", rep.Problems)
	}
}

// Lag is what is still to load: with nothing loaded yet from a partition
// whose first 40 records retention deleted, 60, not 100.
func TestLagLeavesOutWhatRetentionDeleted(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 40, High: 100}}
	for _, fromStart := range []bool{true, false} {
		rep := FromStored(marks, map[sink.TopicPartition]int64{}, nil, nil, nil, fromStart, nil)
		if len(rep.Partitions) != 1 || rep.Partitions[0].Lag != 60 && (fromStart || rep.Partitions[0].Lag != -1) {
			t.Errorf("fromStart %v: partitions %+v, want lag 60 (or unknown without fromStart)", fromStart, rep.Partitions)
		}
	}
}
