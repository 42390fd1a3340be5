package merge

import (
	"context"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
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

// TestDedupOfALogRecordRetriedAcrossTheUpgrade: a log record loaded by
// the release before time_unix_nano (the column null in its row, and
// merged with that release's key) and loaded again after (a client's
// retry, Kafka's redelivery) is one record: otel_logs_dedup must keep it
// once, whether the first copy was merged before the upgrade or after.
func TestDedupOfALogRecordRetriedAcrossTheUpgrade(t *testing.T) {
	// That release had neither exact time column.
	older := otel.Logs
	older.Columns = slices.DeleteFunc(slices.Clone(older.Columns), func(c schema.Column) bool {
		return c.Name == "time_unix_nano" || c.Name == "observed_time_unix_nano"
	})
	if len(older.Columns) != len(otel.Logs.Columns)-2 {
		t.Fatal("otel_logs has no time_unix_nano or observed_time_unix_nano column")
	}
	msg := func() []byte {
		ld := plog.NewLogs()
		r := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		r.SetTimestamp(pcommon.Timestamp(1_796_040_000_000_000_123)) // not a whole microsecond
		r.Body().SetStr("tool timed out")
		v, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, mergedBefore := range []bool{true, false} {
		l := newOTelLoader(t, otel.SignalLogs)
		mg := NewMerger(l.s.DB(), slog.New(slog.DiscardHandler))
		l.load(msg())
		// The older release wrote no time_unix_nano.
		if _, err := l.s.DB().Exec(`UPDATE otel_logs SET time_unix_nano = NULL, observed_time_unix_nano = NULL`); err != nil {
			t.Fatal(err)
		}
		if mergedBefore {
			if _, err := mg.Dedup(context.Background(), Dedup{Table: &older, Name: "otel_logs"}); err != nil {
				t.Fatal(err)
			}
		}
		l.load(msg())
		if _, err := mg.Dedup(context.Background(), Dedup{Table: &otel.Logs, Name: "otel_logs"}); err != nil {
			t.Fatal(err)
		}
		if n := l.count(`SELECT count(*) FROM otel_logs_dedup`); n != 1 {
			t.Errorf("merged before the upgrade %v: otel_logs_dedup keeps %d copies of the record, want 1", mergedBefore, n)
		}
	}
}
