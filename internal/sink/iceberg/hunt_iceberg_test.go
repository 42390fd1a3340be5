package iceberg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otel"
)

// The current day's partition takes loads all day: compaction leaves it
// alone until the day ended (TestCompactionLeavesTheCurrentDay, on the raw
// table). A span table is partitioned by tenant and day; its current day
// must be left alone the same way.
func TestHuntCompactionLeavesTheCurrentDayOfASpanTable(t *testing.T) {
	ctx := context.Background()
	s := openTyped(t, t.TempDir(), &otel.Spans)
	now := time.Now()
	for i := range int64(3) {
		load(t, s, otlpBatch(t, otel.SignalTraces, 0, i, spansRequest(t, now, byte(2*i+1), byte(2*i+2))))
	}
	done, err := s.Compact(ctx, 64<<20, now, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range done {
		if c.Groups != 0 || c.FilesBefore != 0 {
			t.Errorf("compaction %+v: today's partition (tenant team-a, day %s) was compacted before the day ended", c, now.UTC().Format(time.DateOnly))
		}
	}
	if ops, err := s.Operations(ctx); err != nil || slices.Contains(ops, "replace") {
		t.Errorf("snapshots %v (%v): the current day was rewritten", ops, err)
	}
}
