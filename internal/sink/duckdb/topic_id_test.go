package duckdb

import (
	"context"
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
