package databend_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/sink"
)

// An administrator's SET GLOBAL max_result_rows (a setting of scope Both,
// settings/src/settings_default.rs; a protection against large results)
// makes databend-query add LIMIT max_result_rows to every query without
// a LIMIT (Planner::add_max_rows_limit, sql/src/planner/planner.rs). The
// ledger read (SELECT topic, "partition", max(last_offset) … GROUP BY) has
// no LIMIT, so with more partitions than max_result_rows it silently
// misses some: their files look unloaded and are copied again.
func TestHuntLedgerReadCutByMaxResultRowsDoublesRows(t *testing.T) {
	srv, former := prepared(t, "")
	ctx := context.Background()
	// A former owner loaded offsets 0..9 of partitions 0 and 1.
	if _, err := former.Load(ctx, stage(t, former, batch(0, 0, 9), batch(1, 0, 9))); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"max_result_rows": "1"} })
	// The new owner read both partitions again (its positions read is
	// cut the same way) and loads them.
	s := open(t, srv, "")
	next, err := s.Positions(ctx, []sink.TopicPartition{{Topic: "traces", Partition: 0}, {Topic: "traces", Partition: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 2 {
		t.Errorf("positions %v; want 10 for both partitions", next)
	}
	// Another process's staging: its own names (the pipeline's batch id).
	b0, b1 := batch(0, 0, 9), batch(1, 0, 9)
	b0.ID, b1.ID = "p2-1", "p2-2"
	loaded, err := s.Load(ctx, stage(t, s, b0, b1))
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 0 {
		t.Errorf("loaded %+v; want nothing (the ledger has both files)", loaded.Ranges)
	}
	for p := range 2 {
		if o := offsets(t, srv, p); !slices.Equal(o, seq(0, 9)) {
			t.Errorf("partition %d holds offsets %v; want 0..9 once", p, o)
		}
	}
}
