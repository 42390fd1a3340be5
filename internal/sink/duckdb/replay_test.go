package duckdb

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// After a fix to the table (a changed column type), replay moves the rows
// that now load from the dead-letter table into the table in one
// transaction; the ones still failing stay with their new error. A dry run
// changes nothing.
func TestReplayAfterFix(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Transform = "spans", true
	s := openWith(t, opt)
	if _, err := s.DB().Exec(`CREATE TABLE spans (id BIGINT NOT NULL, score DECIMAL(10,2))`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 2, Records: 3}}}
	for i, v := range []string{`{"id":1,"score":"high"}`, `{"score":1}`, `{"id":2,"score":3}`} {
		b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "t", Offset: int64(i), Value: []byte(v)}, envelope.ValueText)
	}
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM spans_dlq`); n != 2 {
		t.Fatalf("DLQ rows = %d, want 2", n)
	}

	// The fix: score becomes text. The sink reads the new columns.
	if _, err := s.DB().Exec(`ALTER TABLE spans ALTER score TYPE VARCHAR`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	dry, err := s.Replay(ctx, ReplayOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Candidates != 2 || dry.Loaded != 1 || count(t, s, `SELECT count(*) FROM spans_dlq`) != 2 || count(t, s, `SELECT count(*) FROM spans`) != 1 {
		t.Fatalf("dry run: %+v, or it changed the tables", dry)
	}
	res, err := s.Replay(ctx, ReplayOptions{Where: `"offset" IN (0, 1)`})
	if err != nil {
		t.Fatal(err)
	}
	if res.Candidates != 2 || res.Loaded != 1 || len(res.Failing) != 1 {
		t.Fatalf("replay: %+v", res)
	}
	for reason := range res.Failing {
		if !strings.Contains(reason, "NOT NULL") {
			t.Errorf("still failing for %q, want the NOT NULL violation", reason)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM spans WHERE id = 1 AND score = 'high'`); n != 1 {
		t.Error("the fixed row is not in the table")
	}
	if n := count(t, s, `SELECT count(*) FROM spans_dlq WHERE "offset" = 0`); n != 0 {
		t.Error("the fixed row is still in the dead-letter table")
	}
	if n := count(t, s, `SELECT count(*) FROM spans_dlq WHERE "offset" = 1`); n != 1 {
		t.Error("the row still failing left the dead-letter table")
	}
}

// A filter that is not deterministic picks its rows once: each
// dead-letter row ends in exactly one of the tables. Before, the rows were
// selected with one evaluation of the filter and deleted with another, so
// some were replayed and kept, others deleted and never replayed.
func TestReplayEvaluatesTheFilterOnce(t *testing.T) {
	ctx := context.Background()
	opt := testOptions(t.TempDir())
	opt.Table, opt.Transform = "spans", true
	s := openWith(t, opt)
	if _, err := s.DB().Exec(`CREATE TABLE spans (id BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 400
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: n - 1, Records: n}}}
	for i := range n {
		b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "t", Offset: int64(i), Value: fmt.Appendf(nil, `{"id":"x%d"}`, i)}, envelope.ValueText)
	}
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	// The fix: id becomes text.
	if _, err := s.DB().Exec(`ALTER TABLE spans ALTER id TYPE VARCHAR`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Replay(ctx, ReplayOptions{Where: `random() < 0.5`})
	if err != nil {
		t.Fatal(err)
	}
	main, dlq := count(t, s, `SELECT count(*) FROM spans`), count(t, s, `SELECT count(*) FROM spans_dlq`)
	if main != res.Loaded || main+dlq != n {
		t.Errorf("replay said %d loaded; table %d rows, dead letters %d: want them to add up to %d", res.Loaded, main, dlq, n)
	}
	if both := count(t, s, `SELECT count(*) FROM spans_dlq d JOIN spans s ON s.id = 'x' || d."offset"`); both != 0 {
		t.Errorf("%d rows in both tables", both)
	}
}

// In raw mode a replayed row goes through the raw table's own staging (the
// delimited lines of envelope.ValueVerbatim) and keeps its value byte for
// byte, one with line breaks included; a value that is still not JSON
// stays in the dead-letter table.
func TestReplayRawRows(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	values := []string{" {\"a\": 1.50} ", "{\n  \"pretty\": true\r\n}", "not json"}
	for i, v := range values {
		if _, err := s.DB().Exec(`INSERT INTO trace_raw_dlq VALUES ('t', 0, ?, NULL, ?::BLOB, 'an old reason', 'decode', now())`, i, v); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Replay(ctx, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Candidates != 3 || res.Loaded != 2 {
		t.Fatalf("replay: %+v, want 3 candidates and 2 loaded", res)
	}
	for i, v := range values[:2] {
		var got string
		if err := s.DB().QueryRow(`SELECT raw_data::VARCHAR FROM trace_raw WHERE koffset = ?`, i).Scan(&got); err != nil {
			t.Fatalf("offset %d: %v", i, err)
		}
		if got != v {
			t.Errorf("offset %d: raw_data = %q, want %q", i, got, v)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw_dlq WHERE "offset" = 2`); n != 1 {
		t.Errorf("%d dead-letter rows for the value that is not JSON, want 1", n)
	}
}
