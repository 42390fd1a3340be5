package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// outsideRecords is how many ~1 KB spans BenchmarkOutside ingests: the
// issue's 300,000 (enough that the start and the group join weigh ~1 µs a
// row, not more), or TRACELAKE_BENCH_RECORDS. A run of 300,000 fits in
// the default in-flight budget nearly whole; more shows the steady state,
// where staged files' memory is used again.
var outsideRecords = func() int {
	if n, err := strconv.Atoi(os.Getenv("TRACELAKE_BENCH_RECORDS")); err == nil && n > 0 {
		return n
	}
	return 300_000
}()

// BenchmarkOutside measures tracelake's CPU per row as a user runs it:
// `tracelake run --exit-when-idle 1s` is a child process, Kafka (kfake) and
// the Databend test server are other processes, and the records were
// produced as a real producer batches them (10 ms linger, zstd batches).
// Per sink it reports the child's user and system CPU (getrusage) per
// row, the same for a bare franz-go group consumer reading the same
// records in its own process just before (the yardstick of the same run),
// the difference (tracelake's own work), and the child's peak RSS.
// TRACELAKE_BENCH_PROFILE_DIR=dir writes each run's CPU profile there
// (TRACELAKE_CPU_PROFILE of the child) for `go tool pprof -top`;
// TRACELAKE_BASELINE_BIN runs another build beside this one (builds).
func BenchmarkOutside(b *testing.B) {
	builds := builds(b)
	broker := startHelper(b, "kafka").line
	produceLikeUsers(b, broker, outsideRecords)
	round := 0
	for _, sinkName := range []string{"databend", "duckdb", "iceberg"} {
		for _, bd := range builds {
			b.Run("sink="+sinkName+"/"+bd.name, func(b *testing.B) {
				for range b.N {
					round++
					group := fmt.Sprintf("outside-%s-%d-%d", sinkName, round, time.Now().UnixNano())
					bare := consumeOnce(b, broker, "bare-"+group)
					cfgPath := outsideConfig(b, sinkName, broker, group)
					cmd := exec.Command(bd.bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
					cmd.Env = os.Environ()
					if dir := os.Getenv("TRACELAKE_BENCH_PROFILE_DIR"); dir != "" {
						cmd.Env = append(cmd.Env, "TRACELAKE_CPU_PROFILE="+filepath.Join(dir, fmt.Sprintf("%s-%s-%d.pprof", sinkName, bd.name, round)))
					}
					start := time.Now()
					peak := runMeasuringRSS(b, cmd)
					wall := time.Since(start) - time.Second // the idle wait
					run := childUsage(cmd)
					perRow := func(ns int64) float64 { return float64(ns) / 1e3 / float64(outsideRecords) }
					b.ReportMetric(float64(outsideRecords)/wall.Seconds(), "records/s")
					b.ReportMetric(perRow(run.user), "user-µs/row")
					b.ReportMetric(perRow(run.sys), "sys-µs/row")
					b.ReportMetric(perRow(run.user+run.sys), "CPU-µs/row")
					b.ReportMetric(perRow(bare.user+bare.sys), "bare-CPU-µs/row")
					b.ReportMetric(perRow(run.user+run.sys-bare.user-bare.sys), "beyond-bare-µs/row")
					b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
				}
			})
		}
	}
}

// produceLikeUsers produces n synthetic agent-trace spans to broker the
// way a service's producer does: batches lingering 10 ms, zstd.
func produceLikeUsers(b *testing.B, broker string, n int) {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ProducerLinger(10*time.Millisecond),
		kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	if err := tracegen.Produce(context.Background(), cl, testTopic, n, 1, nil); err != nil {
		b.Fatal(err)
	}
}

// consumeOnce runs the bare consume helper in group and returns its CPU.
func consumeOnce(b *testing.B, broker, group string) cpuUsage {
	b.Helper()
	h := startHelper(b, "consume", broker, group, strconv.Itoa(outsideRecords))
	f := strings.Fields(h.line)
	if len(f) != 3 {
		b.Fatalf("bare consume said %q", h.line)
	}
	user, _ := strconv.ParseInt(f[0], 10, 64)
	sys, _ := strconv.ParseInt(f[1], 10, 64)
	wall, _ := strconv.ParseInt(f[2], 10, 64)
	b.ReportMetric(float64(outsideRecords)/time.Duration(wall).Seconds(), "bare-records/s")
	h.stop(b)
	return cpuUsage{user, sys}
}

// outsideConfig writes the config of a run into sinkName with its
// defaults: the reference's config.json for Databend (with the test server
// started as a process), tracelake's YAML for DuckDB and Iceberg (a local
// file, a SQLite catalog and a local warehouse).
func outsideConfig(b *testing.B, sinkName, broker, group string) string {
	b.Helper()
	dir := b.TempDir()
	var sinkYAML string
	switch sinkName {
	case "databend":
		dsn := startHelper(b, "databend").line
		return referenceConfigAt(b, broker, dsn, map[string]any{"KafkaConsumerGroup": group, "batchSize": 10000, "workers": 2})
	case "duckdb":
		sinkYAML = fmt.Sprintf("{duckdb: {path: %q}}", filepath.Join(dir, "test.duckdb"))
	case "iceberg":
		// TRACELAKE_BENCH_ICEBERG_PROPERTIES (YAML, say {k: v}) measures
		// table properties against the defaults.
		props := cmp.Or(os.Getenv("TRACELAKE_BENCH_ICEBERG_PROPERTIES"), "{}")
		sinkYAML = fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q, table_properties: %s}}",
			filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"), props)
	}
	path := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], group: %s}\nsink: %s\nmetrics: {listen: \"127.0.0.1:0\"}\n", broker, testTopic, group, sinkYAML)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}
