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

	"github.com/tracelake/tracelake/internal/config"
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

// A --where is one condition over the dead-letter table, pasted into the
// replay's selection of the rows it loads again: one that went on with
// a UNION ALL of the table selected each dead letter twice, and the
// replay loaded it twice. It is refused as not a condition; a condition
// replays each dead letter once.
func TestDLQReplayOfAWhereSelectingRowsTwiceIsRefused(t *testing.T) {
	path := dlqListConfig(t, `{"a":1}`)
	ctx := context.Background()
	var out bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &out}
	twice := `true UNION ALL SELECT rowid, topic, "partition", "offset", "key", "value", headers, create_time FROM ` + config.DefaultTable + `_dlq`
	if err := cmdDLQ(ctx, env, []string{"replay", "--config", path, "--where", twice}); err == nil || !strings.Contains(err.Error(), "want a condition") {
		t.Errorf("dlq replay --where with a UNION of the table: %v, want it refused as not a condition\n%s", err, out.String())
	}
	if err := cmdDLQ(ctx, env, []string{"replay", "--config", path, "--where", "true"}); err != nil {
		t.Fatalf("dlq replay: %v\n%s", err, out.String())
	}
	rows, letters := rowsAndDeadLetters(t, path)
	if rows != 1 || letters != 0 {
		t.Errorf("after the replays: %d rows and %d dead letters, want the dead letter loaded once", rows, letters)
	}
}

// A --where that passes for one SELECT can still select a dead letter
// twice without a set operation: GROUP BY GROUPING SETS naming the same
// set twice yields each row once per set. whereOnly looked only at the
// statement's type, so the replay loaded the dead letter twice. Anything
// past the condition (GROUP BY, HAVING, QUALIFY, ORDER BY, LIMIT, a
// sample) is refused as not a condition.
func TestDLQReplayOfAWhereGroupingRowsTwiceIsRefused(t *testing.T) {
	path := dlqListConfig(t, `{"a":1}`)
	ctx := context.Background()
	var out bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &out}
	cols := `rowid, topic, "partition", "offset", "key", "value", headers, create_time`
	for _, where := range []string{
		`true GROUP BY GROUPING SETS ((` + cols + `), (` + cols + `))`,
		`true GROUP BY ALL HAVING true`,
		`true QUALIFY true`,
		`true LIMIT 1`,
	} {
		if err := cmdDLQ(ctx, env, []string{"replay", "--config", path, "--where", where}); err == nil || !strings.Contains(err.Error(), "want a condition") {
			t.Errorf("dlq replay --where %q: %v, want it refused as not a condition\n%s", where, err, out.String())
		}
	}
	// A condition whose subquery groups is a condition.
	grouped := `"offset" IN (SELECT max("offset") FROM ` + config.DefaultTable + `_dlq GROUP BY "partition")`
	if err := cmdDLQ(ctx, env, []string{"replay", "--config", path, "--dry-run", "--where", grouped}); err != nil {
		t.Errorf("dlq replay --where %q: %v\n%s", grouped, err, out.String())
	}
	rows, letters := rowsAndDeadLetters(t, path)
	if rows > 1 {
		t.Errorf("after the replays: %d rows and %d dead letters, the dead letter loaded more than once", rows, letters)
	}
}

// rowsAndDeadLetters counts the raw table's rows and dead letters of the
// config at path.
func rowsAndDeadLetters(t *testing.T, path string) (rows, letters int64) {
	t.Helper()
	cfg, err := (&configFlags{path: path}).loadFor(false)
	if err != nil {
		t.Fatal(err)
	}
	snk := openPrepared(t, cfg)
	if err := snk.DB().QueryRow(`SELECT (SELECT count(*) FROM `+config.DefaultTable+`), (SELECT count(*) FROM `+config.DefaultTable+`_dlq)`).Scan(&rows, &letters); err != nil {
		t.Fatal(err)
	}
	return rows, letters
}
