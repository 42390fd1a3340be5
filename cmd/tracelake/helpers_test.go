package main

import (
	"cmp"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/verify"
)

const testTopic = "llm-traces"

// TestMain removes the binary the tests share (buildBinary).
func TestMain(m *testing.M) {
	flag.Parse()
	// The parallel tests of this package wait far more than they compute
	// (processes killed and restarted, the group's rebalances, runs until
	// idle), so twice as many run at once as the default (GOMAXPROCS)
	// unless -parallel is given: under -race the package is the longest
	// of the suite.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(2*runtime.GOMAXPROCS(0))); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the tracelake binary the tests of this process share: linking
// it (DuckDB inside) takes seconds, once per test before.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildBinary builds tracelake once per test process and returns its
// path. Tests run it; none changes it.
func buildBinary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "tracelake-test-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "tracelake")
		if out, err := exec.Command("go", "build", "-tags", "duckdb_arrow", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// startKafka starts an in-process cluster with testTopic and a producer.
func startKafka(t testing.TB, partitions int32) (*kfake.Cluster, *kgo.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cluster, cl
}

// writeConfig writes a config for cluster with a DuckDB file in a temp dir:
// kafka gets brokers, topics and kafkaExtra; rest is added as is.
func writeConfig(t testing.TB, cluster *kfake.Cluster, kafkaExtra, rest string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], %s}\n%s\nsink: {duckdb: {path: %q}}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
		cluster.ListenAddrs()[0], testTopic, kafkaExtra, rest, filepath.Join(dir, "test.duckdb"))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// appendConfig adds lines to the config file at path.
func appendConfig(t testing.TB, path, lines string) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(text, lines+"\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// child is a running `tracelake run` with its log.
type child struct {
	cmd *exec.Cmd
	log *childLog
}

// stop stops the run with SIGTERM and fails the test unless it exits 0.
func (c *child) stop(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("run: %v\n%s", err, c.log)
	}
}

// assignedMark is what a run logs once it has partitions of testTopic.
const assignedMark = "partitions assigned: " + testTopic

// startRun starts `tracelake run --config cfgPath` and waits until it logs
// its first assignment of testTopic.
func startRun(t *testing.T, bin, cfgPath, name string) *child {
	t.Helper()
	return startRunUntil(t, bin, cfgPath, name, assignedMark)
}

// startRunUntil starts `tracelake run --config cfgPath` and waits until it
// logs mark.
func startRunUntil(t *testing.T, bin, cfgPath, name, mark string) *child {
	t.Helper()
	return startUntil(t, exec.Command(bin, "run", "--config", cfgPath), name, mark)
}

// startUntil starts cmd (a tracelake command) and waits until it logs
// mark.
func startUntil(t *testing.T, cmd *exec.Cmd, name, mark string) *child {
	t.Helper()
	c := &child{cmd: cmd, log: &childLog{t: t, prefix: name + ": ", mark: mark, assigned: make(chan struct{}, 1)}}
	c.cmd.Stderr = c.log
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.log.assigned:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not log %q within 60s:\n%s", name, mark, c.log)
	}
	return c
}

// childLog keeps a child's log, forwards it to the test log in -v runs and
// signals assigned when the child logs mark (by default its first
// assignment).
type childLog struct {
	t        *testing.T
	prefix   string
	mark     string
	assigned chan struct{}
	mu       sync.Mutex
	all      strings.Builder
}

func (w *childLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(p)
	w.mu.Unlock()
	if mark := cmp.Or(w.mark, assignedMark); strings.Contains(string(p), mark) {
		select {
		case w.assigned <- struct{}{}:
		default:
		}
	}
	if testing.Verbose() {
		for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
			w.t.Log(w.prefix + line)
		}
	}
	return len(p), nil
}

var metricsAddr = regexp.MustCompile(`serving metrics" addr=(\S+)`)

// get returns path from the child's status server, "" until it serves.
func (c *child) get(path string) string {
	m := metricsAddr.FindStringSubmatch(c.log.String())
	if m == nil {
		return ""
	}
	resp, err := http.Get("http://" + m[1] + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func (w *childLog) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// runUntilIdle runs `tracelake run --exit-when-idle 1s` to the end (env
// adds variables), then `tracelake verify --json`, and returns the report.
func runUntilIdle(t testing.TB, bin, cfgPath string, env ...string) verify.Report {
	t.Helper()
	run := exec.Command(bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
	run.Env = append(os.Environ(), env...)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("run until idle: %v\n%s", err, out)
	}
	return verifyJSON(t, bin, cfgPath, 0)
}

// createDatabase makes an empty DuckDB database at path, as a first open
// of the sink does.
func createDatabase(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

// openPrepared opens cfg's DuckDB sink with its tables prepared, closed
// when the test ends.
func openPrepared(t *testing.T, cfg *config.Config) *duckdb.Sink {
	t.Helper()
	snk, err := openDuckDB(cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snk.Close() })
	if err := snk.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return snk
}
