// Package otlptest makes OTLP load for the receivers' benchmarks: export
// requests as an SDK's batch exporter sends them, posted by concurrent
// clients.
package otlptest

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// TraceRequests returns n protobuf export requests of perRequest agent
// traces each (tracegen, seed 1) and the spans they hold.
func TraceRequests(tb testing.TB, n, perRequest int) (bodies [][]byte, spans int) {
	tb.Helper()
	g := tracegen.New(1)
	for range n {
		td := ptrace.NewTraces()
		for range perRequest {
			g.OTLPTrace().ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
		spans += td.SpanCount()
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			tb.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	return bodies, spans
}

// PostAll posts bodies as OTLP/HTTP protobuf to url from clients
// concurrent clients, each taking every clients-th body, and fails tb on
// any answer but 200.
func PostAll(tb testing.TB, url string, bodies [][]byte, clients int) {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; i < len(bodies); i += clients {
				resp, err := http.Post(url, "application/x-protobuf", bytes.NewReader(bodies[i]))
				if err != nil {
					tb.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					tb.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
}
