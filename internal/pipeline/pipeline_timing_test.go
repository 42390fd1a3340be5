package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tracegen"
)

const benchRecords = 1_000_000

var (
	benchOnce    sync.Once
	benchCluster *kfake.Cluster
	benchBytes   int64
)

// benchSetup fills one kfake cluster (4 partitions) with ~1 KB traces, shared
// by the benchmarks so their rates compare in one run.
func benchSetup(b *testing.B) *kfake.Cluster {
	benchOnce.Do(func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, topic))
		if err != nil {
			b.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		if err := tracegen.Produce(context.Background(), cl, topic, benchRecords, 1, nil); err != nil {
			b.Fatal(err)
		}
		g := tracegen.New(1)
		for range benchRecords {
			benchBytes += int64(len(g.Append(nil)))
		}
		benchCluster = c
	})
	return benchCluster
}

// BenchmarkBareConsume is the yardstick: a franz-go group consumer reading
// every record and doing nothing with it.
func BenchmarkBareConsume(b *testing.B) {
	c := benchSetup(b)
	start, cpu := time.Now(), processCPU()
	for i := 0; i < b.N; i++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
			// A new group each time: the framework runs b.N=1 before larger
			// b.N, and a group that committed offsets would read nothing.
			kgo.ConsumerGroup(fmt.Sprintf("bare-%d-%d", i, time.Now().UnixNano())), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for n < benchRecords {
			fs := cl.PollRecords(context.Background(), 10000)
			n += fs.NumRecords()
		}
		cl.Close()
	}
	reportBusy(b, busyTime{wall: time.Since(start), cpu: processCPU() - cpu})
}

// BenchmarkPipelineDuckDB is the whole path: kfake → 2 workers → NDJSON
// staging → DuckDB loads with ledger → offset commits, until idle. The
// idle wait (exit-when-idle) is subtracted.
func BenchmarkPipelineDuckDB(b *testing.B) {
	for _, v := range []struct {
		name, compression string                 // staging compression
		json              duckdb.JSONCompression // sink.duckdb.json_compression
	}{{"none", "none", duckdb.JSONAuto}, {"zstd", "zstd", duckdb.JSONAuto}, {"json=zstd", "none", duckdb.JSONZstd}, {"json=none", "none", duckdb.JSONNone}} {
		b.Run(v.name, func(b *testing.B) {
			c := benchSetup(b)
			var busy busyTime
			for i := 0; i < b.N; i++ {
				cfg := benchConfig(c, fmt.Sprintf("bench-%s-%d", v.compression, i))
				cfg.Load.Compression = v.compression
				cfg.Load.MaxInterval = config.Duration(time.Second)
				cfg.Sink.DuckDB.Path = filepath.Join(b.TempDir(), "bench.duckdb")
				s, err := duckdb.Open(duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
					Zstd: v.compression == "zstd", JSONCompression: v.json, BesidePipeline: true, Log: testLog(nil)})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Prepare(context.Background()); err != nil {
					b.Fatal(err)
				}
				benchUntilIdle(b, cfg, s, &busy)
				s.Close()
			}
			reportBusy(b, busy)
		})
	}
}

// benchConfig is the default config with 2 workers reading the
// benchmark's topic in a new group.
func benchConfig(c *kfake.Cluster, group string) *config.Config {
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	cfg.Kafka.Topics = []string{topic}
	cfg.Kafka.Group = fmt.Sprintf("%s-%d", group, time.Now().UnixNano())
	cfg.Workers = 2
	return cfg
}

// busyTime is what runs of the pipeline took: wall time with the idle wait
// subtracted, and the CPU time of the whole process (every thread: the
// pipeline, DuckDB's threads and the in-process broker serving the fetches).
type busyTime struct{ wall, cpu time.Duration }

// benchUntilIdle runs the pipeline over the benchmark's records until idle
// and adds the time it was busy to t.
func benchUntilIdle(b *testing.B, cfg *config.Config, s sink.Sink, t *busyTime) {
	b.Helper()
	idle := 200 * time.Millisecond
	stats := &pipeline.Stats{}
	start, cpu := time.Now(), processCPU()
	if err := pipeline.Run(context.Background(), context.Background(), cfg, s,
		pipeline.RunOptions{ExitWhenIdle: idle, Stats: stats, Log: testLog(nil)}); err != nil {
		b.Fatal(err)
	}
	t.wall += time.Since(start) - idle
	t.cpu += processCPU() - cpu
	if stats.Loaded.Load() != benchRecords {
		b.Fatalf("loaded %d, want %d", stats.Loaded.Load(), benchRecords)
	}
}

func reportBusy(b *testing.B, t busyTime) {
	secs := t.wall.Seconds()
	b.ReportMetric(float64(b.N*benchRecords)/secs, "records/s")
	b.ReportMetric(float64(int64(b.N)*benchBytes)/secs/1e6, "MB/s")
	b.ReportMetric(float64(t.cpu.Microseconds())/float64(b.N*benchRecords), "cpu-µs/record")
}

// processCPU is this process's CPU time so far (user and system, all
// threads).
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPipelineIceberg is the whole path into Iceberg with the default
// batch and commit settings: kfake → 2 workers → Parquet → commits to a
// SQLite catalog on local disk, until idle. It reports the raw table's
// data files and their size, its snapshots and the size of its metadata
// file after the 1M records.
func BenchmarkPipelineIceberg(b *testing.B) {
	c := benchSetup(b)
	var busy busyTime
	for i := 0; i < b.N; i++ {
		cfg := benchConfig(c, fmt.Sprintf("bench-iceberg-%d", i))
		cfg.Sink.Type = config.SinkIceberg
		dir := b.TempDir()
		s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
			Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: cfg.Sink.Table, Log: testLog(nil), GroupWait: 200 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Prepare(context.Background()); err != nil {
			b.Fatal(err)
		}
		benchUntilIdle(b, cfg, s, &busy)
		files, err := s.DataFiles(context.Background(), false)
		if err != nil {
			b.Fatal(err)
		}
		var size int64
		for _, f := range files {
			size += f.FileSizeBytes()
		}
		b.ReportMetric(float64(len(files)), "files")
		b.ReportMetric(float64(size)/1e6/float64(len(files)), "MB/file")
		// What every commit rewrites and every reader parses.
		raw, _ := s.Identifiers()
		tbl, err := s.Catalog().LoadTable(context.Background(), raw)
		if err != nil {
			b.Fatal(err)
		}
		info, err := os.Stat(strings.TrimPrefix(tbl.MetadataLocation(), "file://"))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(tbl.Metadata().Snapshots())), "snapshots")
		b.ReportMetric(float64(info.Size())/1e3, "metadata-kB")
		s.Close()
	}
	reportBusy(b, busy)
}
