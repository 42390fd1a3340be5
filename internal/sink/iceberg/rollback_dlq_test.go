package iceberg_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// recoverAsTold starts sinks on dir until one starts, doing what each
// rollback error says: the positions it names set on the table it names.
func recoverAsTold(t *testing.T, dir string) *iceberg.Sink {
	t.Helper()
	ctx := context.Background()
	for range 4 {
		s := openSink(t, dir, false)
		err := s.Prepare(ctx)
		if err == nil {
			return s
		}
		if !errors.Is(err, sink.ErrFatal) || !strings.Contains(err.Error(), "was rolled back") {
			t.Fatalf("start: %v; want it to start or report a rollback", err)
		}
		set := s.SetTableProperty
		if strings.Contains(err.Error(), "table tracelake.trace_raw_dlq ") {
			set = s.SetDLQProperty
		}
		for _, m := range regexp.MustCompile(`(tracelake\.position\.[^=\s*]+)=(\d+)`).FindAllStringSubmatch(err.Error(), -1) {
			if err := set(ctx, m[1], m[2]); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatal("still refused after doing what four rollback errors said")
	return nil
}

// deadLetterLoads loads 0-29 of partition 0 of topic in three loads, 13
// and 23 dead letters.
func deadLetterLoads(t *testing.T, dir, topic string) {
	t.Helper()
	s := prepared(t, dir, 1)[0]
	load(t, s, batchOf(topic, 0, 0, 9))
	load(t, s, batchOf(topic, 0, 10, 19, 13))
	load(t, s, batchOf(topic, 0, 20, 29, 23))
}

// wantRecovered recovers as the errors say (recoverAsTold) and loads
// from where the recovered sink resumes partition 0 up to 39: every
// offset must then be stored once, 13 and 23 as dead letters.
func wantRecovered(t *testing.T, dir string) {
	t.Helper()
	r := recoverAsTold(t, dir)
	tp := sink.TopicPartition{Topic: "traces", Partition: 0}
	pos, err := r.Positions(context.Background(), []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	load(t, r, batch(0, pos[tp], 39, 13, 23))
	if got := stored(t, r, true)[0]; !slices.Equal(got, []int64{13, 23}) {
		t.Errorf("dead-letter offsets %v after the recovery, want 13 and 23", got)
	}
	if got := stored(t, r, false)[0]; !slices.Equal(got, seq(0, 39, 13, 23)) {
		t.Errorf("raw offsets %v after the recovery, want 0-39 but 13 and 23, once", got)
	}
}

// Another engine rolls back both tables of tracelake's last load (its
// dead letter 23 with it). The documented recovery, done as the errors
// say, loads the records again: every offset once, in one table or the
// other.
func TestRollbackOfBothTablesRecoversTheDeadLetters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	deadLetterLoads(t, dir, "traces")
	other := openSink(t, dir, false)
	if err := other.RollBackRaw(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := other.RollBackDLQ(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wantRecovered(t, dir)
}

// The same with only the dead-letter table rolled back: the main table
// still holds 20-29 but 23, and the dead letter 23 is gone. Its
// positions set back as told, the restart resumed from the main table's
// (30) and the dead letter 23 was lost for good; setting the main
// table's back too would have stored 20-29 twice.
func TestRollbackOfTheDeadLetterTableRecoversItsRows(t *testing.T) {
	dir := t.TempDir()
	deadLetterLoads(t, dir, "traces")
	if err := openSink(t, dir, false).RollBackDLQ(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	wantRecovered(t, dir)
}

// The OTLP receivers' own sequence (otlp.mode load) has no Kafka to read
// its requests from again: a start after its dead-letter table was rolled
// back alone must resume it past the main table's rows, not from the
// dead-letter table's position (its loader would take the main table's
// rows there for a failed load's and abandon their positions, and verify
// would then call them requests stored twice). The dead letters lost stay
// a gap verify reports.
func TestRollbackOfTheDeadLetterTableLeavesAnOTLPSequenceWhereItIs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	topic := sink.SequenceTopicPrefix + "traces"
	deadLetterLoads(t, dir, topic)
	if err := openSink(t, dir, false).RollBackDLQ(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r := recoverAsTold(t, dir)
	tp := sink.TopicPartition{Topic: topic, Partition: 0}
	pos, err := r.Positions(ctx, []sink.TopicPartition{tp})
	if err != nil {
		t.Fatal(err)
	}
	if pos[tp] != 30 {
		t.Errorf("the OTLP sequence resumes from %d, want 30 (the main table's position)", pos[tp])
	}
}
