package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/verify"
)

// genaiSpansBatch decodes offsets first..last of topic partition 0,
// each a message of three GenAI spans, into otel_spans rows and their
// genai_operations rows.
func genaiSpansBatch(t *testing.T, cfg *config.Config, topic string, first, last int64) *sink.Batch {
	t.Helper()
	return spansBatch(t, cfg, topic, first, last, func(sp ptrace.Span) {
		sp.SetName("chat")
		sp.Attributes().PutStr("gen_ai.operation.name", "chat")
		sp.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	})
}

// spansBatch is genaiSpansBatch of the spans span sets the name and
// attributes of.
func spansBatch(t *testing.T, cfg *config.Config, topic string, first, last int64, span func(ptrace.Span)) *sink.Batch {
	t.Helper()
	table, err := prices.Load("")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := pipeline.OTLPDecoder(cfg, cfg.Kafka.Format, "", genai.NewMapper(table, false))
	if err != nil {
		t.Fatal(err)
	}
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		sp := ss.Spans().AppendEmpty()
		sp.SetTraceID([16]byte{1})
		sp.SetSpanID([8]byte{byte(i + 1)})
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
		span(sp)
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: topic}, First: first, Last: last}}}
	for o := first; o <= last; o++ {
		n, err := dec.AppendRows(b, &kgo.Record{Topic: topic, Offset: o, Value: body, Timestamp: start})
		if err != nil {
			t.Fatal(err)
		}
		b.Ranges[0].Records += int64(n)
	}
	return b
}

// preparedIceberg opens and prepares the Iceberg sink of cfg on a SQLite
// catalog and a warehouse in a temporary directory (set in cfg).
func preparedIceberg(t *testing.T, cfg *config.Config) *iceberg.Sink {
	t.Helper()
	dir := t.TempDir()
	cfg.Sink.Iceberg.Catalog, cfg.Sink.Iceberg.Warehouse = filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")
	ice, err := openIceberg(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ice.Close() })
	if err := ice.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ice
}

