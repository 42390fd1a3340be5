package databend_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// dedupSpans is a sink of otel_spans with its dedup model, on a fake that
// executes the model's SQL, and the model's merger.
func dedupSpans(t *testing.T) (*databendtest.Server, *databend.Sink, *merge.DatabendMerger) {
	t.Helper()
	srv := databendtest.New("tl", "s3cret")
	srv.Set(func() { srv.SQL = true })
	t.Cleanup(srv.Close)
	s := open(t, srv, "", spansOf(&otel.Spans))
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv, s, merge.NewDatabendMerger(s, false)
}

// keptNames is the names of the spans in otel_spans_dedup, sorted.
func keptNames(srv *databendtest.Server) []string {
	var names []string
	for _, r := range srv.Rows("otel_spans_dedup") {
		var n string
		_ = json.Unmarshal(r["name"], &n)
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Spans without a span id (all zero in OTLP, stored null) have no
// identity: the key CONCAT_WS('/', tenant_id, trace_id, span_id) skipped
// the null, every such span of a trace had one key and the model kept
// one of them. They are keyed by their content, as log records are, and
// verify's identities count them so.
func TestDedupKeepsSpansWithoutSpanID(t *testing.T) {
	ctx := context.Background()
	srv, s, mg := dedupSpans(t)
	v := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "first", "second")
	if _, err := s.Load(ctx, stage(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, v, v))); err != nil { // the second: a client's retry
		t.Fatal(err)
	}
	d := merge.Dedup{Table: &otel.Spans, Name: "otel_spans"}
	if _, err := mg.Dedup(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := keptNames(srv); !slices.Equal(got, []string{"first", "second"}) {
		t.Errorf("otel_spans_dedup holds %v, want first and second once", got)
	}
	if c, err := mg.DedupCounts(ctx, d); err != nil || c != (merge.DedupCounts{Rows: 4, Identities: 2, Kept: 2}) {
		t.Errorf("counts %+v (%v), want 4 rows, 2 distinct, 2 kept", c, err)
	}
}

// A target merged by a release before content keys for spans holds a
// span without a span id under its ids joined, the null skipped. After
// the upgrade a copy of it (a client's retry) is still left out and a new
// such span of its trace is kept: the merge's UPDATE carries the old key
// over to the content key. A span with its ids keeps its key.
func TestDedupCarriesOverOldKeysOfSpansWithoutSpanID(t *testing.T) {
	ctx := context.Background()
	srv, s, mg := dedupSpans(t)
	first := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "first")
	withIDs := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{7}, "with ids")
	if _, err := s.Load(ctx, stage(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 0, first, withIDs))); err != nil {
		t.Fatal(err)
	}
	d := merge.Dedup{Table: &otel.Spans, Name: "otel_spans"}
	if _, err := mg.Dedup(ctx, d); err != nil {
		t.Fatal(err)
	}
	// The keys as the release before made them.
	if err := s.Exec(ctx, `UPDATE otel_spans_dedup SET dedup_key = CONCAT_WS('/', tenant_id, trace_id, span_id)`); err != nil {
		t.Fatal(err)
	}
	second := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "second")
	if _, err := s.Load(ctx, stage(t, s, sinktest.OTLPBatch(t, otel.SignalTraces, 0, 2, first, second, withIDs))); err != nil {
		t.Fatal(err)
	}
	if _, err := mg.Dedup(ctx, d); err != nil {
		t.Fatal(err)
	}
	if got := keptNames(srv); !slices.Equal(got, []string{"first", "second", "with ids"}) {
		t.Errorf("otel_spans_dedup holds %v, want first, second and with ids once", got)
	}
	for _, r := range srv.Rows("otel_spans_dedup") {
		var key, name string
		_ = json.Unmarshal(r["dedup_key"], &key)
		_ = json.Unmarshal(r["name"], &name)
		if want := "team-a/01020300000000000000000000000000"; name != "with ids" && key == want || name == "with ids" && key != want+"/0700000000000000" {
			t.Errorf("span %s kept under key %q", name, key)
		}
	}
	if c, err := mg.DedupCounts(ctx, d); err != nil || c != (merge.DedupCounts{Rows: 5, Identities: 3, Kept: 3}) {
		t.Errorf("counts %+v (%v), want 5 rows, 3 distinct, 3 kept", c, err)
	}
}
