package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// A bad config exits 2 with one line per bad key, before connecting.
func TestBadConfigExit2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("kafka: {topics: [t], brokers: [nowhere]}\nworkers: -1\nbatch: {max_recrods: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"run", "--config", path}); code != exitUsage {
		t.Fatalf("exit code %d, want %d", code, exitUsage)
	}
	if _, err := os.Stat(filepath.Join(dir, "tracelake.duckdb")); err == nil {
		t.Error("a database was created for a bad config")
	}
}

// SIGTERM: stop reading, load what is pending, commit, exit 0. Afterwards
// the group's committed offsets equal the ledger's next offsets.
func TestSigtermLoadsAndCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 2)
	if err := tracegen.Produce(context.Background(), cl, testTopic, 5000, 1, nil); err != nil {
		t.Fatal(err)
	}
	// Batches and loads wait a minute: whatever is loaded is loaded by the
	// shutdown itself.
	cfgPath := writeConfig(t, cluster, "group: term", "batch: {max_interval: 1m}\nload: {max_interval: 1m}")
	// Also checked here, on the table the run creates: a setting from the
	// environment reaches the sink.
	t.Setenv("TRACELAKE_SINK_DUCKDB_JSON_COMPRESSION", "none")
	run := startRun(t, bin, cfgPath, "run")
	cmd := run.cmd
	awaitPolled(t, run)
	// While it runs, the database file is its alone: sql goes through it.
	if out, err := exec.Command(bin, "sql", "--config", cfgPath, "SELECT 41 + 1 AS answer").CombinedOutput(); err != nil ||
		string(out) != "answer\n42\n(1 rows)\n" {
		t.Errorf("sql while run holds the file: %v\n%s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, run.log)
	}
	out, err := exec.Command(bin, "sql", "--config", cfgPath,
		`SELECT "partition", max(last_offset) + 1 AS next FROM trace_raw_ledger GROUP BY ALL ORDER BY 1`).Output()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "term")
	if err != nil {
		t.Fatal(err)
	}
	loaded := 0
	for _, line := range strings.Split(string(out), "\n")[1:] {
		var p int32
		var next int64
		if n, _ := fmt.Sscanf(line, "%d %d", &p, &next); n != 2 {
			continue
		}
		loaded++
		o, ok := committed.Lookup(testTopic, p)
		if !ok || o.At != next {
			t.Errorf("partition %d: committed %v, ledger next %d", p, o.At, next)
		}
	}
	if loaded == 0 {
		t.Fatalf("nothing loaded at shutdown:\n%s\n%s", out, run.log)
	}
	out, err = exec.Command(bin, "sql", "--config", cfgPath, `SELECT DISTINCT compression FROM pragma_storage_info('trace_raw')
		WHERE column_name IN ('raw_data', 'record_metadata') AND segment_type = 'JSON'`).CombinedOutput()
	if err != nil || !slices.Equal(strings.Fields(string(out)), []string{"compression", "Uncompressed", "(1", "rows)"}) {
		t.Errorf("JSON columns with json_compression none: %v\n%s", err, out)
	}
}

// Past shutdown_timeout the process exits 1 and says why; nothing is lost:
// the next start loads every record exactly once.
func TestShutdownTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 2)
	const n = 20000
	if err := tracegen.Produce(context.Background(), cl, testTopic, n, 1, nil); err != nil {
		t.Fatal(err)
	}
	cfgPath := writeConfig(t, cluster, "group: slow, session_timeout: 6s, rebalance_timeout: 6s", "batch: {max_interval: 1m}\nload: {max_interval: 1m}\nshutdown_timeout: 1ms")
	run := startRun(t, bin, cfgPath, "run")
	awaitPolled(t, run)
	if err := run.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := run.cmd.Wait()
	if code := run.cmd.ProcessState.ExitCode(); code != exitFailed || !strings.Contains(run.log.String(), "shutdown_timeout passed") {
		t.Fatalf("exit %d (%v), want 1 with a shutdown_timeout message:\n%s", code, err, run.log)
	}

	rep := runUntilIdle(t, bin, cfgPath, "TRACELAKE_SHUTDOWN_TIMEOUT=1m")
	if rows, _ := rep.Totals(); !rep.OK || rows != n {
		t.Fatalf("after the timed-out shutdown: ok=%v rows=%d, want %d; %v", rep.OK, rows, n, rep.Problems)
	}
}