// loadedGenAIIceberg prepares an Iceberg sink of OTLP spans with their
// genai_operations and loads offsets 0-4 of topic (genaiSpansBatch): a
// Kafka topic, or an OTLP load-mode instance's own sequence.
func loadedGenAIIceberg(t *testing.T, topic string) (*config.Config, *iceberg.Sink) {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.Kafka.Topics, cfg.Kafka.Format = []string{"otlp"}, config.FormatOTLPProto
	cfg.Sink.Type, cfg.Sink.Table = config.SinkIceberg, "otel_spans"
	ice := preparedIceberg(t, cfg)
	f, err := ice.Stage(ctx, genaiSpansBatch(t, cfg, topic, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ice.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	return cfg, ice
}

// On Iceberg a load commits genai_operations before otel_spans, so for the
// length of a commit (or, after a crash between the two, until the
// restart's load) operations are stored whose spans are not yet: past the
// spans' positions. verify's check of genai_operations took them for
// operations without their span (and copied the spans first, the
// operations after: a load committing while the spans were copied made
// every one of its operations one) and failed a sound table. Only the
// operations below the spans' positions are checked now.
func TestIcebergOperationsAheadOfTheirSpansAreNotOrphans(t *testing.T) {
	ctx := context.Background()
	cfg, ice := loadedGenAIIceberg(t, "otlp")
	check := func() *verify.Report {
		t.Helper()
		rep := &verify.Report{OK: true}
		if err := checkIcebergDerived(ctx, cfg, ice, rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := check(); !rep.OK || rep.Derived.Rows != 15 {
		t.Fatalf("after a load: %q %+v", rep.Problems, rep.Derived)
	}
	// A load half-committed: its operations at offset 5, then its spans
	// with their position (on a Kafka partition the operations past the
	// spans' positions are a load still committing; on an OTLP load-mode
	// sequence verify waits for their spans, and a load that never
	// commits them is TestIcebergVerifyReportsOperationsWhoseSpansNeverCommit's).
	icebergtest.AppendCopy(t, ice.Catalog(), ice.DerivedIdentifier(), iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(4)), map[string]int64{"koffset": 5})
	main, _ := ice.Identifiers()
	icebergtest.AppendCopy(t, ice.Catalog(), main, iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(4)), map[string]int64{"koffset": 5})
	tbl, err := ice.Catalog().LoadTable(ctx, main)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(iceberggo.Properties{iceberg.PositionKeyPrefix + "otlp.0": "6"}); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := check(); !rep.OK {
		t.Errorf("operations of a load whose spans committed after them: %q %+v", rep.Problems, rep.Derived)
	}
	// Below the spans' position, an operation without its span is one.
	if tbl, err = ice.Catalog().LoadTable(ctx, main); err != nil {
		t.Fatal(err)
	}
	txn = tbl.NewTransaction()
	if err := txn.Delete(ctx, iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(2)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := check(); rep.OK || rep.Derived.Orphans != 3 || rep.Derived.Missing != 0 {
		t.Errorf("the spans of offset 2 deleted: %q %+v", rep.Problems, rep.Derived)
	}
	// And the other way: GenAI spans whose operations are gone (the
	// spans' attributes read as the mapper reads them).
	ops, err := ice.Catalog().LoadTable(ctx, ice.DerivedIdentifier())
	if err != nil {
		t.Fatal(err)
	}
	txn = ops.NewTransaction()
	if err := txn.Delete(ctx, iceberggo.EqualTo(iceberggo.Reference("koffset"), int64(3)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := check(); rep.OK || rep.Derived.Missing != 3 || !strings.Contains(strings.Join(rep.Problems, ";"), "otlp/0 offset 3 index 2") {
		t.Errorf("the operations of offset 3 deleted: %q %+v", rep.Problems, rep.Derived)
	}
}

// An operation row of a span the mapper makes no operation of fails
// verify on Iceberg too, where the mapper itself reads the spans' scanned
// attributes: here the Vercel AI SDK's model calls stored as the
// ai.embed around them (same attributes and usage, its operation id
// aside), whose operations count the usage twice.
func TestIcebergVerifyReportsOperationsOfSpansThatAreNone(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Kafka.Topics, cfg.Kafka.Format = []string{"otlp"}, config.FormatOTLPProto
	cfg.Sink.Type, cfg.Sink.Table = config.SinkIceberg, "otel_spans"
	ice := preparedIceberg(t, cfg)
	load := func(first, last int64, call string) {
		t.Helper()
		b := spansBatch(t, cfg, "otlp", first, last, func(sp ptrace.Span) {
			sp.SetName("ai.embed.doEmbed")
			sp.Attributes().PutStr("ai.operationId", "ai.embed.doEmbed")
			sp.Attributes().PutStr("ai.model.provider", "openai.embedding")
			sp.Attributes().PutStr("ai.model.id", "text-embedding-3-small")
			sp.Attributes().PutInt("ai.usage.tokens", 10)
		})
		// The spans as the call around: their operations stay.
		b.Rows = bytes.ReplaceAll(b.Rows, []byte("ai.embed.doEmbed"), []byte(call))
		f, err := ice.Stage(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ice.Load(ctx, []sink.File{f}); err != nil {
			t.Fatal(err)
		}
	}
	check := func() *verify.Report {
		t.Helper()
		rep := &verify.Report{OK: true}
		if err := checkIcebergDerived(ctx, cfg, ice, rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	load(0, 1, "ai.embed.doEmbed")
	if rep := check(); !rep.OK || rep.Derived.Rows != 6 {
		t.Fatalf("the model calls and their operations: %q %+v", rep.Problems, rep.Derived)
	}
	load(2, 2, "ai.embed")
	if rep := check(); rep.OK || rep.Derived.Unmarked != 3 || !slices.Contains(rep.Derived.UnmarkedAt, "otlp/0 offset 2 index 1") {
		t.Errorf("operations of the calls around: %q %+v", rep.Problems, rep.Derived)
	}
}
