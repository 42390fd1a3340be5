package duckdb

import (
	"context"
	"maps"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// verify opens the database without Prepare: a ledger an older release
// made has no topic_id column until a run of this release opens it. Its
// rows record no id, as those of a ledger grown since: nothing to check,
// not an error. Before, verify failed there on the missing column, where
// the release before passed.
func TestTopicIDsOfALedgerWithoutTheColumn(t *testing.T) {
	s := open(t, t.TempDir())
	if _, err := s.db.Exec(`CREATE TABLE trace_raw_ledger (topic VARCHAR, "partition" INTEGER, first_offset BIGINT, last_offset BIGINT,
		records BIGINT, dlq_records BIGINT, load_id VARCHAR, files INTEGER, loaded_at TIMESTAMP)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO trace_raw_ledger VALUES ('traces', 0, 0, 9, 10, 0, 'l1', 1, now())`); err != nil {
		t.Fatal(err)
	}
	got, err := s.TopicIDs(context.Background(), []sink.TopicPartition{{Topic: "traces", Partition: 0}})
	if err != nil {
		t.Fatalf("topic ids of a ledger an older release made: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("topic ids %v of a ledger without them, want none", got)
	}
}

// An assignment reads its partitions' positions and topic ids in one
// query of their rows: each partition's next offset, and the id of its
// furthest row that has one (a later row without one, an older release's
// load, keeps it); partitions not asked for, and those the ledger does
// not know, are absent.
func TestPositionsAndTopicIDsOfTheAssignedPartitions(t *testing.T) {
	s := prepared(t, false)
	for _, r := range []string{
		`('traces', 0, 0, 9, 'id-old')`, `('traces', 0, 10, 19, 'id-new')`, `('traces', 0, 20, 29, NULL)`,
		`('traces', 1, 0, 4, NULL)`, `('traces', 2, 0, 99, 'id-new')`, `('logs', 0, 0, 7, 'id-logs')`,
	} {
		if _, err := s.db.Exec(`INSERT INTO trace_raw_ledger (topic, "partition", first_offset, last_offset, topic_id, records, dlq_records, load_id, files, loaded_at)
			SELECT *, 1, 0, 'l', 1, now() FROM (VALUES ` + r + `)`); err != nil {
			t.Fatal(err)
		}
	}
	parts := []sink.TopicPartition{{Topic: "traces", Partition: 0}, {Topic: "traces", Partition: 1}, {Topic: "logs", Partition: 0}, {Topic: "logs", Partition: 5}}
	positions, ids, err := s.PositionsAndTopicIDs(context.Background(), parts)
	if err != nil {
		t.Fatal(err)
	}
	wantPositions := map[sink.TopicPartition]int64{{Topic: "traces", Partition: 0}: 30, {Topic: "traces", Partition: 1}: 5, {Topic: "logs", Partition: 0}: 8}
	wantIDs := map[sink.TopicPartition]string{{Topic: "traces", Partition: 0}: "id-new", {Topic: "logs", Partition: 0}: "id-logs"}
	if !maps.Equal(positions, wantPositions) || !maps.Equal(ids, wantIDs) {
		t.Errorf("positions %v, ids %v; want %v, %v", positions, ids, wantPositions, wantIDs)
	}
	// Positions and TopicIDs alone answer the same.
	if p, err := s.Positions(context.Background(), parts); err != nil || !maps.Equal(p, wantPositions) {
		t.Errorf("Positions: %v (%v), want %v", p, err, wantPositions)
	}
	if i, err := s.TopicIDs(context.Background(), parts); err != nil || !maps.Equal(i, wantIDs) {
		t.Errorf("TopicIDs: %v (%v), want %v", i, err, wantIDs)
	}
}
