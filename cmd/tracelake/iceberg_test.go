package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/iceberg/icebergtest"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// SIGKILL at random moments while writing Iceberg tables (SQLite catalog,
// local warehouse): read back by iceberg-go's scan, every message is in
// the raw table exactly once.
func TestIcebergCrashKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	dir := t.TempDir()
	cfgPath := writeIcebergConfig(t, dir, cluster)
	const first, during = 15_000, 15_000
	if err := tracegen.Produce(context.Background(), prod, testTopic, first, 1, nil); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, testTopic, during, 2, nil) }()
	s := openIcebergDir(t, dir)
	// The first kill lands right after the first commit, then kills at
	// random moments.
	var parts []sink.TopicPartition
	for p := range int32(4) {
		parts = append(parts, sink.TopicPartition{Topic: testTopic, Partition: p})
	}
	killAfterFirstLoad(t, bin, cfgPath, func(*child) bool {
		pos, err := s.Positions(context.Background(), parts)
		return err == nil && len(pos) > 0
	})
	killAtRandomMoments(t, bin, cfgPath, 3)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}

	checkIcebergOnce(t, s, bin, cfgPath, first+during, 0)
}

// writeIcebergConfig writes a config for an Iceberg sink with a SQLite
// catalog and a warehouse in dir, small batches and loads, and returns its
// path.
func writeIcebergConfig(t *testing.T, dir string, cluster *kfake.Cluster) string {
	t.Helper()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [%s], group: ice, session_timeout: 6s, rebalance_timeout: 6s}
