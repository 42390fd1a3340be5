package directload

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A request whose rows go to the dead-letter table is answered stored,
// its items told rejected ("went to the dead-letter table"): the client
// never sends them again, so the dead letter must be there. COPY INTO the
// dead-letter table runs with ON_ERROR = CONTINUE like the others, so a
// dead letter Databend refuses (a column of the table changed, a value
// it cannot take) was dropped: the load committed without it, the ledger
// counting it as dead-lettered, and the request was answered stored.
func TestDatabendDeadLetterTheTableRefusesIsNotAnsweredStored(t *testing.T) {
	srv, s := databendSpans(t, false)
	srv.Set(func() {
		srv.Reject = func(table string, _ databendtest.Row) string {
			if table == "otel_spans_dlq" {
				return "the dead-letter table cannot take the row"
			}
			return ""
		}
	})
	l, err := Start(context.Background(), Options{Sink: s, Decoder: refusingDecoder{}, Signal: otel.SignalTraces,
		MaxLoadBytes: 64 << 20, RetryBase: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	bodies, _ := requestBodies(t, 1)
	st, err := l.Forward(context.Background(), otel.SignalTraces, "team-a", bodies[0])
	if dl := len(srv.Rows("otel_spans_dlq")); err == nil && dl == 0 {
		t.Errorf("the request was answered stored (%+v: its client never sends it again), yet otel_spans_dlq holds no dead letter; the ledger: %v",
			st, srv.Rows("otel_spans_ledger"))
	}
}
