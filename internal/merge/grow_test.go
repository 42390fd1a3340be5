package merge

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// otel_spans_dedup made by a release before start_time_unix_nano lacks
// it; once the sink adds the column to otel_spans, the merge used to
// fail (its INSERT … SELECT * gave the target one column too many). Now
// the target gains the column: spans kept before read NULL in it, spans
// kept after their value.
func TestDedupTargetGainsTheSourcesNewColumns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	merge := func(typed *schema.Table, b *sink.Batch, check func(db *duckdb.Sink)) {
		t.Helper()
		s, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "o.duckdb"), StageDir: filepath.Join(dir, "stage"),
			Table: "otel_spans", Typed: typed, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		sinktest.StageLoad(t, s, b)
		res, err := NewMerger(s.DB(), slog.New(slog.DiscardHandler)).Dedup(ctx, Dedup{Table: typed, Name: "otel_spans"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Inserted != 5 {
			t.Errorf("merge: %v; want 5 spans inserted", res)
		}
		if check != nil {
			check(s)
		}
	}
	merge(sinktest.OlderSpans(), sinktest.SpanBatch(0, 4, false), nil)
	merge(&otel.Spans, sinktest.SpanBatch(5, 9, true), func(s *duckdb.Sink) {
		got := dump(t, s.DB(), `SELECT koffset, coalesce(start_time_unix_nano, -1) = CASE WHEN koffset < 5 THEN -1 ELSE 1700000000000000007 + koffset * 1000 END
			FROM otel_spans_dedup`)
		want := []string{"0|true", "1|true", "2|true", "3|true", "4|true", "5|true", "6|true", "7|true", "8|true", "9|true"}
		if !slices.Equal(got, want) {
			t.Errorf("otel_spans_dedup offset|start_time_unix_nano as expected:\n%v\nwant\n%v", got, want)
		}
		cols, err := duckdb.TableColumns(ctx, s.DB(), "otel_spans_dedup")
		if err != nil {
			t.Fatal(err)
		}
		if last := cols[len(cols)-1].Name; last != sinktest.NewColumn {
			t.Errorf("the target's last column is %s, want the one added", last)
		}
	})
}
