package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// buildBinary builds tracelake once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tracelake")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// A `tracelake run` child is killed with SIGKILL at random moments while
// records keep arriving, and restarted each time; at the end every message
// is present exactly once and verify reports no gap and no duplicate.
func TestCrashKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "llm-traces"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [llm-traces], group: crash, session_timeout: 6s, rebalance_timeout: 6s}
workers: 2
batch: {max_records: 500, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
sink: {duckdb: {path: %q}}
`, cluster.ListenAddrs()[0], filepath.Join(dir, "crash.duckdb"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	const first, during = 30_000, 30_000
	if err := tracegen.Produce(context.Background(), prod, "llm-traces", first, 1, nil); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, "llm-traces", during, 2, nil) }()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	t.Logf("random seed for kill moments from the clock")
	for i := range 6 {
		cmd := exec.Command(bin, "run", "--config", cfgPath)
		assigned := make(chan struct{}, 1)
		cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("run %d: ", i), assigned: assigned}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-assigned:
		case <-time.After(60 * time.Second):
			t.Fatal("child got no partitions within 60s")
		}
		// The kill moment is the point of the test: anywhere from just
		// after the assignment to well into loading.
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// The kills must have hit a running ingest, not only start-ups.
	out, err := exec.Command(bin, "sql", "--config", cfgPath, "SELECT count(*) AS n FROM trace_raw").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fields := strings.Fields(string(out)); len(fields) < 2 || fields[1] == "0" {
		t.Fatalf("no rows loaded before the final run: %s", out)
	}

	final := exec.Command(bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
	final.Stderr = &prefixWriter{t: t, prefix: "final: "}
	if err := final.Run(); err != nil {
		t.Fatalf("final run: %v", err)
	}
	out, err = exec.Command(bin, "verify", "--config", cfgPath, "--json").Output()
	if err != nil {
		t.Fatalf("verify exit: %v\n%s", err, out)
	}
	var rep verify.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	rows, dlq := rep.Totals()
	if !rep.OK || rows+dlq != first+during || dlq != 0 {
		t.Fatalf("after kills: ok=%v rows=%d dlq=%d problems=%v, want %d rows", rep.OK, rows, dlq, rep.Problems, first+during)
	}
	for _, p := range rep.Partitions {
		if p.Gaps != 0 || p.Duplicates != 0 || p.Overlaps != 0 || p.Lag != 0 {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
	}
}

// prefixWriter forwards a child's log lines to the test log in -v runs and
// signals assigned (if set) when the child logs its first assignment.
type prefixWriter struct {
	t        *testing.T
	prefix   string
	assigned chan struct{}
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	if w.assigned != nil && strings.Contains(string(p), "partitions assigned: llm-traces") {
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
