package directload

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// Rows the table refuses are dead-lettered by the sink and each request is
// told how many of its own were (OTLP's partial success): requests sharing
// one load are told apart, and a request the decoder refuses whole is
// rejected whole.
func TestRejectedRowsAreToldToTheirRequests(t *testing.T) {
	srv, s := databendSpans(t, false)
	// The table refuses the spans named "refused" (as Databend refuses a
	// value its column cannot take).
	srv.Reject = refuseSpansNamedRefused
	sk := &countingSink{Sink: s}
	gate := make(chan struct{})
	sk.beforeLoad = func(n int) {
		if n == 1 {
			<-gate
		}
	}
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Start(context.Background(), Options{Sink: sk, Decoder: dec, Signal: otel.SignalTraces, MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	bodies := [][]byte{traceRequest(t, "ok"), traceRequest(t, "ok", "refused", "ok", "refused"),
		traceRequest(t, "ok", "ok"), []byte("not an export request"), traceRequest(t, "refused")}
	type answer struct {
		st  otlp.Stored
		err error
	}
	answers := make([]chan answer, len(bodies))
	for i, b := range bodies {
		answers[i] = make(chan answer, 1)
		go func() {
			st, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", b)
			answers[i] <- answer{st, err}
		}()
		if i == 0 { // the others wait behind the first load, sharing the second
			waitFor(t, func() bool { return sk.loads.Load() == 1 })
		} else {
			waitFor(t, func() bool { return l.Snapshot().Consumed == int64(i+1) })
		}
	}
	close(gate)
	want := []struct {
		rejected int
		all      bool
	}{{0, false}, {2, false}, {0, false}, {0, true}, {1, false}}
	for i, w := range want {
		a := <-answers[i]
		if a.err != nil {
			t.Fatalf("request %d: %v", i, a.err)
		}
		if a.st.Rejected != w.rejected || a.st.All != w.all {
			t.Errorf("request %d told %+v, want %d rejected (all: %v)", i, a.st, w.rejected, w.all)
		}
		if (w.rejected > 0) != strings.Contains(a.st.Reason, "unable to cast refused") || (w.all && a.st.Reason == "") {
			t.Errorf("request %d: reason %q", i, a.st.Reason)
		}
	}
	if n := sk.loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2", n)
	}
	if n, d := len(srv.Rows("otel_spans")), len(srv.Rows("otel_spans_dlq")); n != 5 || d != 4 {
		t.Errorf("%d spans and %d dead letters, want 5 and 4 (three refused spans, one request)", n, d)
	}
}

// traceRequest is an export request in protobuf holding a span of each
// name.
func traceRequest(t *testing.T, names ...string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty()
	for i, n := range names {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(n)
		sp.SetTraceID([16]byte{1, byte(len(names)), byte(i)})
		sp.SetSpanID([8]byte{2, byte(i)})
	}
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// What a load-mode run dead-letters shows in tracelake_dlq_records_total by
// reason, as a Kafka run's does (README's metrics table; the alert of
// docs/OPERATIONS.md watches it): a request the decoder refuses is one
// undecodable record, each row the table refuses one rejected_by_database.
// The loader's totals (the run's closing line) count the refused rows as
// dead letters, not as rows of the table.
func TestLoadModeDeadLettersAreCounted(t *testing.T) {
	srv, s := databendSpans(t, false)
	srv.Reject = refuseSpansNamedRefused
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	m := obs.New()
	l, err := Start(context.Background(), Options{Sink: s, Decoder: dec, Signal: otel.SignalTraces, MaxLoadBytes: 64 << 20,
		RetryBase: time.Millisecond, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{traceRequest(t, "ok", "refused", "ok"), []byte("not an export request"), traceRequest(t, "refused")} {
		if _, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", b); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	rows, dlq := len(srv.Rows("otel_spans")), len(srv.Rows("otel_spans_dlq"))
	if rows != 2 || dlq != 3 {
		t.Fatalf("%d spans and %d dead letters stored, want 2 and 3", rows, dlq)
	}
	if n := testutil.ToFloat64(m.DLQRecords.WithLabelValues(envelope.KindRejected)); n != 2 {
		t.Errorf("tracelake_dlq_records_total{reason=%q} = %v, want 2", envelope.KindRejected, n)
	}
	if n := testutil.ToFloat64(m.DLQRecords.WithLabelValues(envelope.KindUndecodable)); n != 1 {
		t.Errorf("tracelake_dlq_records_total{reason=%q} = %v, want 1", envelope.KindUndecodable, n)
	}
	if tot := l.Totals(); tot.Rows != int64(rows) || tot.DLQ != int64(dlq) {
		t.Errorf("totals: %d rows and %d dead letters, want the %d and %d stored", tot.Rows, tot.DLQ, rows, dlq)
	}
}

// refuseSpansNamedRefused is a Databend test server's Reject refusing the
// spans named "refused", as Databend refuses a value its column cannot take.
func refuseSpansNamedRefused(table string, r databendtest.Row) string {
	var name string
	_ = json.Unmarshal(r["name"], &name)
	if table == "otel_spans" && name == "refused" {
		return "unable to cast refused"
	}
	return ""
}
