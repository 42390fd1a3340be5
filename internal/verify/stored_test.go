package verify

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
)

var tp = sink.TopicPartition{Topic: "t", Partition: 0}

// stored is partition tp's offsets in a table.
func stored(list ...int64) map[sink.TopicPartition]*sink.Offsets {
	var o sink.Offsets
	for _, off := range list {
		o.Add(off)
	}
	return map[sink.TopicPartition]*sink.Offsets{tp: &o}
}

// FromStored finds duplicates (in one table or across both), gaps below
// the resume position, and lag against Kafka.
func TestFromStored(t *testing.T) {

	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 12}}
	next := map[sink.TopicPartition]int64{tp: 10}
	clean := FromStored(marks, next, stored(0, 1, 2, 3, 4, 6, 7, 8, 9), stored(5), nil, true, nil)
	if !clean.OK || clean.Partitions[0].Lag != 2 || clean.Partitions[0].Rows != 9 || clean.Partitions[0].DLQRows != 1 {
		t.Errorf("clean: %+v", clean)
	}
	bad := FromStored(marks, next, stored(0, 1, 1, 2, 4, 6, 7, 8, 9), stored(6), nil, true, nil)
	want := []string{"t/0: 2 offsets missing (gap: 3-3, 5-5)", "t/0: 2 offsets stored more than once (in 1-1, 6-6)"} // 3 and 5; 1 twice, 6 in both tables
	if bad.OK || !slices.Equal(bad.Problems, want) {
		t.Errorf("problems %q, want %q", bad.Problems, want)
	}
}

// Positions the sink recorded as abandoned (an OTLP sequence's, past a
// load that failed half-committed) are no gap; a hole beside them is.
func TestAbandonedPositionsAreNoGap(t *testing.T) {
	next := map[sink.TopicPartition]int64{tp: 10}
	abandoned := map[sink.TopicPartition][]sink.Run{tp: {{First: 3, Last: 4}}}
	rep := FromStored(nil, next, stored(0, 1, 2, 5, 6, 7, 8, 9), nil, abandoned, true, nil)
	if !rep.OK || rep.Partitions[0].Abandoned != 2 || rep.Partitions[0].Gaps != 0 {
		t.Errorf("abandoned 3-4: %+v %v", rep.Partitions[0], rep.Problems)
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "t/0: 2 positions abandoned") {
		t.Errorf("the report does not show the abandoned positions:\n%s", text.String())
	}
	// A dead letter there is a request stored twice (abandoning deletes
	// the failed load's; its client sent it again), reported once as
	// such, not also as an offset stored twice.
	rep = FromStored(nil, next, stored(0, 1, 2, 5, 6, 7, 8, 9), stored(4), abandoned, true, nil)
	if rep.OK || rep.Partitions[0].Duplicates != 0 || rep.Partitions[0].StoredAbandoned != 1 {
		t.Errorf("a dead letter at an abandoned position: %+v %v", rep.Partitions[0], rep.Problems)
	}
	rep = FromStored(nil, next, stored(0, 1, 5, 6, 7, 8, 9), nil, abandoned, true, nil)
	if rep.OK || rep.Partitions[0].Gaps != 1 {
		t.Errorf("2 missing beside abandoned 3-4: %+v %v", rep.Partitions[0], rep.Problems)
	}
}

// Offsets that hold no record in Kafka (a transaction's marker, an aborted
// transaction's records) are not gaps of a sink without a ledger; an
// offset Kafka holds a committed record at is, and so is one below the
// log start, which Kafka can no longer tell.
func TestFromStoredAsksKafkaAboutHoles(t *testing.T) {
	// Kafka: 0-3 aborted, 4 abort marker, 5-6 committed, 7 commit marker,
	// 8 committed, 9 committed, 10 commit marker.
	kafkaData := stored(5, 6, 8, 9)
	var asked map[sink.TopicPartition]sink.Run
	records := func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		asked = spans
		return kafkaData, nil
	}
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 11}}
	next := map[sink.TopicPartition]int64{tp: 11}
	clean := FromStored(marks, next, stored(5, 6, 8, 9), nil, nil, true, records)
	if !clean.OK || clean.Partitions[0].Lag != 0 {
		t.Errorf("markers and aborted records counted: %+v", clean)
	}
	if want := (sink.Run{First: 0, Last: 10}); asked[tp] != want {
		t.Errorf("asked Kafka about %v, want %v (from the log start to the last hole)", asked[tp], want)
	}
	withoutKafka := FromStored(marks, next, stored(5, 6, 8, 9), nil, nil, true, nil)
	if withoutKafka.OK {
		t.Error("without Kafka's answer the holes must count as gaps")
	}
	lost := FromStored(marks, next, stored(5, 9), nil, nil, true, records)
	if want := []string{"t/0: 2 offsets missing (gap: 6-6, 8-8)"}; !slices.Equal(lost.Problems, want) {
		t.Errorf("problems %q, want %q", lost.Problems, want)
	}
	// Retention moved the log start to 6: 4 cannot be told apart any more.
	marks[tp] = kafka.Watermarks{Low: 6, High: 11}
	kafkaData = stored(6, 8, 9)
	old := FromStored(marks, next, stored(3, 6, 8, 9), nil, nil, true, records)
	if want := []string{"t/0: 2 offsets missing (gap: 4-5)"}; !slices.Equal(old.Problems, want) {
		t.Errorf("problems %q, want %q", old.Problems, want)
	}
}

