package verify

import (
	"bytes"
	"strings"
	"testing"
)

// Another signal's report makes the whole one fail when it fails, its
// problems named by its table, and the text shows each table's own
// verdict before the whole one's.
func TestAddSignal(t *testing.T) {
	main := &Report{OK: true, Partitions: []Partition{{Topic: "otlp:traces", Rows: 3}}}
	main.AddSignal("metrics", "otel_metrics", &Report{OK: true, Partitions: []Partition{{Topic: "otlp:metrics", Rows: 5}}})
	if !main.OK {
		t.Fatal("an OK signal's report made the whole one fail")
	}
	main.AddSignal("logs", "otel_logs", &Report{OK: false, Problems: []string{"otlp:logs/0: 1 gap"}, Partitions: []Partition{{Topic: "otlp:logs"}}})
	if main.OK || len(main.Problems) != 1 || main.Problems[0] != "otel_logs: otlp:logs/0: 1 gap" {
		t.Fatalf("ok=%v problems=%q, want the logs' gap named by its table", main.OK, main.Problems)
	}
	var b bytes.Buffer
	main.WriteText(&b)
	out := b.String()
	for _, want := range []string{"otel_metrics (metrics):", "OK: 1 partitions, 5 rows", "otel_logs (logs):", "FAILED: otlp:logs/0: 1 gap", "FAILED: otel_logs: otlp:logs/0: 1 gap"} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
	if strings.LastIndex(out, "FAILED: otel_logs:") < strings.Index(out, "otel_logs (logs):") {
		t.Errorf("the whole verdict is not last:\n%s", out)
	}
}
