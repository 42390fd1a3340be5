package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// The README's first command: the demo runs end to end on its own and
// proves its result (verify OK, the model equal to a rebuild).
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "demo", "--messages", "3000", "--duckdb", filepath.Join(t.TempDir(), "demo.duckdb")).CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{
		"ingested 3000 records (3000 raw rows, 0 dead-letter)",
		"OK: 4 partitions, 3000 rows, 0 dead-letter rows, no gaps, no duplicates",
		"model spans: 3000 raw rows read, 3000 target rows changed, 0 rejected",
		"EQUAL: trace_spans vs trace_spans__check",
		"Daily token usage by model",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// `tracelake demo --otlp`: agent traces through the OTLP/HTTP receiver,
// Kafka and the pipeline into otel_spans, verified and deduplicated; their
// logs and metrics into otel_logs and otel_metrics of the same file.
func TestDemoOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own embedded Kafka and file
	bin := buildBinary(t)
	out, err := exec.Command(bin, "demo", "--otlp", "--messages", "500", "--duckdb", filepath.Join(t.TempDir(), "demo.duckdb")).CombinedOutput()
	if err != nil {
		t.Fatalf("demo --otlp: %v\n%s", err, out)
	}
	sent := regexp.MustCompile(`sent 500 agent traces \((\d+) spans\) in 10 requests, with (\d+) log records and (\d+) metric points`).FindSubmatch(out)
	if sent == nil {
		t.Fatalf("demo output lacks what was sent:\n%s", out)
	}
	n, logs, points := string(sent[1]), string(sent[2]), string(sent[3])
	if logs != n || points == "0" {
		t.Errorf("sent %s log records for %s spans and %s metric points: want a record per span and some points", logs, n, points)
	}
	for _, want := range []string{
		"loaded 10 OTLP messages into " + logs + " rows of otel_logs",
		"OK: 4 partitions, " + logs + " rows, 0 dead-letter rows, no gaps, no duplicates",
		"loaded 10 OTLP messages into " + points + " rows of otel_metrics",
		"OK: 4 partitions, " + points + " rows, 0 dead-letter rows, no gaps, no duplicates",
		"loaded 10 OTLP messages into " + n + " spans of otel_spans",
		"model otel_spans_dedup: " + n + " rows read, " + n + " inserted",
		"OK: 4 partitions, " + n + " rows, 0 dead-letter rows, no gaps, no duplicates",
		"execute_tool", "invoke_agent support",
		"genai_operations: " + n + " rows, 0 stored twice, 0 without their source row",
		"anthropic/claude-sonnet-4-5", "openai/gpt-4o", "report: file://",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// examples/agent-traces.yaml's header is a walkthrough a reader runs as
// written: gen, run, merge, then a query of what the models made. Each
// command must succeed against the file alone (the demo creates more
// around it; a reader following the header has only the file). Kafka is
// in-process; the broker address and the message count are the only
// changes made to the commands.
func TestAgentTracesExampleHeaderCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	example, err := os.ReadFile("../../examples/agent-traces.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	addr := cluster.ListenAddrs()[0]
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "examples", "agent-traces.yaml"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	var cmds [][]string
	for _, line := range strings.Split(string(example), "\n") {
		// The walkthrough's commands are indented in the comment.
		rest, ok := strings.CutPrefix(line, "#   tracelake ")
		if !ok {
			continue
		}
		args, err := shellWords(rest)
		if err != nil {
			t.Fatalf("header line %q: %v", line, err)
		}
		for i, a := range args {
			switch {
			case a == "127.0.0.1:9092":
				args[i] = addr
			case i > 0 && args[i-1] == "--messages":
				args[i] = "2000"
			}
		}
		if slices.Contains(args, "--config") && !slices.Contains(args, "--brokers") {
			// Right after the command: flags end at its first argument.
			args = slices.Insert(args, 1, "--brokers", addr)
		}
		cmds = append(cmds, args)
	}
	if len(cmds) < 3 {
		t.Fatalf("found %d commands in the example's header, want its walkthrough", len(cmds))
	}
	for _, args := range cmds {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		// The example's default metrics listener may be taken on a test machine.
		cmd.Env = append(os.Environ(), "TRACELAKE_METRICS_LISTEN=127.0.0.1:0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("tracelake %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// shellWords splits a command line as a shell would for the plain words
// and "double-quoted" arguments the examples use.
func shellWords(s string) ([]string, error) {
	var out []string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				return nil, fmt.Errorf("unclosed quote in %q", s)
			}
			out, s = append(out, s[1:end+1]), s[end+2:]
			continue
		}
		word, rest, _ := strings.Cut(s, " ")
		out, s = append(out, word), rest
	}
	return out, nil
}