// A ledger past Kafka's log end (a recreated topic) fails the report, on
// Iceberg's positions as on a ledger; one that only passed the watermarks
// read before it (a run loading meanwhile) does not, and Kafka is asked
// again only when a partition looks past its end.
func TestCheckLogEnds(t *testing.T) {
	next := map[sink.TopicPartition]int64{tp: 10}
	before := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 8}}
	for _, c := range []struct {
		name     string
		now      int64
		wantFail bool
	}{
		{"the log grew meanwhile", 12, false},
		{"the log ends below the ledger", 8, true},
	} {
		rep := FromStored(before, next, stored(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), nil, nil, true, nil)
		asked := 0
		rep.CheckLogEnds(func() map[sink.TopicPartition]kafka.Watermarks {
			asked++
			return map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: c.now}}
		})
		if rep.OK == c.wantFail || rep.Partitions[0].PastLogEnd != c.wantFail || asked != 1 {
			t.Errorf("%s: ok=%v past=%v asked %d times, problems %q", c.name, rep.OK, rep.Partitions[0].PastLogEnd, asked, rep.Problems)
		}
	}
	caughtUp := FromStored(map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 10}}, next, stored(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), nil, nil, true, nil)
	caughtUp.CheckLogEnds(func() map[sink.TopicPartition]kafka.Watermarks {
		t.Error("Kafka asked again for a ledger within the log")
		return nil
	})
	if !caughtUp.OK {
		t.Errorf("caught up: problems %q", caughtUp.Problems)
	}
}

// A topic recreated shorter than the stored positions: Kafka is asked
// only below each partition's log end (a read past it waits for records
// that never come, until its timeout, and then every hole of every
// partition counts as a gap), and a hole past the log end, which Kafka
// can no longer tell about, is a gap.
func TestFromStoredAsksKafkaOnlyBelowTheLogEnd(t *testing.T) {
	// The new log: 0, 1 and 3 committed, 2 a commit marker; it ends at 4.
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 4}}
	next := map[sink.TopicPartition]int64{tp: 10}
	records := func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		for p, r := range spans {
			if r.Last >= marks[p].High {
				// kafka.DataRecords would wait here for offset r.Last.
				return nil, fmt.Errorf("%v: asked through offset %d, past the log end %d", p, r.Last, marks[p].High)
			}
		}
		return stored(0, 1, 3), nil
	}
	rep := FromStored(marks, next, stored(0, 1, 3, 5, 6, 7, 8, 9), nil, nil, true, records)
	if want := []string{"t/0: 1 offsets missing (gap: 4-4)"}; !slices.Equal(rep.Problems, want) {
		t.Errorf("problems %q, want %q (2 is a marker Kafka holds, 4 past the log end)", rep.Problems, want)
	}
}

// The rows of a message beyond its first that the scan found stored twice
// or missing (by their index; the offsets' runs see only each message's
// first row) fail the report, as a duplicate and as missing rows.
func TestFromStoredCountsRowsBeyondAMessagesFirst(t *testing.T) {
	next := map[sink.TopicPartition]int64{tp: 3}
	raw := stored(0, 1, 2)
	raw[tp].RepeatedRows, raw[tp].MissingRows = 1, 2
	rep := FromStored(nil, next, raw, nil, nil, true, nil)
	want := []string{"t/0: 1 offsets stored more than once", "t/0: 2 rows of messages missing (an index below a stored row's of its message)"}
	if rep.OK || rep.Partitions[0].Duplicates != 1 || rep.Partitions[0].MissingRows != 2 || !slices.Equal(rep.Problems, want) {
		t.Errorf("problems %q, want %q: %+v", rep.Problems, want, rep.Partitions[0])
	}
}

