package duckdb

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

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
		if _, err := s.DB().Exec(`INSERT INTO trace_raw_dlq (topic, "partition", "offset", "key", "value", error, stage, add_time) VALUES ('t', 0, ?, NULL, ?::BLOB, 'an old reason', 'decode', now())`, i, v); err != nil {
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

// A dead letter of a value tracelake's validator takes and DuckDB's JSON
// parser refuses (a lone surrogate escape, dead-lettered at stage load)
// stays in the dead-letter table with that reason when replayed, and the
// other dead letters load. Before, the replay inserted the rows without
// the per-row check a load falls back to: DuckDB's error failed the whole
// replay, and no dead letter could be replayed without a --where leaving
// it out.
func TestReplayKeepsAValueDuckDBRefuses(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	if _, err := s.Load(ctx, stage(t, s, valuesBatch(0, `{"ok":1}`, `{"s":"\ud800"}`))); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw_dlq WHERE "offset" = 1 AND stage = 'load'`); n != 1 {
		t.Fatalf("%d dead letters of the refused value, want 1", n)
	}
	if _, err := s.DB().Exec(`INSERT INTO trace_raw_dlq (topic, "partition", "offset", "key", "value", error, stage, add_time) VALUES ('t', 0, 2, NULL, '{"a":1}'::BLOB, 'an old reason', 'decode', now())`); err != nil {
		t.Fatal(err)
	}
	res, err := s.Replay(ctx, ReplayOptions{})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if res.Candidates != 2 || res.Loaded != 1 || res.Failing["DuckDB cannot parse the value as JSON"] != 1 {
		t.Errorf("replay: %+v, want 2 candidates, 1 loaded, 1 DuckDB cannot parse", res)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw WHERE koffset = 2`); n != 1 {
		t.Errorf("%d rows of the replayed value, want 1", n)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw_dlq WHERE "offset" = 1 AND stage = 'load'`); n != 1 {
		t.Errorf("%d dead letters of the refused value, want it kept once", n)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw_dlq`); n != 1 {
		t.Errorf("%d dead letters, want the refused value's alone", n)
	}
}

// headeredRecord is a record with a tenant header, a header whose value is
// not UTF-8, one without a value, and a timestamp: what its dead letter
// must keep for a replay to load the row its first load would have.
func headeredRecord(offset int64, value string) *kgo.Record {
	return &kgo.Record{Topic: "t", Offset: offset, Key: []byte("k"), Value: []byte(value),
		Timestamp: time.Date(2026, 3, 1, 12, 34, 56, 789_000_000, time.UTC),
		Headers: []kgo.RecordHeader{
			{Key: "X-Scope-OrgID", Value: []byte("team-a")},
			{Key: "bin", Value: []byte{0xff, 0xfe}},
			{Key: "none"},
		}}
}

// headeredJSON is headeredRecord's headers as record_metadata holds them.
const headeredJSON = `[{"key":"X-Scope-OrgID","value":"team-a"},{"key":"bin","value":"//4=","value_encoding":"base64"},{"key":"none","value":null}]`

// sameJSON fails the test unless got and want are the same JSON value.
func sameJSON(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: %v in %s", what, err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// A dead letter keeps its record's headers and timestamp, so that a
// replayed raw row's record_metadata is the one its first load would
// have written: a tenant sent as a Kafka header (tenancy.kafka_header)
// stays the row's, and create_time is the record's. Before, the
// dead-letter table held key and value only: the replayed row had no
// headers (its tenant gone) and a create_time of year 1.
func TestReplayKeepsTheRecordsHeaders(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	rec := headeredRecord(0, `{"a":1}`)
	// Dead-lettered as the pipeline does (a check an older release made).
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 0, DLQ: 1}}}
	b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "an older check", envelope.StageDecode)
	loadKeepsHeaders(t, s, b, "trace_raw_dlq")

	res, err := s.Replay(ctx, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loaded != 1 {
		t.Fatalf("replay: %+v, want the row loaded", res)
	}
	var md string
	if err := s.DB().QueryRow(`SELECT record_metadata::VARCHAR FROM trace_raw WHERE koffset = 0`).Scan(&md); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "replayed row's record_metadata", md, string(envelope.AppendMetadata(nil, rec)))
}

