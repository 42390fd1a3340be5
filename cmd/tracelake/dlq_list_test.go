package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// dlqListConfig writes a config of a DuckDB file in a temp dir, loads
// dead letters of values (offsets 0, 1, …) into it as the pipeline
// does, and returns the config's path.
func dlqListConfig(t *testing.T, values ...string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "tracelake.yaml")
	text := fmt.Sprintf("kafka: {topics: [t]}\nmetrics: {listen: \"\"}\nsink: {duckdb: {path: %q}}\n", filepath.Join(dir, "test.duckdb"))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := (&configFlags{path: path}).loadFor(false)
	if err != nil {
		t.Fatal(err)
	}
	snk := openPrepared(t, cfg)
	ctx := context.Background()
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: int64(len(values) - 1), DLQ: int64(len(values))}}}
	for i, v := range values {
		r := &kgo.Record{Topic: "t", Offset: int64(i), Value: []byte(v)}
		start := len(b.DLQ)
		b.DLQ = envelope.AppendDLQRow(b.DLQ, r, envelope.Check(r.Value).Reason, envelope.StageDecode)
		b.MaxLine = max(b.MaxLine, len(b.DLQ)-start)
	}
	f, err := snk.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snk.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	snk.Close()
	return path
}

// A message that is not UTF-8 is one of the commonest dead letters
// ("invalid UTF-8 at byte N"). dlq list showed the head of each value
// with DuckDB's decode(), which fails on such bytes: the listing of every
// dead-letter table holding one failed ("Conversion Error: Failure in
// decode"), and the operator saw none of its dead letters.
func TestDLQListShowsAValueThatIsNotUTF8(t *testing.T) {
	path := dlqListConfig(t, "{\"a\":\"caf\xe9\"}", `{"b":`)
	var out bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &out}
	if err := cmdDLQ(context.Background(), env, []string{"list", "--config", path}); err != nil {
		t.Fatalf("dlq list: %v\n%s", err, out.String())
	}
	for _, want := range []string{"invalid UTF-8 at byte 9", `{"a":"caf`, "invalid JSON", `{"b":`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dlq list does not show %q:\n%s", want, out.String())
		}
	}
}