// Under start_offset latest the head of a partition is not checked, but a
// message whose later rows are stored below every first row was loaded:
// its first row missing is a hole (Kafka holds its record: a gap), as it
// is for any later message.
func TestFromStoredHeadMessageWithoutItsFirstRow(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 10}}
	next := map[sink.TopicPartition]int64{tp: 10}
	records := func(map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		return stored(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), nil
	}
	// Loading began at offset 2 (latest); each message has rows 0 and 1.
	for _, c := range []struct {
		name string
		gone int64 // whose first row is deleted, -1 none
		want []string
	}{
		{"none", -1, nil},
		{"message 2", 2, []string{"t/0: 1 offsets missing (gap: 2-2)"}},
		{"message 5", 5, []string{"t/0: 1 offsets missing (gap: 5-5)"}},
	} {
		raw := stored()
		for o := int64(2); o < 10; o++ {
			if o != c.gone {
				raw[tp].Add(o)
			}
			raw[tp].AddRow(o)
		}
		rep := FromStored(marks, next, raw, nil, nil, false, records)
		if !slices.Equal(rep.Problems, c.want) || rep.Partitions[0].Skipped != 2 {
			t.Errorf("%s: problems %q, want %q; skipped %d, want 2", c.name, rep.Problems, c.want, rep.Partitions[0].Skipped)
		}
	}
}

// Rows past the position, no load's: they are reported as such, and the
// hole at the head ends at the position (the offsets past it are still to
// load, not missing). It reached the first row past the position: a
// message's first row there (ahead of the position by 2) made 2 offsets
// still to load count as missing.
func TestFromStoredHoleEndsAtThePosition(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 10}}
	next := map[sink.TopicPartition]int64{tp: 5}
	for _, c := range []struct {
		name string
		add  func(*sink.Offsets)
	}{
		{"a message's first row", func(o *sink.Offsets) { o.Add(7) }},
		{"a message's later row", func(o *sink.Offsets) { o.AddRow(7) }},
	} {
		raw := stored()
		c.add(raw[tp])
		raw[tp].AddPast(7)
		rep := FromStored(marks, next, raw, nil, nil, true, nil)
		if p := rep.Partitions[0]; p.Gaps != 5 || p.PastPosition != 1 || !slices.Equal(p.Missing, []string{"0-4"}) {
			t.Errorf("%s at 7, position 5: gaps %d at %q, rows past the position %d; want 5 at 0-4, and 1: %q",
				c.name, p.Gaps, p.Missing, p.PastPosition, rep.Problems)
		}
	}
}

// Rows past a position that stands at the log start (or at 0 on an OTLP
// sequence): nothing below the position is missing, and the offsets from
// it up to the rows are still to load, neither missing nor skipped. The
// head was left at the first row there, so all of them counted as
// missing (skipped under start_offset latest).
func TestFromStoredNoHoleBelowAPositionAtTheStart(t *testing.T) {
	for _, c := range []struct {
		name string
		tp   sink.TopicPartition
		low  int64
	}{
		{"from the log start", tp, 0},
		{"past retention", tp, 3},
		{"an OTLP sequence", sink.TopicPartition{Topic: sink.SequenceTopicPrefix + "i", Partition: 0}, -1},
	} {
		for _, row := range []struct {
			name string
			add  func(*sink.Offsets, int64)
		}{
			{"a message's first row", (*sink.Offsets).Add},
			{"a message's later row", (*sink.Offsets).AddRow},
		} {
			var marks map[sink.TopicPartition]kafka.Watermarks
			if c.low >= 0 {
				marks = map[sink.TopicPartition]kafka.Watermarks{c.tp: {Low: c.low, High: 10}}
			}
			position := max(c.low, 0)
			next := map[sink.TopicPartition]int64{c.tp: position}
			raw := map[sink.TopicPartition]*sink.Offsets{c.tp: {}}
			row.add(raw[c.tp], position+4)
			raw[c.tp].AddPast(position + 4)
			for _, fromStart := range []bool{true, false} {
				rep := FromStored(marks, next, raw, nil, nil, fromStart, nil)
				if p := rep.Partitions[0]; p.Gaps != 0 || p.Skipped != 0 || p.PastPosition != 1 {
					t.Errorf("%s, %s 4 past the position %d (from the start %v): gaps %d at %q, skipped %d, rows past the position %d; want none, none, and 1: %q",
						c.name, row.name, position, fromStart, p.Gaps, p.Missing, p.Skipped, p.PastPosition, rep.Problems)
				}
			}
		}
	}
}

