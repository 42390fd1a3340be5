package databend_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A ledger made before topic_id existed gets it at Prepare (nullable):
// its rows have no id and are not reported (nothing to check them by),
// and a load records the id its ranges carry, the furthest load's
// reported.
func TestOldLedgerGainsTopicIDs(t *testing.T) {
	srv := oldLedger(t)
	s := open(t, srv, "")
	ctx := context.Background()
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare over an old ledger: %v", err)
	}
	if cols := srv.Columns("trace_raw_ledger"); !slices.Contains(cols, "topic_id VARCHAR") {
		t.Fatalf("ledger columns %v: want topic_id added", cols)
	}
	parts := []sink.TopicPartition{{Topic: "traces", Partition: 0}, {Topic: "traces", Partition: 1}}
	for i, id := range []string{"", "first-id", "second-id"} {
		b := batch(0, int64(i)*10, int64(i)*10+9)
		b.Ranges[0].TopicID = id
		if _, err := s.Load(ctx, stage(t, s, b)); err != nil {
			t.Fatal(err)
		}
		got, err := s.TopicIDs(ctx, parts)
		if err != nil {
			t.Fatal(err)
		}
		want := map[sink.TopicPartition]string{}
		if id != "" {
			want[parts[0]] = id
		}
		if !maps.Equal(got, want) {
			t.Errorf("after load %d (topic id %q): topic ids %v, want %v", i, id, got, want)
		}
	}
}

// verify opens the sink without Prepare: a ledger an older release made
// has no topic_id column until a run of this release opens it. Its rows
// record no id: nothing to check, not an error. Before, verify failed
// there on the missing column, where the release before passed.
func TestTopicIDsOfALedgerWithoutTheColumn(t *testing.T) {
	srv := oldLedger(t)
	s := open(t, srv, "")
	got, err := s.TopicIDs(context.Background(), []sink.TopicPartition{{Topic: "traces", Partition: 0}})
	if err != nil {
		t.Fatalf("topic ids of a ledger an older release made: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("topic ids %v of a ledger without them, want none", got)
	}
}

// oldLedger is a Databend holding the ledger as a release before topic_id
// made it.
func oldLedger(t *testing.T) *databendtest.Server {
	t.Helper()
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("trace_raw_ledger", []string{"topic", "partition", "first_offset", "last_offset", "records", "dlq_records", "load_id", "files", "loaded_at"},
		[]string{"VARCHAR", "INT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "VARCHAR", "INT", "TIMESTAMP"})
	return srv
}
