package otel

import (
	"bytes"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/otlp/otlptest"
)

// benchJSONBody is one OTLP/JSON request of many agent traces, as pdata
// writes it (no null), about a megabyte.
func benchJSONBody(b *testing.B) []byte {
	bodies, _ := otlptest.TraceRequests(b, 1, 200)
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(bodies[0]); err != nil {
		b.Fatal(err)
	}
	js, err := req.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// BenchmarkPrepareJSON is PrepareJSON then pdata's reading of the request:
// the body as pdata writes it (no null: the fast path), and the same with
// a null parentSpanId in every span.
func BenchmarkPrepareJSON(b *testing.B) {
	body := benchJSONBody(b)
	withNulls := bytes.ReplaceAll(body, []byte(`"name":`), []byte(`"parentSpanId":null,"name":`))
	for _, c := range []struct {
		name string
		body []byte
	}{{"no-null", body}, {"nulls", withNulls}} {
		b.Run(c.name+"/prepare", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for range b.N {
				if _, err := PrepareJSON(SignalTraces, c.body); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/prepare+pdata", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for range b.N {
				p, err := PrepareJSON(SignalTraces, c.body)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Nesting as deep as a body may be (8 MiB of arrays), with a null.
	deep := []byte(strings.Repeat(`{"a":[`, 1<<20) + `null` + strings.Repeat(`]}`, 1<<20))
	b.Run("deep-8MiB", func(b *testing.B) {
		b.SetBytes(int64(len(deep)))
		for range b.N {
			if _, err := PrepareJSON(SignalTraces, deep); err != nil {
				b.Fatal(err)
			}
		}
	})
}
