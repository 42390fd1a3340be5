package iceberg_test

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// withTopicID is b with its ranges read from the topic of id id.
func withTopicID(b *sink.Batch, id string) *sink.Batch {
	for i := range b.Ranges {
		b.Ranges[i].TopicID = id
	}
	return b
}

// A topic deleted and recreated: a partition loaded from the new topic
// (one the old topic never filled: no position to check, or one started
// over) records the new id, and that says nothing of the topic's other
// partitions, whose positions were loaded from the old topic. Each keeps
// the id its own position was loaded from, as a DuckDB or Databend ledger
// row does. Before, the table kept one id per topic: the new one, set by
// the first partition's load (a worker's, flushed as the run stopped on
// another), made every old position pass the next start's check, and
// reading resumed there in the new log, its records below never loaded.
func TestTopicIDIsEachPartitions(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, false)
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	load(t, s, withTopicID(batch(0, 0, 9), "old"))
	load(t, s, withTopicID(batch(1, 0, 4), "new"))
	p0, p1 := sink.TopicPartition{Topic: "traces", Partition: 0}, sink.TopicPartition{Topic: "traces", Partition: 1}
	for _, s := range []interface {
		TopicIDs(context.Context, []sink.TopicPartition) (map[sink.TopicPartition]string, error)
	}{s, openSink(t, dir, false)} { // as loaded, and read by another process
		got, err := s.TopicIDs(context.Background(), []sink.TopicPartition{p0, p1})
		if err != nil {
			t.Fatal(err)
		}
		if got[p0] != "old" || got[p1] != "new" {
			t.Errorf("topic ids %v, want %s old (its position was loaded from it) and %s new", got, p0, p1)
		}
	}
}