// awaitPolled waits until the child has read records into its batches,
// as its /metrics say (counting fetches at the broker does not tell: at
// the start, franz-go fetches while the workers wait for the group to
// settle, and every assignment change fetches again).
func awaitPolled(t *testing.T, run *child) {
	t.Helper()
	awaitMetric(t, run, `tracelake_consumed_records_total{topic="`+testTopic+`"}`)
}

// awaitMetric waits until the child's /metrics show series (name and
// labels, exactly) with a value above zero.
func awaitMetric(t *testing.T, run *child, series string) {
	t.Helper()
	positive := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([1-9]\d*|\d*\.\d*[1-9]\d*)`)
	deadline := time.Now().Add(60 * time.Second)
	for !positive.MatchString(run.get("/metrics")) {
		if time.Now().After(deadline) {
			t.Fatalf("child's /metrics showed no %s above 0 in 60s:\n%s", series, run.log)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition: the metrics endpoint
	}
}

// `tracelake config` shows the effective config (file, environment, flags)
// without secrets, and its validation result.
func TestConfigCommandRedacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("kafka: {topics: [t]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRACELAKE_KAFKA_SASL_PASSWORD", "hunter2")
	t.Setenv("TRACELAKE_SINK_DATABEND_DSN", "https://u:pa55@host:443")
	t.Setenv("TRACELAKE_SINK_TYPE", "databend") // a DSN is read only then
	cf := configFlags{path: path, workers: 5}
	cfg, err := cf.effective()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err = printConfig(&out, cfg.Redacted(), cfg.Validate())
	s := out.String()
	if strings.Contains(s, "hunter2") || strings.Contains(s, "pa55") || !strings.Contains(s, "password: REDACTED") ||
		!strings.Contains(s, "https://u:REDACTED@host:443") || !strings.Contains(s, "workers: 5") {
		t.Errorf("printed config:\n%s", s)
	}
	if err != nil || !strings.Contains(s, "# validation: OK") {
		t.Errorf("validation: %v", err)
	}
}

// A common flag given with its zero value (--workers 0, --mode "") is a
// value like any other: it overrides the file and is refused by name, as
// the same value in the file would be, not dropped for the file's value
// ("Every command that takes --config also takes --brokers, --topics,
// --group, --workers, --table, --duckdb and --mode, which override the
// file and the environment").
func TestConfigFlagGivenAsZeroIsCheckedNotDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("kafka: {topics: [t]}\nworkers: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for flagArgs, want := range map[string]string{
		"--workers=0": "workers: want 1 to 256, got 0",
		"--mode=":     `mode: want raw or transform, got ""`,
		"--table=":    `sink.table: want a table name`,
		"--group=":    "kafka.group: a consumer group name is required",
		"--duckdb=":   "sink.duckdb.path: a database file path is required",
	} {
		fs := newFlagSet("run")
		var cf configFlags
		cf.register(fs)
		if err := fs.Parse([]string{"--config", path, flagArgs}); err != nil {
			t.Fatal(err)
		}
		cfg, err := cf.loadFor(true)
		if err == nil || !strings.Contains(err.Error(), want) {
			workers := 0
			if cfg != nil {
				workers = cfg.Workers
			}
			t.Errorf("%s over a file with workers: 3: got %v (workers %d), want a usage error naming %q", flagArgs, err, workers, want)
		}
	}
}

// Asking a command for help is no error: it prints the command's usage and
// exits 0, as `tracelake --help` does; a flag it does not know still exits 2.
func TestCommandHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"run", "-h"}, {"verify", "-h"}, {"sql", "--help"}, {"serve", "-h"}, {"config", "-h"},
		{"dlq", "-h"}, {"dlq", "list", "-h"}, {"dlq", "replay", "-help"}, {"merge", "-h"}, {"reconcile", "-h"},
		{"ready", "-h"}, {"compact", "-h"}, {"expire", "-h"}, {"orphans", "-h"}, {"maintain", "-h"},
		{"prices", "-h"}, {"prices", "list", "-h"}, {"prices", "match", "-h"}, {"prices", "update", "-h"},
		{"report", "-h"}, {"gen", "-h"}, {"demo", "-h"},
	} {
		if code := run(args); code != exitOK {
			t.Errorf("tracelake %s: exit %d, want %d", strings.Join(args, " "), code, exitOK)
		}
	}
	if code := run([]string{"verify", "--no-such-flag"}); code != exitUsage {
		t.Errorf("an unknown flag: exit %d, want %d", code, exitUsage)
	}
}

// compact --target-size under 1MiB, 0 included, is refused before anything
// is opened: 0 used to mean the configured size without a word.
func TestCompactRefusesTargetSizeBelow1MiB(t *testing.T) {
	for _, size := range []string{"0", "0B", "512KiB"} {
		err := cmdCompact(context.Background(), []string{"--target-size", size})
		if code, _ := exitStatus(err); code != exitUsage || !strings.Contains(fmt.Sprint(err), "want at least 1MiB") {
			t.Errorf("--target-size %s: exit %d, %v; want %d and the size accepted", size, code, err, exitUsage)
		}
	}
}

// An argument left after a command's flags is refused, naming it, before
// anything is opened: Go's flag package stops at it, so `tracelake merge
// config.yaml` ran on the defaults (a new ./tracelake.duckdb) without the
// file, and the flags after it went unread.
func TestCommandsRefuseStrayArguments(t *testing.T) {
	t.Chdir(t.TempDir())
	path := "stray.yaml"
	if err := os.WriteFile(path, []byte("kafka: {topics: [t]}\nmetrics: {listen: \"\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Canceled: a command that went on regardless stops at its first wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	commands := map[string]func([]string) error{
		"run":         func(a []string) error { return cmdRun(ctx, ctx, a) },
		"verify":      func(a []string) error { return cmdVerify(ctx, standalone, a) },
		"config":      cmdConfig,
		"merge":       func(a []string) error { return cmdMerge(ctx, a) },
		"reconcile":   func(a []string) error { return cmdReconcile(ctx, standalone, a) },
		"ready":       func(a []string) error { return cmdReady(ctx, standalone, a) },
		"serve":       func(a []string) error { return cmdServe(ctx, a) },
		"compact":     func(a []string) error { return cmdCompact(ctx, a) },
		"expire":      func(a []string) error { return cmdExpire(ctx, a) },
		"orphans":     func(a []string) error { return cmdOrphans(ctx, a) },
		"maintain":    func(a []string) error { return cmdMaintain(ctx, a) },
		"report":      func(a []string) error { return cmdReport(ctx, standalone, a) },
		"gen":         func(a []string) error { return cmdGen(ctx, a) },
		"dlq list":    func(a []string) error { return cmdDLQ(ctx, standalone, append([]string{"list"}, a...)) },
		"prices list": func(a []string) error { return cmdPrices(ctx, append([]string{"list"}, a...)) },
	}
	for name, cmd := range commands {
		flagged := []string{"--config", path, "extra", "--workers", "3"}
		if name == "gen" { // gen takes no config
			flagged = []string{"--topic", "t", "extra", "--messages", "3"}
		}
		for _, args := range [][]string{{path}, flagged} {
			err := cmd(args)
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), "unexpected argument") {
				t.Errorf("%s %s: got %v, want a usage error naming the unexpected argument", name, strings.Join(args, " "), err)
			}
		}
	}
	if _, err := os.Stat("tracelake.duckdb"); err == nil {
		t.Error("a command given a stray argument created ./tracelake.duckdb from the defaults")
	}
	// prices match MODEL: the flags after the model are read, and a second
	// argument is refused.
	if err := cmdPrices(ctx, []string{"match", "--provider", "openai", "gpt-4o", "--at", "yesterday"}); err == nil || !strings.Contains(err.Error(), "--at") {
		t.Errorf("prices match with --at after the model: got %v, want --at refused as not RFC 3339", err)
	}
	if err := cmdPrices(ctx, []string{"match", "gpt-4o", "gpt-4o-mini"}); err == nil || !strings.Contains(err.Error(), "unexpected argument") {
		t.Errorf("prices match with two models: got %v, want the second refused", err)
	}
}

// A negative duration flag is refused by name: --exit-when-idle -1s ran
// for ever (as 0: never exit), merge --every -1m merged once and exited,
// ready --wait -1s looked once, none saying so.
func TestNegativeDurationFlagsAreRefused(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for flag, cmd := range map[string]func() error{
		"--exit-when-idle": func() error { return cmdRun(ctx, ctx, []string{"--exit-when-idle", "-1s"}) },
		"--every":          func() error { return cmdMerge(ctx, []string{"--every", "-1m"}) },
		"--wait": func() error {
			return cmdReady(ctx, standalone, []string{"--wait", "-1s", "--table", "cdc_shop_orders", "--hour", "2026-12-04T10"})
		},
	} {
		err := cmd()
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), flag+" -1") {
			t.Errorf("%s negative: got %v; want a usage error naming it", flag, err)
		}
	}
}
