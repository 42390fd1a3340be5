package iceberg_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// A dedup merge whose commit answers an error behind a REST catalog,
// having landed (a gateway lost the reply) or not (the catalog failed
// before applying it): the merge fails, and the next one neither inserts the spans the landed
// commit did again nor leaves out those of the commit that did not land.
// Every span is in the dedup table once.
func TestDedupMergeAfterACommitOfUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rest := icebergtest.StartREST(t, openTyped(t, dir, &otel.Spans).Catalog(), "token")
	s, err := iceberg.Open(ctx, iceberg.Options{Catalog: rest.URL, REST: iceberg.REST{Token: "token"}, Namespace: "tracelake",
		Table: otel.Spans.Name, Typed: &otel.Spans, DedupTable: otel.Spans.Name + "_dedup"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	identity := []string{"tenant_id", "trace_id", "span_id"}
	var want []string
	merge := func(first, last int64, landed bool) {
		t.Helper()
		load(t, s, sinktest.SpanBatch(first, last, true))
		for o := first; o <= last; o++ {
			want = append(want, fmt.Sprintf("%d %d", o, sinktest.SpanNanos(o)))
		}
		slices.Sort(want)
		if landed {
			rest.LoseCommitReplies.Store(1)
		} else {
			rest.FailCommits.Store(1)
		}
		if _, err := s.Dedup(ctx, identity); err == nil {
			t.Fatalf("merge of %d-%d: no error, want its commit's failure", first, last)
		}
		// The counters go below 0 as commits pass them.
		if rest.LoseCommitReplies.Load() > 0 || rest.FailCommits.Load() > 0 {
			t.Fatalf("merge of %d-%d: a failure left, want its commit to have met it", first, last)
		}
		inserted := last - first + 1
		if landed {
			inserted = 0
		}
		if res, err := s.Dedup(ctx, identity); err != nil || res.Inserted != inserted {
			t.Fatalf("merge again after the commit of %d-%d (landed: %v): %+v, %v; want %d spans inserted", first, last, landed, res, err, inserted)
		}
		if got := nanosByOffset(t, s, otel.Spans.Name+"_dedup"); !slices.Equal(got, want) {
			t.Errorf("after the commit of %d-%d (landed: %v), the dedup table's offset %s:\n%v\nwant\n%v", first, last, landed, sinktest.NewColumn, got, want)
		}
	}
	merge(0, 4, true)
	merge(5, 9, false)
}
