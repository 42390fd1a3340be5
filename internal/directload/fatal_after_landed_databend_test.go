package directload

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// A load whose first attempt's COMMIT landed with its reply lost, and
// whose next attempt then failed with an error no retry mends
// (sink.ErrFatal: here Databend answering that COMMIT with an internal
// error, code 1001, which is not one of the codes retried), is stored:
// the ledger, still answering, holds its positions under the load's own
// identity. README "otlp.mode: load" has the ledger asked before such a
// load's requests are answered, and only a commit that lands after the
// question, or that cannot be asked, answered 503; the fatal error
// skipped the question, so the requests were answered 503 (their
// clients sending them again: every span stored twice) although the
// ledger could tell they were stored.
func TestDatabendLandedLoadIsAnsweredStoredWhenItsRetryFailsFatally(t *testing.T) {
	srv, s := databendSpans(t, true)
	var commits atomic.Int32
	srv.Set(func() {
		srv.DropReply = func(sql string) bool {
			return strings.HasPrefix(sql, "COMMIT") && commits.Add(1) == 1 // the first attempt's lands, its reply lost
		}
		srv.CommitError = func() int {
			if commits.Load() >= 1 {
				return 1001 // the next attempt's: Internal, not retried
			}
			return 0
		}
	})
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	fatal := make(chan error, 1)
	l, err := Start(context.Background(), Options{Sink: s, Decoder: dec.WithGenAI(genai.NewMapper(nil, false)), Signal: otel.SignalTraces,
		MaxLoadBytes: 64 << 20, RetryBase: time.Millisecond, Fatal: func(err error) {
			select {
			case fatal <- err:
			default: // the first is the one looked at
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	bodies, spans := requestBodies(t, 1)
	err = forward(l, bodies[0])
	if n := len(srv.Rows("otel_spans")); n != spans {
		t.Fatalf("%d spans stored, want the %d of the first attempt's commit", n, spans)
	}
	if err != nil {
		t.Errorf("the request was answered %q (fatal: %v), its client sending it again, yet its %d spans are stored (its load's own ledger range: %v)",
			err, errors.Is(err, sink.ErrFatal), spans, srv.Rows("otel_spans_ledger"))
	}
	// Stored or not, the sink said it cannot go on: the run stops, and
	// the next start resumes from the ledger.
	select {
	case err := <-fatal:
		if !errors.Is(err, sink.ErrFatal) {
			t.Errorf("the run was told to stop with %v, want the sink's fatal error", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the run was not told to stop after the sink's fatal error")
	}
}