workers: 2
batch: {max_records: 1000, max_interval: 100ms}
load: {max_files: 4}
sink: {type: iceberg, iceberg: {catalog: %q, warehouse: %q, commit_interval: 300ms}}
metrics: {listen: "127.0.0.1:0"}
`, cluster.ListenAddrs()[0], testTopic, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfgPath
}

// openIcebergDir opens the sink writeIcebergConfig configures in dir.
func openIcebergDir(t *testing.T, dir string) *iceberg.Sink {
	t.Helper()
	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: "trace_raw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tracelake compact and expire run while `tracelake run` commits loads to
// the same table: their commits race the loads' and are retried; no row is
// lost or doubled, and the positions stay where the loads put them.
func TestIcebergMaintenanceWhileIngesting(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 4)
	dir := t.TempDir()
	cfgPath := writeIcebergConfig(t, dir, cluster)
	const n, dead = 20_000, 3
	for i := range dead {
		bad := &kgo.Record{Topic: testTopic, Key: []byte{0xff, byte(i)}, Value: []byte("{not json")}
		if err := prod.ProduceSync(context.Background(), bad).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, testTopic, n, 2, nil) }()
	running := startRun(t, bin, cfgPath, "run")
	// Maintenance starts once a load committed, so that it races the
	// loads that follow.
	awaitMetric(t, running, `tracelake_iceberg_commit_duration_seconds_count{table="tracelake.trace_raw"}`)
	maintain := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{args[0], "--config", cfgPath}, args[1:]...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s\nrun log:\n%s", args, err, out, running.log)
		}
		return string(out)
	}
	for range 3 {
		// -24h: the current day too, which takes the loads racing this.
		out := maintain("compact", "--target-size", "4MiB", "--min-age", "-24h")
		out += maintain("expire", "--older-than", "0s")
		t.Logf("maintenance while ingesting:\n%s", out)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// The loads' commits are on /metrics, conflicts with the maintenance
	// commits included.
	metrics := running.get("/metrics")
	for _, m := range []string{`tracelake_iceberg_snapshots{table="tracelake.trace_raw"}`, `tracelake_iceberg_metadata_bytes{table="tracelake.trace_raw"}`,
		`tracelake_iceberg_commit_duration_seconds_count{table="tracelake.trace_raw"}`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	// And on the status page.
	if page := running.get("/"); !regexp.MustCompile(`<tr><td class="l">tracelake.trace_raw</td><td>[1-9]`).MatchString(page) {
		t.Errorf("status page lacks the raw table's commits:\n%s", page)
	}
	_ = running.cmd.Process.Signal(syscall.SIGTERM)
	_ = running.cmd.Wait()
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	s := openIcebergDir(t, dir)
	// After a last compaction a day's raw rows sit in one file (two if the
	// test ran over midnight UTC), and orphan cleanup finds nothing older
	// than its grace period.
	maintain("compact", "--target-size", "64MiB", "--min-age", "-24h")
	files, err := s.DataFiles(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > 2 {
		t.Errorf("%d raw data files after compaction", len(files))
	}
	// Without --target-size, compact rolls files at the size scheduled
	// maintenance does (sink.iceberg.maintenance.target_file_size).
	if out := maintain("compact", "--dry-run"); !strings.Contains(out, "compacting to files of 128MiB") {
		t.Errorf("compact's default target: %s", out)
	}
	if out := maintain("orphans", "--dry-run"); !strings.Contains(out, "trace_raw: 0 orphan files") {
		t.Errorf("orphans: %s", out)
	}
	// Bad flags are usage errors (exit 2) that say what is accepted, and
	// name the flag (as -flag in the flag package's own messages).
	for _, bad := range [][]string{{"orphans", "--older-than", "10m"}, {"compact", "--target-size", "4KiB"}, {"expire", "--retain-last", "0"}} {
		cmd := exec.Command(bin, append([]string{bad[0], "--config", cfgPath}, bad[1:]...)...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), strings.TrimPrefix(bad[1], "-")) {
			t.Errorf("%v: exit %d (%v), want %d:\n%s", bad, cmd.ProcessState.ExitCode(), err, exitUsage, out)
		}
	}
	checkIcebergOnce(t, s, bin, cfgPath, n, dead)

	// tracelake sql reads both tables back through DuckDB.
	out := maintain("sql", `SELECT count(*) AS n, count(DISTINCT (kpartition, koffset)) AS once,
		count(*) FILTER (WHERE json_valid(raw_data) AND (record_metadata->>'$.topic') = '`+testTopic+`' AND add_time > TIMESTAMP '2020-01-01'
			AND ktopic = '`+testTopic+`' AND event_time = ktimestamp AND ktimestamp > TIMESTAMP '2020-01-01') AS valid FROM trace_raw`)
	if want := fmt.Sprintf(`\n%d +%d +%d\n`, n, n, n); !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("sql over trace_raw:\n%s\nwant a row %q", out, want)
	}
	out = maintain("sql", `SELECT hex(key) AS key, value::VARCHAR AS value, "offset" >= 0 AS placed FROM trace_raw_dlq ORDER BY 1`)
	for i := range dead {
		if want := fmt.Sprintf(`\nFF0%d +\{not json +true\n`, i); !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("sql over trace_raw_dlq:\n%s\nwant a row %q", out, want)
		}
	}
}

// Three `tracelake run` processes in one group write one Iceberg table
// through a PostgreSQL catalog (a real server); one of them is killed with
// SIGKILL and restarted again and again while partitions move between
// them. At the end every message is in the table exactly once.
func TestIcebergThreeInstancesOnPostgresAndS3(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	url := icebergtest.StartPostgres(t)
	s3 := icebergtest.StartS3(t, "lake")
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 6)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [%s], group: three, session_timeout: 6s, rebalance_timeout: 10s}
workers: 1
batch: {max_records: 1000, max_interval: 100ms}
load: {max_files: 4}
retry: {max_delay: 2s}
sink: {type: iceberg, iceberg: {catalog: %q, warehouse: "s3://lake/warehouse", commit_interval: 300ms,
  s3: {endpoint: %q, region: %q, access_key_id: %q, secret_access_key: %q}}}
metrics: {listen: "127.0.0.1:0"}
`, cluster.ListenAddrs()[0], testTopic, url, s3.Endpoint, s3.Region, s3.AccessKey, s3.SecretKey)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const first, during = 15_000, 15_000
	if err := tracegen.Produce(context.Background(), prod, testTopic, first, 1, nil); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, testTopic, during, 2, nil) }()
	steady := []*child{startRun(t, bin, cfgPath, "steady 1"), startRun(t, bin, cfgPath, "steady 2")}
	killAtRandomMoments(t, bin, cfgPath, 4)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// The two steady members finish the work; then they are stopped.
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	for _, c := range steady {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		_ = c.cmd.Wait()
	}

	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: url, Warehouse: "s3://lake/warehouse",
		Namespace: "tracelake", Table: "trace_raw",
		S3: iceberg.S3{Endpoint: s3.Endpoint, Region: s3.Region, AccessKeyID: s3.AccessKey, SecretAccessKey: s3.SecretKey}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkIcebergOnce(t, s, bin, cfgPath, first+during, 0)
}

// checkIcebergOnce reads the raw table back with a scan and checks that it
// holds n messages, each once, and that `tracelake verify` agrees (with
// dead dead letters): positions at Kafka's end, no gap, no duplicate.
func checkIcebergOnce(t *testing.T, s *iceberg.Sink, bin, cfgPath string, n, dead int) {
	t.Helper()
	stored, err := s.Stored(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	var seen int64
	for tp, offs := range stored {
		if _, dups := sink.Coverage(offs); dups != 0 {
			t.Fatalf("%v: %d rows stored twice", tp, dups)
		}
		seen += offs.Count()
	}
	if seen != int64(n) {
		t.Fatalf("%d rows, want %d", seen, n)
	}
	rep := verifyJSON(t, bin, cfgPath, 0)
	if rows, dlq := rep.Totals(); rows != int64(n) || dlq != int64(dead) {
		t.Errorf("verify: %d rows, %d dead letters: %+v", rows, dlq, rep)
	}
	for _, p := range rep.Partitions {
		if p.Lag != 0 || p.Gaps != 0 || p.Duplicates != 0 {
			t.Errorf("verify, partition %d: %+v", p.Partition, p)
		}
	}
}
