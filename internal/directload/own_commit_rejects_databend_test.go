package directload

import (
	"context"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/otel"
)

// A Databend load that dead-lettered a row the table refused (OTLP's
// partial success: the client is told, and does not send it again) and
// whose COMMIT landed with its reply lost is found committed by a later
// attempt, or asked of the ledger after the last one. Its requests are
// answered as stored, and still owe their clients the rows the committed
// attempt rejected: answered a full success, the client believes the
// refused span is in the table, where it is only in the dead letters.
func TestDatabendLostCommitReplyStillTellsTheRejectedRows(t *testing.T) {
	for _, c := range []struct {
		name string
		// fault is told of each attempt (1-based) before it runs.
		fault func(n int, lose, fail func())
	}{
		{"found by the next attempt", func(n int, lose, _ func()) {
			if n == 1 {
				lose()
			}
		}},
		{"asked after the last attempt", func(n int, lose, fail func()) {
			if n < LoadAttempts {
				fail()
			} else if n == LoadAttempts {
				lose()
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, s := databendSpans(t, false)
			srv.Set(func() { srv.Reject = refuseSpansNamedRefused })
			lose, fail := commitFaults(srv)
			sk := &countingSink{Sink: s, beforeLoad: func(n int) { c.fault(n, lose, fail) }}
			dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
			if err != nil {
				t.Fatal(err)
			}
			l, err := Start(context.Background(), Options{Sink: sk, Decoder: dec, Signal: otel.SignalTraces,
				MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			st, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", traceRequest(t, "ok", "refused", "ok"))
			if err != nil {
				t.Fatalf("a request whose load committed (its reply lost) was answered %v", err)
			}
			if n := sk.loads.Load(); n < 2 {
				t.Fatalf("%d attempts: the reply was not lost", n)
			}
			if n, d := len(srv.Rows("otel_spans")), len(srv.Rows("otel_spans_dlq")); n != 2 || d != 1 {
				t.Fatalf("%d spans and %d dead letters, want 2 and 1", n, d)
			}
			if st.Rejected != 1 || st.All || st.Reason == "" {
				t.Errorf("the request was told %+v; want 1 span rejected, with Databend's reason (the refused span is a dead letter)", st)
			}
		})
	}
}