// Rows of a partition the table has no position for: no load wrote them
// (they are reported as such), so they say nothing of where loading
// began, and the offsets below them are still to load (its lag), neither
// missing nor skipped. The head was taken from the first of them.
func TestFromStoredNoHoleBelowRowsWithoutAPosition(t *testing.T) {
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 2, High: 10}}
	for _, row := range []struct {
		name string
		add  func(*sink.Offsets, int64)
	}{
		{"a message's first row", (*sink.Offsets).Add},
		{"a message's later row", (*sink.Offsets).AddRow},
	} {
		raw := map[sink.TopicPartition]*sink.Offsets{tp: {}}
		row.add(raw[tp], 6)
		raw[tp].AddPast(6)
		for _, fromStart := range []bool{true, false} {
			rep := FromStored(marks, nil, raw, nil, nil, fromStart, nil)
			if p := rep.Partitions[0]; p.Gaps != 0 || p.Skipped != 0 || p.PastPosition != 1 {
				t.Errorf("%s at 6, no position (from the start %v): gaps %d at %q, skipped %d, rows past the position %d; want none, none, and 1: %q",
					row.name, fromStart, p.Gaps, p.Missing, p.Skipped, p.PastPosition, rep.Problems)
			}
		}
	}
}

// A recreated topic whose log ends below the ledger and whose id is not
// the ledger's is one problem, named once, in the order verify runs the
// checks (the topic ids with each table's report, the log ends after
// it), as the run says it once. Before, the report listed it twice.
func TestRecreatedTopicReportedOnce(t *testing.T) {
	next := map[sink.TopicPartition]int64{tp: 10}
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 8}}
	rep := FromStored(marks, next, stored(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), nil, nil, true, nil)
	rep.CheckTopicIDs(map[sink.TopicPartition]string{tp: "old"}, func() map[string]string { return map[string]string{tp.Topic: "new"} })
	rep.CheckLogEnds(func() map[sink.TopicPartition]kafka.Watermarks { return marks })
	var about []string
	for _, p := range rep.Problems {
		if strings.HasPrefix(p, "t/0: ") && strings.Contains(p, "recreated") {
			about = append(about, p)
		}
	}
	if rep.OK || len(about) != 1 {
		t.Errorf("ok=%v, problems of the recreated topic %q: want one", rep.OK, about)
	}
}

// A topic recreated with fewer partitions: the ledger keeps the old
// topic's rows of the partitions gone (the run, never assigned them,
// never names them), and what they say was loaded was. Its partition
// that Kafka has, started over (its rows deleted, then loaded from the
// new topic), records the new id. Nothing of the new topic is left
// unloaded, so verify passes; before, it failed for good on each
// partition gone, saying the new log's records below the ledger were not
// loaded, of a log that does not exist.
func TestTopicIDOfAPartitionKafkaNoLongerHas(t *testing.T) {
	gone := sink.TopicPartition{Topic: tp.Topic, Partition: 3}
	var o sink.Offsets
	for off := int64(0); off < 10; off++ {
		o.Add(off)
	}
	raw := stored(0, 1, 2, 3, 4)
	raw[gone] = &o
	next := map[sink.TopicPartition]int64{tp: 5, gone: 10}
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 5}} // the new topic has partition 0 only
	rep := FromStored(marks, next, raw, nil, nil, true, nil)
	if !rep.OK {
		t.Fatalf("before the id check: %v", rep.Problems)
	}
	rep.CheckTopicIDs(map[sink.TopicPartition]string{tp: "new", gone: "old"}, func() map[string]string { return map[string]string{tp.Topic: "new"} })
	if !rep.OK {
		t.Errorf("a partition Kafka no longer has is reported: %q", rep.Problems)
	}
	// The check still applies to the partitions Kafka has.
	rep.CheckTopicIDs(map[sink.TopicPartition]string{tp: "old"}, func() map[string]string { return map[string]string{tp.Topic: "new"} })
	if rep.OK || len(rep.Problems) != 1 || !strings.HasPrefix(rep.Problems[0], "t/0: ") {
		t.Errorf("ok=%v, problems %q: want t/0's id reported", rep.OK, rep.Problems)
	}
}
