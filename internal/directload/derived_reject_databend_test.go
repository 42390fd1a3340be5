package directload

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A GenAI span whose genai_operations row Databend refuses (the sink
// dead-letters the operation, its span loads: TestDerivedRowsAreFencedAnd
// RejectsDeadLettered) is committed with its request. The request must be
// answered as stored: it is in the table, and an answer telling the client
// to retry (503 / Unavailable) makes it send the request again, a second
// copy of every span, whose operation is refused again, answered 503
// again... (README "otlp.mode: load": each request is answered only after
// the load holding its rows committed; a retryable error is for a request
// not stored.)
func TestDatabendRejectedGenAIOperationAnswersItsRequestStored(t *testing.T) {
	srv, s := databendSpans(t, true)
	// Databend refuses every operation row (as it refuses a value its
	// column cannot take).
	srv.Reject = func(table string, r databendtest.Row) string {
		if table == "genai_operations" {
			return "unable to cast the operation"
		}
		return ""
	}
	l := startGenAILoader(t, s)

	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	for i, name := range []string{"chat", "plain"} {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(name)
		sp.SetTraceID([16]byte{9, byte(i + 1)})
		sp.SetSpanID([8]byte{9, byte(i + 1)})
		if name == "chat" {
			sp.Attributes().PutStr("gen_ai.operation.name", "chat")
			sp.Attributes().PutStr("gen_ai.provider.name", "openai")
			sp.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
		}
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", body)
	spans := len(srv.Rows("otel_spans"))
	var names []string
	for _, r := range srv.Rows("otel_spans") {
		var n string
		_ = json.Unmarshal(r["name"], &n)
		names = append(names, n)
	}
	if err != nil {
		t.Errorf("the request was answered %q (its client retries it), yet its load committed: otel_spans holds %d spans %v, the operation is in genai_operations_dlq (%d)",
			err, spans, names, len(srv.Rows("genai_operations_dlq"))+len(srv.Rows("otel_spans_dlq")))
	}
	if st.Rejected != 0 || st.All {
		t.Errorf("told %+v: both spans are stored", st)
	}
	if spans != 2 {
		t.Errorf("%d spans stored, want 2", spans)
	}
}

// startGenAILoader starts a traces loader into s whose decoder also makes
// GenAI operations; it is closed with the test.
func startGenAILoader(t *testing.T, s sink.Sink) *Loader {
	t.Helper()
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	dec = dec.WithGenAI(genai.NewMapper(nil, false))
	l, err := Start(context.Background(), Options{Sink: s, Decoder: dec, Signal: otel.SignalTraces, MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// databendSpans is a test Databend server and a prepared sink of
// otel_spans on it, with genai_operations derived when genAI; closed with
// the test.
func databendSpans(t *testing.T, genAI bool) (*databendtest.Server, *databend.Sink) {
	t.Helper()
	srv := databendtest.New("tl", "pw")
	t.Cleanup(srv.Close)
	opt := databend.Options{DSN: srv.DSN(""), Table: "otel_spans", Typed: &otel.Spans,
		Stage: "~", Prefix: "tracelake/otel_spans/", Purge: true, Uploads: 1, Timeout: 10 * time.Second}
	if genAI {
		opt.Derived, opt.DerivedTable = &genai.Table, "genai_operations"
	}
	s, err := databend.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return srv, s
}
