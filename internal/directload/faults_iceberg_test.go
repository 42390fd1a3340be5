package directload

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/verify"
)

// Two processes load GenAI spans (otlp.instance 0 and 1) into one set of
// Iceberg tables behind the REST catalog, which fails commits (500, not
// landed) and loses replies of landed ones at random, while a third
// compacts the tables. Every request answered stored has each of its
// spans stored once, every one answered with a retry none, each stored
// span has its one GenAI operation, and verify finds nothing wrong.
// (Found: a load whose last attempt landed with its reply lost was
// answered 503, stored.)
func TestIcebergRandomCommitFaultsStoreWhatIsAnswered(t *testing.T) {
	dir := t.TempDir()
	open := func(catalog string) *iceberg.Sink {
		s, err := iceberg.Open(context.Background(), iceberg.Options{Table: otel.Spans.Name, Typed: &otel.Spans,
			Derived: &genai.Table, DerivedTable: "genai_operations", Catalog: catalog,
			Warehouse: filepath.Join(dir, "warehouse"), REST: iceberg.REST{Token: "token"}, Namespace: "tracelake"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	rest := icebergtest.StartREST(t, open(filepath.Join(dir, "catalog.db")).Catalog(), "token")
	a, b, maintainer := open(rest.URL), open(rest.URL), open(rest.URL)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(3, 2))
	compact := make(chan struct{}, 1) // a compaction round among the loads
	loading := true                   // faults come, and compact is open
	failed, lost := 0, 0              // faults set
	fault := func() {
		mu.Lock()
		defer mu.Unlock()
		if !loading {
			return
		}
		if rng.IntN(4) == 0 {
			select {
			case compact <- struct{}{}:
			default: // one is under way
			}
		}
		switch x := rng.IntN(10); {
		case x < 4:
			rest.FailCommits.Store(1)
			failed++
		case x < 8:
			rest.LoseCommitReplies.Store(int64(1 + rng.IntN(2)))
			lost++
		}
	}
	loaders := make([]*Loader, 2)
	for i, s := range []*iceberg.Sink{a, b} {
		if err := s.Prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
		loaders[i] = startGenAILoaderOf(t, faultyLoads{s, fault}, int32(i))
	}
	all, _ := requestBodies(t, 25)
	bodies, last := all[:24], all[24]
	answers := make([]error, len(bodies))
	compacted := make(chan struct{})
	go func() {
		defer close(compacted)
		for range compact {
			// Its commits meet the faults too: an error here is its own.
			_, _ = maintainer.Compact(context.Background(), 128<<20, time.Now().Add(1000*24*time.Hour), false)
		}
	}()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(bodies); i += 4 {
				l := loaders[i%2]
				if i%7 == 0 { // a dead letter in some loads
					_, _ = l.Forward(context.Background(), otel.SignalTraces, "team-a", []byte{0xff, 0xff, 0xff, 0xff})
				}
				_, answers[i] = l.Forward(context.Background(), otel.SignalTraces, "team-a", bodies[i])
			}
		})
	}
	wg.Wait()
	mu.Lock()
	loading = false
	close(compact)
	mu.Unlock()
	<-compacted
	rest.FailCommits.Store(0)
	rest.LoseCommitReplies.Store(0)
	for _, l := range loaders { // resumes past what a failed load left behind
		if _, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", last); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := a.Identifiers()
	spans, ops := spanIDsIn(t, a, raw), spanIDsIn(t, a, a.DerivedIdentifier())
	for i, body := range append(bodies, last) {
		want := 1
		switch {
		case i == len(bodies):
			want = 2 // sent to both loaders
		case answers[i] != nil:
			want = 0
		}
		for _, id := range spanIDsOf(t, body) {
			if spans[id] != want {
				t.Errorf("request %d (answered %v): span %s stored %d times, want %d", i, answers[i], id, spans[id], want)
			}
		}
	}
	for id, n := range ops {
		if n != spans[id] {
			t.Errorf("span %s: %d GenAI operations, %d spans", id, n, spans[id])
		}
	}
	{ // and verify finds no gap and no copy: abandoned positions are no gap
		ctx := context.Background()
		next, err := a.AllPositions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rawOffs, err := a.Stored(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		dlqOffs, err := a.Stored(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		ab, err := a.Abandoned(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep := verify.FromStored(nil, next, rawOffs, dlqOffs, ab, false, nil); !rep.OK {
			t.Errorf("verify: %v", rep.Problems)
		}
	}
	if failed == 0 || lost == 0 {
		t.Errorf("%d failed commits and %d lost replies set: the faults did not come as meant", failed, lost)
	}
}

// faultyLoads is an Iceberg sink whose loads each may meet a fault.
type faultyLoads struct {
	*iceberg.Sink
	fault func()
}

func (f faultyLoads) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	f.fault()
	return f.Sink.Load(ctx, files)
}

// startGenAILoaderOf is startGenAILoader of partition p.
func startGenAILoaderOf(t *testing.T, s sink.Sink, p int32) *Loader {
	t.Helper()
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Start(context.Background(), Options{Sink: s, Decoder: dec.WithGenAI(genai.NewMapper(nil, false)),
		Signal: otel.SignalTraces, Partition: p, MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// spanIDsIn counts the span ids of table id's current snapshot.
func spanIDsIn(t *testing.T, s *iceberg.Sink, id table.Identifier) map[string]int {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("span_id")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		ids := rec.Column(0).(*array.String)
		for i := range ids.Len() {
			out[ids.Value(i)]++
		}
		rec.Release()
	}
	return out
}

// spanIDsOf are the span ids of a request, as the tables hold them.
func spanIDsOf(t *testing.T, body []byte) []string {
	t.Helper()
	td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	rs := td.ResourceSpans()
	for r := range rs.Len() {
		ss := rs.At(r).ScopeSpans()
		for s := range ss.Len() {
			sp := ss.At(s).Spans()
			for k := range sp.Len() {
				out = append(out, sp.At(k).SpanID().String())
			}
		}
	}
	return out
}
