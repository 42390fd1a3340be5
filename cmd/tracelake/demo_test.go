package main

import (
	"os/exec"
	"path/filepath"
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
