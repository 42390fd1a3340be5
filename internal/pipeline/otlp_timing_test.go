package pipeline_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tracegen"
)

const otlpMessages = 40_000 // agent traces of 2-8 spans: ~200,000 spans

var (
	otlpOnce    sync.Once
	otlpCluster *kfake.Cluster
	otlpSpans   int
)

// otlpSetup fills one kfake cluster (4 partitions) with OTLP protobuf
// messages as the Collector's Kafka exporter writes them.
func otlpSetup(b *testing.B) *kfake.Cluster {
	otlpOnce.Do(func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
		if err != nil {
			b.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if otlpSpans, err = tracegen.ProduceOTLP(context.Background(), cl, topic, "otlp_proto", otlpMessages, 1); err != nil {
			b.Fatal(err)
		}
		otlpCluster = c
	})
	return otlpCluster
}

// BenchmarkPipelineOTLP is OTLP from Kafka into otel_spans, whole path
// (kfake → 2 workers → decode → staging → loads → commits, until idle),
// into DuckDB and into Iceberg, beside its yardstick: a bare group consumer
// of the same messages (bare). Reported per span.
func BenchmarkPipelineOTLP(b *testing.B) {
	c := otlpSetup(b)
	report := func(b *testing.B, t busyTime) {
		b.ReportMetric(float64(b.N*otlpSpans)/t.wall.Seconds(), "spans/s")
		b.ReportMetric(float64(b.N*otlpMessages)/t.wall.Seconds(), "messages/s")
		b.ReportMetric(float64(t.cpu.Microseconds())/float64(b.N*otlpSpans), "cpu-µs/span")
	}
	b.Run("bare", func(b *testing.B) {
		var busy busyTime
		for i := range b.N {
			start, cpu := time.Now(), processCPU()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
				kgo.ConsumerGroup(fmt.Sprintf("bare-otlp-%d-%d", i, time.Now().UnixNano())), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				b.Fatal(err)
			}
			for n := 0; n < otlpMessages; {
				n += cl.PollRecords(context.Background(), 10000).NumRecords()
			}
			cl.Close()
			busy.wall += time.Since(start)
			busy.cpu += processCPU() - cpu
		}
		report(b, busy)
	})
	for _, sinkType := range []string{config.SinkDuckDB, config.SinkIceberg} {
		b.Run(sinkType, func(b *testing.B) {
			var busy busyTime
			for i := range b.N {
				cfg := benchConfig(c, fmt.Sprintf("bench-otlp-%s-%d", sinkType, i))
				cfg.Kafka.Format = config.FormatOTLPProto
				cfg.Sink.Type, cfg.Sink.Table = sinkType, otel.Spans.Name
				dir := b.TempDir()
				var s sink.Sink
				var err error
				if sinkType == config.SinkIceberg {
					s, err = iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
						Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: cfg.Sink.Table, Typed: &otel.Spans,
						Derived: &genai.Table, DerivedTable: cfg.GenAI.Table, Log: testLog(nil), GroupWait: 200 * time.Millisecond})
				} else {
					cfg.Sink.DuckDB.Path = filepath.Join(dir, "bench.duckdb")
					s, err = duckdb.Open(duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
						Typed: &otel.Spans, Derived: &genai.Table, DerivedTable: cfg.GenAI.Table, BesidePipeline: true, Log: testLog(nil)})
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Prepare(context.Background()); err != nil {
					b.Fatal(err)
				}
				idle := 200 * time.Millisecond
				stats := &pipeline.Stats{}
				start, cpu := time.Now(), processCPU()
				if err := pipeline.Run(context.Background(), context.Background(), cfg, s,
					pipeline.RunOptions{ExitWhenIdle: idle, Stats: stats, Log: testLog(nil)}); err != nil {
					b.Fatal(err)
				}
				busy.wall += time.Since(start) - idle
				busy.cpu += processCPU() - cpu
				if stats.Loaded.Load() != int64(otlpSpans) {
					b.Fatalf("loaded %d, want %d spans", stats.Loaded.Load(), otlpSpans)
				}
				s.Close()
			}
			report(b, busy)
		})
	}
}
