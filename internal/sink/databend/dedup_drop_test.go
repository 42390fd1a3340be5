package databend_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// `tracelake merge` answers that an OpenTelemetry table's dedup model is
// rebuilt by dropping it. The sink's Prepare at the next start (or at
// tracelake merge) created otel_spans_dedup again, but the model's
// watermarks, which describe the target dropped, were kept: the merge
// read only the rows loaded since, and every span merged before the drop
// was gone from the model for good.
func TestDedupTargetDroppedIsBuiltAgainFromEveryRow(t *testing.T) {
	ctx := context.Background()
	srv, d := mergedThenDropped(t)

	// The next start: the sink prepared again, a merger of its own.
	mg := startLoadAndMergeAfter(t, srv, d)
	// A start that finds the target leaves its watermarks: nothing twice.
	s := open(t, srv, "", spansOf(&otel.Spans))
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := merge.NewDatabendMerger(s, false).Dedup(ctx, d); err != nil {
		t.Fatal(err)
	}
	if c, err := mg.DedupCounts(ctx, d); err != nil || c != (merge.DedupCounts{Rows: 2, Identities: 2, Kept: 2}) {
		t.Errorf("counts %+v (%v), want 2 rows, 2 distinct, 2 kept, none pending", c, err)
	}
}

// A start that creates the dropped target anew and then stops before it
// forgets the model's watermarks (killed, or a statement after the
// CREATE failing: its Prepare fails and the next start prepares again)
// left the new target beside the old watermarks: the next start found
// the target and kept them, so the spans merged before the drop were
// gone from the model for good.
func TestDedupTargetCreatedButStoppedBeforeTheResetIsStillBuiltFromEveryRow(t *testing.T) {
	ctx := context.Background()
	srv, d := mergedThenDropped(t)

	// The next start stops right after the CREATE of the target: every
	// statement after it fails (its node lost, 503), as a process
	// killed there sends none.
	created := false
	srv.Set(func() {
		srv.QueryStatus = func(sql string) int {
			if created {
				return http.StatusServiceUnavailable
			}
			created = strings.HasPrefix(sql, "CREATE TABLE IF NOT EXISTS "+sqltext.Name(d.Target())+" ")
			return 0
		}
	})
	if err := open(t, srv, "", spansOf(&otel.Spans)).Prepare(ctx); err == nil {
		t.Fatal("Prepare succeeded through the injected failure")
	}
	srv.Set(func() { srv.QueryStatus = nil })

	// The start after it.
	startLoadAndMergeAfter(t, srv, d)
}

// mergedThenDropped loads and merges the span "before", then drops the
// dedup model's target, as a user rebuilding it does.
func mergedThenDropped(t *testing.T) (*databendtest.Server, merge.Dedup) {
	t.Helper()
	ctx := context.Background()
	srv, s, mg := dedupSpans(t)
	d := merge.Dedup{Table: &otel.Spans, Name: "otel_spans"}
	before := sinktest.SpansWithIDs(t, pcommon.TraceID{1}, pcommon.SpanID{1}, "before")
	if _, err := s.Load(ctx, stage(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, before))); err != nil {
		t.Fatal(err)
	}
	if _, err := mg.Dedup(ctx, d); err != nil {
		t.Fatal(err)
	}
	srv.DropTable(d.Target())
	return srv, d
}

// startLoadAndMergeAfter is the next start after mergedThenDropped: the
// sink prepared again, the span "after" loaded, a merge by a merger of
// its own, which must build the target from every row.
func startLoadAndMergeAfter(t *testing.T, srv *databendtest.Server, d merge.Dedup) *merge.DatabendMerger {
	t.Helper()
	ctx := context.Background()
	s := open(t, srv, "", spansOf(&otel.Spans))
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	mg := merge.NewDatabendMerger(s, false)
	after := sinktest.SpansWithIDs(t, pcommon.TraceID{1}, pcommon.SpanID{2}, "after")
	if _, err := s.Load(ctx, stage(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 1, after))); err != nil {
		t.Fatal(err)
	}
	if _, err := mg.Dedup(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := keptNames(srv); !slices.Equal(got, []string{"after", "before"}) {
		t.Errorf("otel_spans_dedup built again holds %v, want after and before", got)
	}
	return mg
}
