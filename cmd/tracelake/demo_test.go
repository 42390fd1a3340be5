package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
