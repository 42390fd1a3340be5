package directload

import (
	"context"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// On Iceberg a load commits its tables one by one, the main table last
// (dead letters, genai_operations, then otel_spans). When the catalog
// fails the main table's commit after genai_operations committed, the
// request is answered with a retry (right: its span is not stored) and the
// sequence resumes past the positions genai_operations holds, abandoning
// them (directload resume, sink.TableByTableCommitter) — but the
// operation rows committed there stay. The client's retry stores the span
// once and its operation a second time: genai_operations holds two rows
// of one span (its cost counted twice in every report) where it must
// hold one (README, GenAI operations: one row per GenAI span, loaded
// exactly once with its span; "a load that did not commit leaves no gap").
func TestIcebergAbandonedPositionsLoseTheFailedLoadsDerivedRows(t *testing.T) {
	s, lock := openLockedSpans(t, t.TempDir(), "genai_operations", false, true)
	l := startGenAILoader(t, s)

	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("chat gpt-4o")
	sp.SetTraceID([16]byte{5, 5})
	sp.SetSpanID([8]byte{5, 5})
	sp.SetStartTimestamp(1700000000000000000)
	sp.SetEndTimestamp(1700000001000000000)
	sp.Attributes().PutStr("gen_ai.operation.name", "chat")
	sp.Attributes().PutStr("gen_ai.provider.name", "openai")
	sp.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = l.Forward(ctx, otel.SignalTraces, "team-a", body)
	lock.unlock()
	if err == nil || !lock.injected() {
		t.Fatalf("the main table's commit did not fail (answered %v): the fault was not injected", err)
	}
	t.Logf("first attempt answered: %v", err)
	if _, err := l.Forward(ctx, otel.SignalTraces, "team-a", body); err != nil { // the client's retry
		t.Fatal(err)
	}
	raw, _, tp := storedOf(t, s)
	spans := raw[tp].Count()
	ops := rowsOf(t, s)
	if spans != 1 || ops != 1 {
		t.Errorf("after the retry: %d spans and %d genai_operations rows of the one GenAI span, want 1 and 1", spans, ops)
	}
}

// rowsOf is the row count of genai_operations' current snapshot.
func rowsOf(t *testing.T, s *iceberg.Sink) int64 {
	t.Helper()
	tbl, err := s.Catalog().LoadTable(context.Background(), s.DerivedIdentifier())
	if err != nil {
		t.Fatal(err)
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil || snap.Summary == nil {
		return 0
	}
	n, err := strconv.ParseInt(snap.Summary.Properties["total-records"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
