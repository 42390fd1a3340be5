package pipeline_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/verify"
)

const topic = "llm-traces"

func newCluster(t *testing.T, partitions int32) *kfake.Cluster {
	return kafkatest.Cluster(t, partitions, topic)
}

func producer(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	return kafkatest.Client(t, c, append([]kgo.Opt{kgo.ProducerLinger(time.Millisecond)}, opts...)...)
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// produceNumbers produces {"i": from} … {"i": to-1} to topic.
func produceNumbers(t *testing.T, cl *kgo.Client, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		produce(t, cl, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
}

// testConfig is a config for c with short intervals and a DuckDB file in a
// temp directory.
func testConfig(t *testing.T, c *kfake.Cluster) *config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.Kafka.Brokers = c.ListenAddrs()
	cfg.Kafka.Topics = []string{topic}
	cfg.Kafka.Group = "test-group"
	cfg.Workers = 2
	cfg.Batch.MaxRecords = 5000
	cfg.Batch.MaxInterval = config.Duration(200 * time.Millisecond)
	cfg.Load.MaxFiles = 8
	cfg.Load.MaxInterval = config.Duration(200 * time.Millisecond)
	cfg.Sink.DuckDB.Path = filepath.Join(t.TempDir(), "test.duckdb")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func openSink(t *testing.T, cfg *config.Config) *duckdb.Sink {
	t.Helper()
	return openSinkWith(t, duckdb.Options{
		Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: cfg.Sink.Table,
		Transform: cfg.Mode == config.ModeTransform, Zstd: cfg.Load.Compression == "zstd", Log: testLog(t),
	})
}

// openSinkWith opens and prepares the DuckDB sink of opt, closed when
// the test ends.
func openSinkWith(t *testing.T, opt duckdb.Options) *duckdb.Sink {
	t.Helper()
	s, err := duckdb.Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func testLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(discard{}, nil))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// runUntilIdle runs the pipeline until everything produced is loaded and
// committed, failing the test after a minute.
func runUntilIdle(t *testing.T, cfg *config.Config, snk sink.Sink, stats *pipeline.Stats) {
	t.Helper()
	runIdleWithin(t, cfg, snk, stats, 2*time.Minute)
}

// runIdleWithin runs the pipeline until everything produced is loaded
// and committed, failing the test after limit.
func runIdleWithin(t *testing.T, cfg *config.Config, snk sink.Sink, stats *pipeline.Stats, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := pipeline.Run(ctx, context.Background(), cfg, snk, pipeline.RunOptions{
		ExitWhenIdle: 300 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats,
	})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("pipeline did not become idle within %v: a load is failing over and over, or the pipeline is stuck", limit)
	}
}

// verifyOK runs verify and fails the test on any gap, overlap or duplicate.
func verifyOK(t *testing.T, cfg *config.Config, s *duckdb.Sink) *verify.Report {
	t.Helper()
	rep := verifyReport(t, cfg, s)
	if !rep.OK {
		t.Fatalf("verify failed: %v", rep.Problems)
	}
	return rep
}

func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(fmt.Errorf("unexpected: %w", err))
	}
}

// verifyReport runs verify on the DuckDB sink against Kafka; as
// tracelake verify, an uncovered head is a gap with start_offset earliest
// and skipped on purpose with latest.
func verifyReport(t *testing.T, cfg *config.Config, s *duckdb.Sink) *verify.Report {
	t.Helper()
	tn := s.Tables()
	rep, err := verify.Run(context.Background(), verify.SQLQuerier{DB: s.DB()},
		verify.Tables{Main: tn.Main, DLQ: tn.DLQ, Ledger: tn.Ledger, Raw: cfg.Mode == config.ModeRaw, Topic: duckdb.TopicExpr}, watermarksOf(t, cfg),
		cfg.Kafka.StartOffset == "earliest")
	must(t, err)
	return rep
}

// watermarksOf asks Kafka for the watermarks of the partitions cfg consumes.
func watermarksOf(t *testing.T, cfg *config.Config) map[sink.TopicPartition]kafka.Watermarks {
	t.Helper()
	admin, err := kafka.NewAdmin(cfg.Kafka)
	must(t, err)
	defer admin.Close()
	marks, err := admin.ConsumedWatermarks(context.Background(), cfg.Kafka)
	must(t, err)
	return marks
}
