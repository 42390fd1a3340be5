package directload

import (
	"context"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/otlp/otlptest"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// BenchmarkReceiverLoad is OTLP/HTTP protobuf into DuckDB in load mode,
// end to end (http: 4 clients post requests of 50 agent traces, ~250
// GenAI spans, as an SDK's batch exporter sends, to the receiver, which
// decodes them, writes spans and genai_operations and answers after the
// load), beside its yardstick in the same run (sink: the DuckDB sink
// alone staging and loading the same rows, 4 requests a load, decoding
// not counted). CPU is the whole process's: the clients, the receiver,
// DuckDB.
func BenchmarkReceiverLoad(b *testing.B) {
	bodies, spans := otlptest.TraceRequests(b, 40, 50)
	b.Run("sink", func(b *testing.B) {
		s, dec := benchSink(b)
		var cpu time.Duration
		var took time.Duration
		next := int64(0)
		for range b.N {
			for i := 0; i < len(bodies); i += 4 {
				bt := &sink.Batch{ID: sink.NewBatchID()}
				rg := sink.Range{TopicPartition: sink.TopicPartition{Topic: "otlp:traces"}, First: next}
				for _, body := range bodies[i:min(i+4, len(bodies))] {
					n, err := dec.AppendRows(bt, &kgo.Record{Topic: rg.Topic, Offset: next, Value: body, Timestamp: time.Now()})
					if err != nil {
						b.Fatal(err)
					}
					rg.Records += int64(n)
					rg.Last = next
					next++
				}
				bt.Ranges = []sink.Range{rg}
				start, c := time.Now(), rusageCPU()
				f, err := s.Stage(context.Background(), bt)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Load(context.Background(), []sink.File{f}); err != nil {
					b.Fatal(err)
				}
				cpu += rusageCPU() - c
				took += time.Since(start)
			}
		}
		report(b, spans, took, cpu)
	})
	b.Run("http", func(b *testing.B) {
		s, dec := benchSink(b)
		l, err := Start(context.Background(), Options{Sink: s, Decoder: dec, Signal: otel.SignalTraces,
			MaxLoadBytes: 64 << 20, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		r, err := otlp.Start(otlp.Options{HTTP: "127.0.0.1:0", MaxBodyBytes: 8 << 20, MaxInflightBytes: 256 << 20,
			DefaultTenant: "default", Forward: l, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer r.Shutdown(context.Background())
		url := "http://" + r.Addr["http"] + "/v1/traces"
		b.ResetTimer()
		start, cpu := time.Now(), rusageCPU()
		for range b.N {
			otlptest.PostAll(b, url, bodies, 4)
		}
		report(b, spans, time.Since(start), rusageCPU()-cpu)
	})
}

// benchSink is a prepared DuckDB sink of otel_spans and genai_operations
// in a fresh file, and the decoder of both.
func benchSink(b *testing.B) (*duckdb.Sink, *otel.Decoder) {
	dir := b.TempDir()
	s, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "b.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: "otel_spans", Typed: &otel.Spans, Derived: &genai.Table, DerivedTable: "genai_operations",
		MemoryLimit: 256 << 20, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: TenantHeader, Default: "default"})
	if err != nil {
		b.Fatal(err)
	}
	return s, dec.WithGenAI(genai.NewMapper(prices.Embedded(), false))
}

func report(b *testing.B, spans int, took, cpu time.Duration) {
	b.ReportMetric(float64(b.N*spans)/took.Seconds(), "spans/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*spans), "cpu-µs/span")
}

func rusageCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
