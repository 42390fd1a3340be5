package duckdb

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// otlpMessages are OTLP agent traces (2-8 GenAI spans each) marshaled as
// the Collector's Kafka exporter writes them, for batchesPerLoad*loadsPerOp
// batches of messagesPerBatch messages.
const messagesPerBatch = 400

func otlpMessages(b *testing.B) (msgs []*kgo.Record, spans int) {
	g := tracegen.New(1)
	for i := range loadsPerOp * batchesPerLoad * messagesPerBatch {
		td := g.OTLPTrace()
		v, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			b.Fatal(err)
		}
		spans += td.SpanCount()
		msgs = append(msgs, &kgo.Record{Topic: "t", Offset: int64(i), Value: v})
	}
	return msgs, spans
}

// decodeBatches decodes msgs into batches of otel_spans rows, as the
// batcher does (which starts each batch with room for the last one's rows
// and derived rows). With reuse, as the pipeline's workers do for this sink
// (sink.RowsReleaser), each batch is written into the buffers of the one
// before it, which is then no longer valid: for measuring the decode alone.
func decodeBatches(b *testing.B, d *otel.Decoder, msgs []*kgo.Record, reuse bool) []*sink.Batch {
	var out []*sink.Batch
	var rows, derived []byte
	for i := 0; i < len(msgs); i += messagesPerBatch {
		if !reuse || rows == nil {
			rows, derived = make([]byte, 0, len(rows)+len(rows)/8), make([]byte, 0, len(derived)+len(derived)/8)
		}
		bt := &sink.Batch{Rows: rows[:0], Derived: derived[:0]}
		var n int
		for _, r := range msgs[i : i+messagesPerBatch] {
			k, err := d.AppendRows(bt, r)
			if err != nil {
				b.Fatal(err)
			}
			n += k
		}
		rows, derived = bt.Rows, bt.Derived
		bt.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: int64(i), Last: int64(i + messagesPerBatch - 1), Records: int64(n)}}
		out = append(out, bt)
	}
	return out
}

// BenchmarkOTLPSpans measures, per span, decoding and flattening OTLP
// protobuf messages into otel_spans rows (decode) beside the DuckDB sink's
// own staging and loading of those rows (load), in the same run: the OTel
// issue's target is decode ≤ 25% of load. The +genai pair also reads each
// span's GenAI operation, priced, into genai_operations and loads it with
// its span.
func BenchmarkOTLPSpans(b *testing.B) {
	msgs, spans := otlpMessages(b)
	newDecoder := func() *otel.Decoder {
		d, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Default: "default"})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	ctx := context.Background()
	for _, c := range []struct {
		suffix string
		d      *otel.Decoder
		genai  bool
	}{{"", newDecoder(), false}, {"+genai", newDecoder().WithGenAI(genai.NewMapper(prices.Embedded(), false)), true}} {
		b.Run("decode"+c.suffix, func(b *testing.B) {
			cpuPerSpan(b, spans, nil, func() { decodeBatches(b, c.d, msgs, true) }, nil)
		})
		batches := decodeBatches(b, c.d, msgs, false)
		b.Run("load"+c.suffix, func(b *testing.B) {
			var s *Sink
			cpuPerSpan(b, spans, func() {
				b.StopTimer()
				opt := testOptions(b.TempDir())
				opt.Table, opt.Typed = "otel_spans", &otel.Spans
				if c.genai {
					opt.Derived, opt.DerivedTable = &genai.Table, "genai_operations"
				}
				s = openWith(b, opt)
				if err := s.Prepare(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}, func() {
				stageAndLoad(b, s, batches, batchesPerLoad)
			}, func() {
				b.StopTimer()
				if n := countRows(b, s); n != int64(spans) {
					b.Fatalf("%d rows loaded, want %d", n, spans)
				}
				s.Close()
				b.StartTimer()
			})
		})
	}
}

// cpuPerSpan runs measured b.N times, each after setup and before check
// (nil for none; they stop the timer themselves), and reports the
// process's CPU and the spans per second of the measured runs.
func cpuPerSpan(b *testing.B, spans int, setup, measured, check func()) {
	var cpu time.Duration
	for range b.N {
		if setup != nil {
			setup()
		}
		cpu -= processCPU()
		measured()
		cpu += processCPU()
		if check != nil {
			check()
		}
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N*spans), "cpu-µs/span")
	b.ReportMetric(float64(b.N*spans)/b.Elapsed().Seconds(), "spans/s")
}

func countRows(b *testing.B, s *Sink) int64 {
	var n int64
	if err := s.db.QueryRow(`SELECT count(*) FROM otel_spans`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
