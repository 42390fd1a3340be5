package iceberg_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// A new release starts (its Prepare adds a declared column by schema
// evolution) and loads rows with the column into a day partition while a
// process of the release before compacts that day: the compaction, read
// under the old schema, loses its commit race to the load, is checked
// again and lands; then each release compacts the day's mixed files (the
// old one's of the old schema, the new one's with the column). Every row
// is there once, the new rows with their value, the older ones null: a
// compaction writing the schema it was read or declared with instead of
// the table's would lose the column's values, one replayed over the load
// would lose or double its rows.
func TestCompactionRacedBySchemaEvolutionAndALoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := openTyped(t, dir, sinktest.OlderSpans())
	for o := range int64(5) {
		load(t, old, sinktest.SpanBatch(o, o, false))
	}
	var upgraded *iceberg.Sink
	old.SetBeforeMaintenanceCommit(func() {
		if upgraded != nil {
			return
		}
		upgraded = openTyped(t, dir, &otel.Spans)
		load(t, upgraded, sinktest.SpanBatch(5, 9, true))
	})
	c, err := old.Compact(ctx, 64<<20, everyDay, false)
	if err != nil {
		t.Fatal(err)
	}
	if upgraded == nil || c[0].FilesBefore != 5 || c[0].FilesAfter != 1 {
		t.Fatalf("compaction %+v (upgraded in its commit: %v): want the old release's 5 files in 1", c, upgraded != nil)
	}
	old.SetBeforeMaintenanceCommit(nil)

	want := wantNanos(0, 9, 5)
	check := func(when string, files int) {
		t.Helper()
		if got := nanosByOffset(t, upgraded, "otel_spans"); !slices.Equal(got, want) {
			t.Errorf("%s: offset %s:\n%v\nwant\n%v", when, sinktest.NewColumn, got, want)
		}
		if df, err := upgraded.DataFiles(ctx, false); err != nil || len(df) != files {
			t.Errorf("%s: %d data files (%v), want %d", when, len(df), err, files)
		}
	}
	check("after the raced compaction", 2)
	// The old release, still running, compacts the mixed files: it
	// declares no such column, the table has it.
	load(t, upgraded, sinktest.SpanBatch(10, 10, true))
	want = wantNanos(0, 10, 5)
	if _, err := old.Compact(ctx, 64<<20, everyDay, false); err != nil {
		t.Fatal(err)
	}
	check("after the old release compacted the mixed files", 1)
	load(t, old, sinktest.SpanBatch(11, 11, false))
	want = append(wantNanos(0, 10, 5), wantNanos(11, 11, 12)...)
	slices.Sort(want)
	if _, err := upgraded.Compact(ctx, 64<<20, everyDay, false); err != nil {
		t.Fatal(err)
	}
	check("after the new release compacted them", 1)
}
