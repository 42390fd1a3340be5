package pipeline_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// BenchmarkCDCTables loads Debezium changes of 1,000 source tables from
// one topic of four partitions (TRACELAKE_BENCH_CDC_CHANGES of them,
// default 200,000; the scale is 2,000,000), routed to their
// changelog tables, beside the yardstick of the same records loaded into
// one raw table; then merges every table's model once (merge_round).
func BenchmarkCDCTables(b *testing.B) {
	const tables = 1000
	changes := 200_000
	if v := os.Getenv("TRACELAKE_BENCH_CDC_CHANGES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		changes = n
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	w := newCDCWorkload(tables, 1)
	var bytes int64
	recs := make([]*kgo.Record, 0, 10_000)
	for i := range changes {
		r := w.record(4)
		bytes += int64(len(r.Value))
		if recs = append(recs, r); len(recs) == cap(recs) || i == changes-1 {
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	cl.Close()
	run := func(b *testing.B, format string, routed bool) {
		for i := 0; i < b.N; i++ {
			cfg := benchConfig(c, fmt.Sprintf("cdc-%s-%d", format, i))
			cfg.Kafka.Format = format
			cfg.Sink.Table = "cdc"
			cfg.Sink.DuckDB.Path = filepath.Join(b.TempDir(), "bench.duckdb")
			s, err := duckdb.Open(duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
				Routed: routed, BesidePipeline: true, Log: testLog(nil)})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Prepare(context.Background()); err != nil {
				b.Fatal(err)
			}
			stats := &pipeline.Stats{}
			idle := 200 * time.Millisecond
			snk := &timedFinish{Sink: s}
			start := time.Now()
			if err := pipeline.Run(context.Background(), context.Background(), cfg, snk,
				pipeline.RunOptions{ExitWhenIdle: idle, Stats: stats, Log: testLog(nil)}); err != nil {
				b.Fatal(err)
			}
			secs := (time.Since(start) - idle).Seconds()
			// records/s: every change in its changelog table (or the raw
			// table), the run's final move of the landed changes included.
			b.ReportMetric(float64(changes)/secs, "records/s")
			b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
			if routed {
				// landed_records/s: the run without its final move (the
				// moves its loads made are in it); move_s: that move.
				b.ReportMetric(float64(changes)/(secs-snk.took.Seconds()), "landed_records/s")
				b.ReportMetric(snk.took.Seconds(), "move_s")
				var landed int64
				if err := s.DB().QueryRow(`SELECT count(*) FROM cdc` + duckdb.Landing).Scan(&landed); err != nil || landed != 0 {
					b.Fatalf("%d changes still landed after the run (%v)", landed, err)
				}
				dec, err := cdc.NewDecoder(cfg.CDCOptions())
				if err != nil {
					b.Fatal(err)
				}
				cm := merge.NewChangelogMerger(merge.NewMerger(s.DB(), slog.New(slog.DiscardHandler)), s, dec)
				start := time.Now()
				models, err := cm.Pending(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				for _, m := range models {
					if _, err := cm.Merge(context.Background(), m); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(time.Since(start).Seconds(), "merge_round_s")
				b.ReportMetric(float64(len(models)), "tables")
			}
			s.Close()
		}
	}
	b.Run("changelog_tables", func(b *testing.B) { run(b, config.FormatDebezium, true) })
	b.Run("yardstick_one_raw_table", func(b *testing.B) { run(b, config.FormatJSON, false) })
}

// timedFinish is a DuckDB sink whose Finish, the move of the changes
// still landed when a run ends (duckdb.Landing), is timed.
type timedFinish struct {
	*duckdb.Sink
	took time.Duration
}

func (f *timedFinish) Finish(ctx context.Context) error {
	start := time.Now()
	err := f.Sink.Finish(ctx)
	f.took = time.Since(start)
	return err
}
