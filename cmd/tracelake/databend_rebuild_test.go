package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// traceLoader loads agent traces (every span a GenAI operation) into a
// Databend sink as `tracelake run` does: one message per offset of
// partition 0, the spans and their operations in one load.
type traceLoader struct {
	t   *testing.T
	snk *databend.Sink
	dec *otel.Decoder
	gen *tracegen.Generator
}

func newTraceLoader(t *testing.T, snk *databend.Sink) *traceLoader {
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	return &traceLoader{t: t, snk: snk, dec: dec.WithGenAI(genai.NewMapper(prices.Embedded(), false)), gen: tracegen.New(7)}
}

// load loads offsets first..last of partition 0 of topic "traces" in one
// load; it reports a failure with t.Error (it runs inside server hooks).
func (l *traceLoader) load(first, last int64) {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: last}
	for o := first; o <= last; o++ {
		value, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(l.gen.OTLPTrace())
		if err != nil {
			l.t.Error(err)
			return
		}
		n, err := l.dec.AppendRows(b, &kgo.Record{Topic: "traces", Offset: o, Value: value})
		if err != nil {
			l.t.Error(err)
			return
		}
		r.Records += int64(n)
	}
	b.Ranges = []sink.Range{r}
	ctx := context.Background()
	f, err := l.snk.Stage(ctx, b)
	if err == nil {
		_, err = l.snk.Load(ctx, []sink.File{f})
	}
	if err != nil {
		l.t.Errorf("load offsets %d..%d: %v", first, last, err)
	}
}

// `merge --rebuild genai_operations` on Databend beside a running loader
// (nothing stops it: `run` may still be loading) must neither lose nor
// double an operation. The rebuild reads the spans first and replaces the
// operations later, in a transaction of its own; Databend's transaction
// reads no table as of its BEGIN (a read-only statement reads the latest
// snapshot, only a mutated table keeps a base: TxnBuffer in
// storages/common/session/src/transaction.rs), so a load that commits
// between the two (its spans unread) had its operations deleted with the
// rest and never derived again. A load committing inside the rebuild's
// transaction, after its DELETE, keeps its rows: databend-query commits the
// DELETE on top of the segments appended since it read the table
// (storages/fuse/src/retry/commit.rs, try_rebuild_req).
func TestGenAIRebuildOnDatabendKeepsTheOperationsOfLoadsBesideIt(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.Set(func() { srv.SQL = true }) // the dedup model's setup
	cfg, err := config.FromYAML(fmt.Appendf(nil, `kafka: {brokers: [localhost:9092], topics: [traces], format: otlp_proto}
sink: {type: databend, databend: {dsn: %q}}
`, srv.DSN("")))
	if err != nil {
		t.Fatal(err)
	}
	snk, err := openDatabend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := snk.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	l := newTraceLoader(t, snk)
	l.load(0, 4)
	// One load commits as the rebuild begins (after it read the ledger,
	// before the spans: their operations must not be derived again),
	// one after the rebuild read the spans, before it replaces the
	// operations, and one inside the rebuild's transaction, after its
	// DELETE.
	var afterLedger, afterRead, afterDelete sync.Once
	var loadedAfterLedger, loadedAfterRead, loadedAfterDelete bool
	srv.Set(func() {
		srv.After = func(sql string) {
			switch {
			case strings.HasPrefix(sql, `SELECT topic, "partition", max(last_offset) FROM "otel_spans_ledger" GROUP BY`):
				afterLedger.Do(func() { l.load(5, 7); loadedAfterLedger = true })
			case strings.HasPrefix(sql, "SELECT tenant_id, service_name, name, trace_id"):
				afterRead.Do(func() { l.load(8, 9); loadedAfterRead = true })
			case strings.HasPrefix(sql, `DELETE FROM "genai_operations"`):
				afterDelete.Do(func() { l.load(10, 14); loadedAfterDelete = true })
			}
		}
	})
	if _, err := rebuildGenAI(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	srv.Set(func() { srv.After = nil })
	if !loadedAfterLedger || !loadedAfterRead || !loadedAfterDelete {
		t.Fatalf("the loads beside the rebuild did not run (after the ledger read: %v, the spans read: %v, the DELETE: %v)",
			loadedAfterLedger, loadedAfterRead, loadedAfterDelete)
	}

	spans := map[string]bool{}
	for _, r := range srv.Rows("otel_spans") {
		spans[string(r["trace_id"])+string(r["span_id"])] = true
	}
	ops := map[string]int{}
	for _, r := range srv.Rows("genai_operations") {
		ops[string(r["trace_id"])+string(r["span_id"])]++
	}
	if len(spans) == 0 {
		t.Fatal("no spans loaded")
	}
	lost, doubled := 0, 0
	for id := range spans {
		switch n := ops[id]; {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	if lost > 0 || doubled > 0 || len(ops) != len(spans) {
		t.Errorf("after the rebuild, of %d spans %d have no operation and %d have it twice (%d operations of %d spans)",
			len(spans), lost, doubled, len(srv.Rows("genai_operations")), len(ops))
	}
}