// A raw row DuckDB's JSON parser rejects at the load (stage load) keeps
// its record's headers and time in the dead-letter table, read from the
// row's record_metadata.
func TestRejectedRawRowKeepsItsHeaders(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	good, bad := headeredRecord(0, `{"a":1}`), headeredRecord(1, `{"a":`)
	bad.Headers = bad.Headers[:1]
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 1, Records: 2}}}
	// The second value never passed envelope.Check: staged by hand, as
	// a value tracelake's validator accepts and DuckDB's parser does not.
	for i, r := range []*kgo.Record{good, bad} {
		b.Rows = envelope.AppendRawRow(b.Rows, r, &[16]byte{byte(i + 1)}, envelope.ValueVerbatim)
	}
	b.MaxLine = len(b.Rows)
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	var stage, headers, created string
	if err := s.DB().QueryRow(`SELECT stage, headers::VARCHAR, strftime(create_time, '%Y-%m-%dT%H:%M:%S.%g') FROM trace_raw_dlq WHERE "offset" = 1`).Scan(&stage, &headers, &created); err != nil {
		t.Fatalf("the rejected row's dead letter: %v", err)
	}
	if stage != envelope.StageLoad {
		t.Errorf("stage %s, want %s", stage, envelope.StageLoad)
	}
	sameJSON(t, "dead letter's headers", headers, `[{"key":"X-Scope-OrgID","value":"team-a"}]`)
	if created != "2026-03-01T12:34:56.789" {
		t.Errorf("dead letter's create_time = %s, want the record's", created)
	}
}

// In transform mode an object the table rejects keeps its record's headers
// and time in the dead-letter table.
func TestRejectedObjectKeepsItsHeaders(t *testing.T) {
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
	rec := headeredRecord(0, `{"id":"x"}`)
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 0, Records: 1}}}
	b.Rows = envelope.AppendTransformRow(b.Rows, rec, envelope.ValueText)
	loadKeepsHeaders(t, s, b, "spans_dlq")
}

// A dead-letter table made before headers and create_time existed gets
// them at Prepare: its old rows read NULL there and replay as before (no
// headers, the zero time), and new dead letters keep theirs.
func TestOldDeadLetterTableGainsHeaders(t *testing.T) {
	ctx := context.Background()
	s := openWith(t, testOptions(t.TempDir()))
	if _, err := s.DB().Exec(`CREATE TABLE trace_raw_dlq (topic VARCHAR, "partition" INTEGER, "offset" BIGINT, "key" BLOB, "value" BLOB, error VARCHAR, stage VARCHAR, add_time TIMESTAMP);
		INSERT INTO trace_raw_dlq VALUES ('t', 0, 0, NULL, '{"old":1}'::BLOB, 'an old reason', 'decode', now())`); err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatalf("prepare over an old dead-letter table: %v", err)
	}
	rec := headeredRecord(1, `{"new":1}`)
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: 0, Last: 1, DLQ: 1}}}
	b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "an older check", envelope.StageDecode)
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw_dlq WHERE "offset" = 0 AND headers IS NULL AND create_time IS NULL`); n != 1 {
		t.Error("the old row does not read NULL in the added columns")
	}
	res, err := s.Replay(ctx, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loaded != 2 {
		t.Fatalf("replay: %+v, want both rows loaded", res)
	}
	old := &kgo.Record{Topic: "t", Offset: 0}
	for o, r := range []*kgo.Record{old, rec} {
		var md string
		if err := s.DB().QueryRow(`SELECT record_metadata::VARCHAR FROM trace_raw WHERE koffset = ?`, o).Scan(&md); err != nil {
			t.Fatal(err)
		}
		sameJSON(t, fmt.Sprintf("record_metadata at offset %d", o), md, string(envelope.AppendMetadata(nil, r)))
	}
}

// loadKeepsHeaders stages and loads b, whose one dead letter (the
// pipeline's or the load's) is headeredRecord's, and checks that dlq keeps
// the record's headers and timestamp.
func loadKeepsHeaders(t *testing.T, s *Sink, b *sink.Batch, dlq string) {
	t.Helper()
	ctx := context.Background()
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	var headers, created string
	if err := s.DB().QueryRow(fmt.Sprintf(`SELECT headers::VARCHAR, strftime(create_time, '%%Y-%%m-%%dT%%H:%%M:%%S.%%g') FROM %s`, dlq)).Scan(&headers, &created); err != nil {
		t.Fatalf("the dead letter's headers and time: %v", err)
	}
	sameJSON(t, "dead letter's headers", headers, headeredJSON)
	if created != "2026-03-01T12:34:56.789" {
		t.Errorf("dead letter's create_time = %s, want the record's 2026-03-01T12:34:56.789", created)
	}
}
