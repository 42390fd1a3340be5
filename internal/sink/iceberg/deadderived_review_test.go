package iceberg_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// A load over a killed load's operations whose spans' commit lost every
// race (its dead letters' commit landed) is retried by the pipeline with
// the same staged batch. Between the two attempts, maintenance compacted
// the dead-letter table and expired the snapshots before: the retry must
// still store the range, its dead letter without the killed load's
// operation beside it.
func TestDeadDerivedRetryAfterTheDeadLettersWereCompacted(t *testing.T) {
	dir := t.TempDir()
	killed, s, other, maint := openDerived(t, dir), openDerived(t, dir), openDerived(t, dir), openDerived(t, dir)
	load(t, s, derivedBatch(0, 9, 3)) // a file of dead letters already, to compact with the load's
	killBefore(t, killed, "tracelake.spans", derivedBatch(10, 19))
	racing := true
	raceSpans(t, s, other, func() bool { return racing })
	_, files, err := tryLoad(t, s, derivedBatch(10, 19, 15))
	if err == nil {
		t.Fatal("the load whose spans' commit lost every race succeeded")
	}
	racing = false
	compactDeadLettersAway(t, maint)
	if _, err := s.Load(t.Context(), files); err != nil {
		t.Fatalf("the retry of the load: %v", err)
	}
	wantSpansAndDeadLetters(t, s, 0, 19, 3, 15)
}

// derivedBatchOf is derivedBatch of partition p of traces.
func derivedBatchOf(p int32, first, last int64, bad ...int64) *sink.Batch {
	b := derivedBatch(first, last, bad...)
	to := fmt.Appendf(nil, `"kpartition":%d`, p)
	b.Rows = bytes.ReplaceAll(b.Rows, []byte(`"kpartition":0`), to)
	b.Derived = bytes.ReplaceAll(b.Derived, []byte(`"kpartition":0`), to)
	b.DLQ = nil
	for _, o := range bad {
		rec := &kgo.Record{Topic: "traces", Partition: p, Offset: o, Value: []byte{0xfe}, Timestamp: time.Now()}
		b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "not OTLP", envelope.StageDecode)
	}
	b.Ranges[0].Partition = p
	return b
}

// deadDerivedMarks are the main table's tracelake.dead-derived.*
// properties.
func deadDerivedMarks(t *testing.T, s *iceberg.Sink) map[string]string {
	t.Helper()
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range tbl.Properties() {
		if strings.HasPrefix(k, "tracelake.dead-derived.") {
			out[k] = v
		}
	}
	return out
}

// A load of two partitions over a killed load's operations, stopped at
// its first deletion after its spans' commit marked its dead letters in
// both: each partition's operations there are deleted by the process
// assigned it next, the other's mark left to its own owner, and no mark
// stays once both were assigned.
func TestDeadDerivedOfTwoPartitionsFinishedByTheirAssignments(t *testing.T) {
	dir := t.TempDir()
	killed, stoppedOne := openDerived(t, dir), openDerived(t, dir)
	killBefore(t, killed, "tracelake.spans", derivedBatchOf(0, 0, 9), derivedBatchOf(1, 100, 109))
	stopAtMaintenance(t, stoppedOne, derivedBatchOf(0, 0, 9, 5), derivedBatchOf(1, 100, 109, 105, 107))
	if marks := deadDerivedMarks(t, stoppedOne); len(marks) != 2 {
		t.Fatalf("marks %v after the spans' commit, want one per partition", marks)
	}
	first, second := openDerived(t, dir), openDerived(t, dir)
	if _, err := first.Positions(t.Context(), []sink.TopicPartition{{Topic: "traces", Partition: 1}}); err != nil {
		t.Fatal(err)
	}
	ops := operationOffsets(t, operations(t, first))
	if slices.Contains(ops, 105) || slices.Contains(ops, 107) || !slices.Contains(ops, 5) {
		t.Errorf("operations at %v after partition 1's assignment: want those at its dead letters 105, 107 deleted, partition 0's at 5 not yet", ops)
	}
	if marks := deadDerivedMarks(t, first); len(marks) != 1 {
		t.Errorf("marks %v after partition 1's assignment, want partition 0's only", marks)
	}
	if _, err := second.Positions(t.Context(), []sink.TopicPartition{{Topic: "traces", Partition: 0}}); err != nil {
		t.Fatal(err)
	}
	spans, dlq := stored(t, second, false), stored(t, second, true)
	want := map[int32][]int64{0: {5}, 1: {105, 107}}
	all := slices.Concat(spans[0], spans[1])
	slices.Sort(all)
	ops = operationOffsets(t, operations(t, second))
	if !slices.Equal(spans[0], seq(0, 9, want[0]...)) || !slices.Equal(spans[1], seq(100, 109, want[1]...)) ||
		!slices.Equal(dlq[0], want[0]) || !slices.Equal(dlq[1], want[1]) || !slices.Equal(ops, all) {
		t.Errorf("spans at %v, operations at %v, dead letters at %v; want dead letters at %v, spans and operations at every other offset", spans, ops, dlq, want)
	}
	if marks := deadDerivedMarks(t, second); len(marks) != 0 {
		t.Errorf("marks %v left once both partitions were assigned", marks)
	}
}

// Two new owners of a killed load's range, one with part of it: the
// first's spans' commit takes offsets 0-4 (a span at 2), the second's
// the rest. The second's dead letter at 2 is fenced out, and the killed
// load's operation at 2 is that of the first's span: it stays. Its dead
// letter at 7 is its own: the operation there goes.
func TestDeadDerivedOwnersOfPartsOfTheRange(t *testing.T) {
	dir := t.TempDir()
	killed, partOwner, owner := openDerived(t, dir), openDerived(t, dir), openDerived(t, dir)
	killBefore(t, killed, "tracelake.spans", derivedBatch(0, 9))
	load(t, partOwner, derivedBatch(0, 4))
	load(t, owner, derivedBatch(0, 9, 2, 7))
	wantSpansAndDeadLetters(t, owner, 0, 9, 7)
	if marks := deadDerivedMarks(t, owner); len(marks) != 0 {
		t.Errorf("marks %v left after the load", marks)
	}
}
