package iceberg_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// The current day's partition takes loads all day: compaction leaves it
// alone until the day ended (TestCompactionLeavesTheCurrentDay, on the raw
// table). A span table is partitioned by tenant and day; its current day
// must be left alone the same way.
func TestCompactionLeavesTheCurrentDayOfASpanTable(t *testing.T) {
	ctx := context.Background()
	s := openTyped(t, t.TempDir(), &otel.Spans)
	now := time.Now()
	for i := range int64(3) {
		load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, i, spansRequest(t, now, byte(2*i+1), byte(2*i+2))))
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

// Rewriting the manifests clusters the entries by day partition, one
// manifest per day (manifests.go), so planning a scan of a day opens that
// day's manifests only. A span table (partitioned by tenant and day)
// loaded with each load spanning three days must end with manifests of
// one day each.
func TestRewriteManifestsClustersASpanTableByDay(t *testing.T) {
	ctx := context.Background()
	s := openTyped(t, t.TempDir(), &otel.Spans)
	days := []time.Time{time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC), time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)}
	for i := range int64(3) {
		var reqs [][]byte
		for j, d := range days {
			reqs = append(reqs, spansRequest(t, d, byte(10*i)+byte(j)+1))
		}
		load(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 3*i, reqs...))
	}
	if _, err := s.RewriteManifests(ctx); err != nil {
		t.Fatal(err)
	}
	per, err := s.ManifestDays(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range per {
		if n != 1 {
			t.Errorf("after rewriting the manifests, distinct days per manifest: %v; want one day per manifest", per)
			break
		}
	}
	// Clustered already, the next round's rewrite commits nothing (it
	// wrote the same manifests again in a snapshot of its own, racing the
	// loads every round).
	before, err := s.Operations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RewriteManifests(ctx); err != nil {
		t.Fatal(err)
	}
	if after, err := s.Operations(ctx); err != nil || len(after) != len(before) {
		t.Errorf("a rewrite of clustered manifests committed: snapshots %v, then %v (%v)", before, after, err)
	}
}
