package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// 100,000 traces over 4 partitions with 2 workers: every offset exactly once,
// a contiguous ledger, offsets committed to the end.
func TestExactlyOnceManyRecords(t *testing.T) {
	const n = 100_000
	c := newCluster(t, 4)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 7, nil))
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	stats := &pipeline.Stats{}
	runUntilIdle(t, cfg, s, stats)

	rep := verifyOK(t, cfg, s)
	rows, dlq := rep.Totals()
	if rows != n || dlq != 0 {
		t.Fatalf("rows = %d, dlq = %d, want %d and 0", rows, dlq, n)
	}
	for _, p := range rep.Partitions {
		if p.Lag != 0 || p.LedgerNext != p.High {
			t.Errorf("partition %d: lag %d, ledger next %d, high %d", p.Partition, p.Lag, p.LedgerNext, p.High)
		}
	}
	if got := queryInt(t, s.DB(), `SELECT count(DISTINCT (kpartition, koffset)) FROM trace_raw`); got != n {
		t.Errorf("distinct (partition, offset) = %d, want %d", got, n)
	}
	if got := queryInt(t, s.DB(), `SELECT count(DISTINCT uuid) FROM trace_raw`); got != n {
		t.Errorf("distinct uuid = %d, want %d", got, n)
	}
	if stats.Loaded.Load() != n || stats.Files.Load() < n/int64(cfg.Batch.MaxRecords) {
		t.Errorf("stats: loaded %d files %d", stats.Loaded.Load(), stats.Files.Load())
	}
}

// Nasty values land where specified: valid JSON of any shape in raw with its
// text kept, anything else in the dead-letter table with its bytes.
func TestNastyInputs(t *testing.T) {
	big := `{"i":1234567890123456789012345678901234567890,"d":0.123456789012345678901234567890}`
	huge := []byte(`{"blob":"` + strings.Repeat("x", 4<<20) + `"}`)
	cases := []struct {
		name  string
		key   []byte
		value []byte
		raw   bool // lands in raw (else DLQ)
	}{
		{"big numbers", nil, []byte(big), true},
		{"pretty-printed", nil, []byte("{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": \"x\"\n}\n"), true},
		{"unicode and escapes", nil, []byte(`{"s":"日本語 😀 \u00e9 \"q\" \\ \n \t"}`), true},
		{"4 MiB value", nil, huge, true},
		{"binary key", []byte{0xff, 0x00, 0xfe}, []byte(`{"k":"bin"}`), true},
		{"empty value", nil, nil, true},
		{"top-level array", nil, []byte(`[1,"two",{"three":3}]`), true},
		{"top-level string", nil, []byte(`"just a string"`), true},
		{"top-level number", nil, []byte(`3.14159265358979323846264338327950288`), true},
		{"duplicate keys", nil, []byte(`{"a":1,"a":2}`), true},
		{"deep nesting", nil, []byte(strings.Repeat("[", 900) + strings.Repeat("]", 900)), true},
		{"too deep", nil, []byte(strings.Repeat("[", 5000) + strings.Repeat("]", 5000)), false},
		{"invalid JSON", nil, []byte(`{"a":`), false},
		{"invalid UTF-8", nil, []byte("{\"a\":\"\xff\xfe\"}"), false},
		{"plain text", nil, []byte("hello world"), false},
		// Valid JSON grammar that DuckDB's parser rejects: the load falls
		// back to a per-row check and dead-letters it with stage "load".
		{"lone surrogate escape", nil, []byte(`{"s":"\ud800"}`), false},
		// Whitespace JSON allows around and between tokens is kept too.
		{"carriage returns", nil, []byte("\t{\"a\":\r1.50}\r"), true},
		{"spaces and tabs around", nil, []byte(" \t {\"a\": 1.50, \"b\": \"\\u001f\"} \t"), true},
		// A header key is bytes on the wire too: not UTF-8, it is kept
		// as base64 (it made every load of its partition fail; found by
		// a review).
		{"binary header key", nil, []byte(`{"h":1}`), true},
	}
	c := newCluster(t, 1)
	cl := producer(t, c, kgo.ProducerBatchMaxBytes(16<<20), kgo.MaxBufferedBytes(64<<20))
	for _, tc := range cases {
		headers := []kgo.RecordHeader{{Key: "case", Value: []byte(tc.name)}}
		if tc.name == "binary header key" {
			headers = append(headers, kgo.RecordHeader{Key: "trace\xff\xfeid", Value: []byte("x")})
		}
		produce(t, cl, &kgo.Record{Topic: topic, Key: tc.key, Value: tc.value, Headers: headers})
	}
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	verifyOK(t, cfg, s)

	for i, tc := range cases {
		inRaw := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset = ?`, i)
		inDLQ := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw_dlq WHERE "offset" = ?`, i)
		if tc.raw && (inRaw != 1 || inDLQ != 0) || !tc.raw && (inRaw != 0 || inDLQ != 1) {
			t.Errorf("%s: %d raw rows, %d DLQ rows; want it in raw=%v", tc.name, inRaw, inDLQ, tc.raw)
			continue
		}
		if tc.raw {
			var text *string
			must(t, s.DB().QueryRow(`SELECT raw_data::VARCHAR FROM trace_raw WHERE koffset = ?`, i).Scan(&text))
			switch {
			case tc.value == nil && text != nil:
				t.Errorf("%s: raw_data = %q, want NULL", tc.name, *text)
			case tc.value != nil && (text == nil || *text != string(tc.value)):
				t.Errorf("%s: raw_data not kept byte-exact", tc.name)
			}
		} else {
			var value []byte
			var reason, stage string
			must(t, s.DB().QueryRow(`SELECT value, error, stage FROM trace_raw_dlq WHERE "offset" = ?`, i).Scan(&value, &reason, &stage))
			wantStage := "decode"
			if tc.name == "lone surrogate escape" {
				wantStage = "load"
			}
			if !bytes.Equal(value, tc.value) || reason == "" || stage != wantStage {
				t.Errorf("%s: DLQ row value equal=%v reason=%q stage=%q", tc.name, bytes.Equal(value, tc.value), reason, stage)
			}
		}
	}
	var key, enc string
	must(t, s.DB().QueryRow(`SELECT record_metadata->>'key', record_metadata->>'key_encoding' FROM trace_raw WHERE koffset = 4`).Scan(&key, &enc))
	if key != "/wD+" || enc != "base64" {
		t.Errorf("binary key stored as %q (%s), want base64 /wD+", key, enc)
	}
	var header string
	must(t, s.DB().QueryRow(`SELECT record_metadata->'headers'->0->>'value' FROM trace_raw WHERE koffset = 0`).Scan(&header))
	if header != "big numbers" {
		t.Errorf("header = %q", header)
	}
	must(t, s.DB().QueryRow(`SELECT record_metadata->'headers'->1->>'key', record_metadata->'headers'->1->>'key_encoding' FROM trace_raw WHERE koffset = ?`,
		len(cases)-1).Scan(&key, &enc))
	if key != "dHJhY2X//mlk" || enc != "base64" {
		t.Errorf("binary header key stored as %q (%s), want base64 dHJhY2X//mlk", key, enc)
	}
}

// flakySink fails the first n loads, as a database outage would.
type flakySink struct {
	sink.Sink
	failures atomic.Int64
	calls    atomic.Int64
}

func (f *flakySink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	f.calls.Add(1)
	if f.failures.Add(-1) >= 0 {
		return sink.Loaded{}, errors.New("injected: database unavailable")
	}
	return f.Sink.Load(ctx, files)
}

// A load failing mid-stream is retried with the same files: nothing skipped,
// nothing doubled, and no later load commits past it.
func TestLoadFailureRetried(t *testing.T) {
	const n = 20_000
	c := newCluster(t, 3)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 3, nil))
	cfg := testConfig(t, c)
	cfg.Batch.MaxRecords = 1000
	cfg.Load.MaxFiles = 2
	s := openSink(t, cfg)
	flaky := &flakySink{Sink: s}
	flaky.failures.Store(5)
	stats := &pipeline.Stats{}
	runUntilIdle(t, cfg, flaky, stats)

	rep := verifyOK(t, cfg, s)
	if rows, _ := rep.Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	if stats.Retries.Load() < 5 {
		t.Errorf("retries = %d, want >= 5", stats.Retries.Load())
	}
}

// A new group on the same sink (offsets reset, committed offsets lost)
// resumes at the ledger: nothing is loaded twice, and the group's committed
// offsets are brought up to the ledger.
func TestResumeFromLedger(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	for i := range 10 {
		produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	cfg := testConfig(t, c)
	s := openSink(t, cfg)
	runUntilIdle(t, cfg, s, &pipeline.Stats{})

	cfg.Kafka.Group = "another-group"
	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 10 {
		t.Fatalf("rows = %d, want 10", n)
	}
	verifyOK(t, cfg, s)
}

// Partitions added while tracelake runs are consumed.
func TestPartitionsAddedWhileRunning(t *testing.T) {
	c := newCluster(t, 2)
	cl := producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cfg := testConfig(t, c)
	cfg.Kafka.MetadataRefresh = 1e9 // 1s
	s := openSink(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t)})
	}()
	for p := range int32(2) {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: []byte(`{"before":true}`)})
	}
	waitRows(t, s, 2, done)

	adm := kadm.NewClient(cl)
	if _, err := adm.CreatePartitions(context.Background(), 2, topic); err != nil {
		t.Fatal(err)
	}
	cl = producer(t, c, kgo.RecordPartitioner(kgo.ManualPartitioner())) // sees 4 partitions
	for p := range int32(4) {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: p, Value: []byte(`{"after":true}`)})
	}
	waitRows(t, s, 6, done)
	cancel()
	must(t, <-done)
	for p := range 4 {
		if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE kpartition = ?`, p); n < 1 {
			t.Errorf("partition %d: no rows", p)
		}
	}
}

// waitRows waits until the raw table has want rows, failing after 60s or
// if the pipeline ends.
func waitRows(t *testing.T, s *duckdb.Sink, want int64, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-done:
			t.Fatalf("pipeline ended early: %v", err)
		default:
		}
		n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`)
		if n >= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("raw table has %d rows after 60s, want %d", n, want)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not synchronising
	}
}

// stageFailSink cannot stage the batch starting at offset failAt.
type stageFailSink struct {
	sink.Sink
	failAt int64
}

func (f *stageFailSink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	if b.Ranges[0].First == f.failAt {
		return sink.File{}, errors.New("injected: disk full")
	}
	return f.Sink.Stage(ctx, b)
}

// Regression: a batch that could not be staged when shutdown came was
// dropped, and the batch after it was still loaded and committed, skipping
// the dropped records for good. Now nothing after a failed batch loads.
func TestStageFailureAtShutdownLosesNothing(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	for i := range 3000 {
		produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = 1000
	cfg.Load.MaxFiles = 1
	s := openSink(t, cfg)
	broken := &stageFailSink{Sink: s, failAt: 1000}
	stats := &pipeline.Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, broken, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats})
	}()
	waitRows(t, s, 1000, done)
	for stats.Retries.Load() < 3 {
		time.Sleep(10 * time.Millisecond) // awaiting a condition: the stage retries
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("run ended without reporting the unstaged batch")
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 1000 {
		t.Fatalf("rows after the failed shutdown = %d, want 1000 (nothing past the failed batch)", n)
	}
	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	rep := verifyOK(t, cfg, s)
	if rows, _ := rep.Totals(); rows != 3000 {
		t.Fatalf("rows = %d, want 3000", rows)
	}
}

// transformSink opens a transform-mode sink into table after running ddl.
func transformSink(t *testing.T, c *kfake.Cluster, table string, ddl ...string) (*config.Config, *duckdb.Sink) {
	t.Helper()
	cfg := testConfig(t, c)
	cfg.Mode = config.ModeTransform
	cfg.Sink.Table = table
	s, err := duckdb.Open(duckdb.Options{Path: cfg.Sink.DuckDB.Path, StageDir: cfg.StageDir(), Table: table, Transform: true, Log: testLog(t)})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	for _, q := range ddl {
		_, err := s.DB().Exec(q)
		must(t, err)
	}
	must(t, s.Prepare(context.Background()))
	return cfg, s
}

// Transform mode: each object becomes a row of the user's table by field
// name; missing fields take the column default; objects the table rejects go
// to the dead-letter table with DuckDB's error; the rest load.
func TestTransformMode(t *testing.T) {
	c := newCluster(t, 1)
	cfg, s := transformSink(t, c, "spans", `CREATE TABLE spans (id BIGINT PRIMARY KEY, name VARCHAR, score DECIMAL(10,2), tags VARCHAR[],
		meta JSON, status VARCHAR DEFAULT 'new', "odd ""name""" INTEGER)`)

	values := []string{
		`{"id":1,"name":"full","score":12.5,"tags":["a","b"],"meta":{"k":[1,2]},"status":"done","odd \"name\"":7}`,
		`{"id":2,"extra":"ignored"}`,                 // missing fields: defaults
		`{"id":3,"score":"not a number"}`,            // rejected: cast
		`{"name":"no id"}`,                           // rejected: NOT NULL
		`[1,2,3]`,                                    // not an object: decode DLQ
		"{\n  \"id\": 4,\n  \"name\": \"pretty\"\n}", // pretty-printed
		`{"id":5,"name":null,"tags":"oops"}`,         // rejected: tags not a list
		`{"id":1,"name":"again"}`,                    // rejected: key earlier in this load
	}
	cl := producer(t, c)
	for _, v := range values {
		produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(v)})
	}
	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	verifyOK(t, cfg, s)

	if n := queryInt(t, s.DB(), `SELECT count(*) FROM spans`); n != 3 {
		t.Fatalf("rows = %d, want 3", n)
	}
	var name, status, meta string
	var score float64
	var odd int
	must(t, s.DB().QueryRow(`SELECT name, score::DOUBLE, status, meta::VARCHAR, "odd ""name""" FROM spans WHERE id = 1`).Scan(&name, &score, &status, &meta, &odd))
	if name != "full" || score != 12.5 || status != "done" || meta != `{"k":[1,2]}` || odd != 7 {
		t.Errorf("row 1 = %q %v %q %q %d", name, score, status, meta, odd)
	}
	must(t, s.DB().QueryRow(`SELECT status FROM spans WHERE id = 2`).Scan(&status))
	if status != "new" {
		t.Errorf("missing field did not take the default: status = %q", status)
	}
	want := map[int64]string{2: "Could not convert", 3: "NOT NULL constraint failed: spans.id", 4: "not a JSON object", 6: "tags",
		7: "duplicate key (id) violates PRIMARY KEY constraint"}
	for off, frag := range want {
		var reason string
		must(t, s.DB().QueryRow(`SELECT error FROM spans_dlq WHERE "offset" = ?`, off).Scan(&reason))
		t.Logf("offset %d: %s", off, reason)
		if !strings.Contains(reason, frag) {
			t.Errorf("offset %d: DLQ reason %q lacks %q", off, reason, frag)
		}
	}
	if n := queryInt(t, s.DB(), `SELECT sum(records) FROM spans_ledger`); n != 3 {
		t.Errorf("ledger records = %d, want 3", n)
	}

	// A key already in the table is rejected in a later load; the load goes on.
	produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(`{"id":2,"name":"dup"}`)},
		&kgo.Record{Topic: topic, Value: []byte(`{"id":9,"name":"new"}`)})
	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	verifyOK(t, cfg, s)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM spans`); n != 4 {
		t.Errorf("rows = %d, want 4", n)
	}
	var reason string
	must(t, s.DB().QueryRow(`SELECT error FROM spans_dlq WHERE "offset" = 8`).Scan(&reason))
	if !strings.Contains(reason, "duplicate key (id)") {
		t.Errorf("existing key: DLQ reason %q", reason)
	}
}

// Rows failing a CHECK or a FOREIGN KEY of the user's table go to the
// dead-letter table with the constraint named; the rest load (before, one
// such row failed every load forever).
func TestTransformCheckAndForeignKey(t *testing.T) {
	c := newCluster(t, 1)
	cfg, s := transformSink(t, c, "orders",
		`CREATE TABLE customers (id INTEGER PRIMARY KEY)`,
		`INSERT INTO customers VALUES (1), (2)`,
		`CREATE TABLE orders (id INTEGER, amount DECIMAL(10,2) CHECK (amount > 0), "value" VARCHAR,
			customer INTEGER REFERENCES customers(id), CHECK (id < 100 OR "value" IS NOT NULL))`)
	cl := producer(t, c)
	for _, v := range []string{
		`{"id":1,"amount":5,"customer":1}`,
		`{"id":2,"amount":-5,"customer":1}`,  // CHECK amount > 0
		`{"id":3,"amount":5,"customer":9}`,   // no customer 9
		`{"id":200,"amount":1}`,              // table CHECK over two columns
		`{"id":201,"amount":1,"value":"ok"}`, // passes it
		`{"id":4,"customer":null}`,           // NULL passes CHECK and FK
	} {
		produce(t, cl, &kgo.Record{Topic: topic, Value: []byte(v)})
	}
	runUntilIdle(t, cfg, s, &pipeline.Stats{})
	verifyOK(t, cfg, s)
	if got := queryInt(t, s.DB(), `SELECT count(*) FROM orders WHERE id IN (1, 201, 4)`); got != 3 || queryInt(t, s.DB(), `SELECT count(*) FROM orders`) != 3 {
		t.Errorf("loaded rows wrong: %d of ids 1, 201, 4", got)
	}
	for off, frag := range map[int64]string{1: "CHECK constraint failed on orders: (amount > 0)", 2: "FOREIGN KEY (customer) REFERENCES customers(id)",
		3: `CHECK constraint failed on orders: ((id < 100) OR ("value" IS NOT NULL))`} {
		var reason string
		must(t, s.DB().QueryRow(`SELECT error FROM orders_dlq WHERE "offset" = ?`, off).Scan(&reason))
		if !strings.Contains(reason, frag) {
			t.Errorf("offset %d: DLQ reason %q lacks %q", off, reason, frag)
		}
	}
}

// kafka.topic_regex consumes every matching topic, including one created
// while running; other topics are left alone.
func TestTopicRegex(t *testing.T) {
	c := newCluster(t, 1) // creates llm-traces, which does not match
	cl := producer(t, c)
	adm := kadm.NewClient(cl)
	_, err := adm.CreateTopic(context.Background(), 2, -1, nil, "traces-a")
	must(t, err)
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = nil
	cfg.Kafka.TopicRegex = "^traces-"
	cfg.Kafka.MetadataRefresh = 1e9 // 1s
	must(t, cfg.Validate())
	s := openSink(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{RetryBase: 10 * time.Millisecond, Log: testLog(t)})
	}()
	produce(t, cl, &kgo.Record{Topic: "traces-a", Value: []byte(`{"a":1}`)}, &kgo.Record{Topic: topic, Value: []byte(`{"skip":1}`)})
	waitRows(t, s, 1, done)
	_, err = adm.CreateTopic(context.Background(), 1, -1, nil, "traces-b")
	must(t, err)
	produce(t, cl, &kgo.Record{Topic: "traces-b", Value: []byte(`{"b":1}`)})
	waitRows(t, s, 2, done)
	cancel()
	must(t, <-done)
	var topics string
	must(t, s.DB().QueryRow(`SELECT string_agg(DISTINCT record_metadata->>'topic', ',' ORDER BY record_metadata->>'topic') FROM trace_raw`).Scan(&topics))
	if topics != "traces-a,traces-b" {
		t.Errorf("topics loaded = %q, want traces-a,traces-b", topics)
	}
	verifyOK(t, cfg, s)
}

// A listed topic that does not exist (not created yet, or deleted while
// tracelake was stopped) holds no record to load: --exit-when-idle exits
// once the others are loaded. Before, Kafka's answer for it
// (UNKNOWN_TOPIC_OR_PARTITION) failed every idle check and the run never
// exited, where a topic_regex run, which lists only existing topics, did.
func TestIdleExitWithAListedTopicNotCreated(t *testing.T) {
	c := newCluster(t, 1)
	produceNumbers(t, producer(t, c), 0, 10)
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = []string{topic, "not-created-yet"}
	s := openSink(t, cfg)
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw`); n != 10 {
		t.Errorf("%d rows loaded, want 10", n)
	}
	verifyOK(t, cfg, s)
}

// start_offset latest with a listed topic that does not exist yet: the
// run starts (the topic's partitions, once created, start at their
// beginning, as any partition created while running). Before, listing
// the ends failed on it and the run refused to start.
func TestStartOffsetLatestWithAListedTopicNotCreated(t *testing.T) {
	c := newCluster(t, 1)
	cl := producer(t, c)
	produceNumbers(t, cl, 0, 10) // before the start: skipped
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = []string{topic, "not-created-yet"}
	cfg.Kafka.StartOffset = "latest"
	s := openSink(t, cfg)
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	produceNumbers(t, cl, 10, 15)
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset >= 10`); n != 5 {
		t.Errorf("%d rows of the records produced after the start, want 5", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset < 10`); n != 0 {
		t.Errorf("%d rows of the records produced before the start, want none (latest)", n)
	}
}

// topic_regex consumes every matching topic Kafka does not flag internal,
// one named with a leading "__" too (franz-go's regex consumer skips only
// the flagged ones): start_offset latest skips its records from before the
// start as any other's. Before, the end offsets were listed for topics
// without a leading "__" only, so that topic was read from its beginning,
// and verify and exit-when-idle did not see it.
func TestTopicRegexWithALeadingUnderscoreStartsLatest(t *testing.T) {
	const under = "__events"
	c := kafkatest.Cluster(t, 1, under)
	cl := producer(t, c)
	for i := range 10 { // before the start: skipped
		produce(t, cl, &kgo.Record{Topic: under, Value: fmt.Appendf(nil, `{"i": %d}`, i)})
	}
	cfg := testConfig(t, c)
	cfg.Kafka.Topics = nil
	cfg.Kafka.TopicRegex = "^__ev"
	cfg.Kafka.StartOffset = "latest"
	must(t, cfg.Validate())
	s := openSink(t, cfg)
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	produce(t, cl, &kgo.Record{Topic: under, Value: []byte(`{"after": 1}`)})
	runIdleWithin(t, cfg, s, nil, 20*time.Second)
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset < 10`); n != 0 {
		t.Errorf("%d rows of the records produced before the start, want none (latest)", n)
	}
	if n := queryInt(t, s.DB(), `SELECT count(*) FROM trace_raw WHERE koffset = 10`); n != 1 {
		t.Errorf("%d rows of the record produced after the start, want 1", n)
	}
	if rep := verifyReport(t, cfg, s); len(rep.Partitions) != 1 || rep.Partitions[0].High != 11 {
		t.Errorf("verify saw %+v, want %s/0 with Kafka's high watermark 11", rep.Partitions, under)
	}
}

// reorderSink makes the first batch's stage finish only after the
// second's, and records how many stages ran at once. It stages like a
// remote sink (sink.ConcurrentStager).
type reorderSink struct {
	sink.Sink
	calls, running, most atomic.Int64
	second               chan struct{}
}

func (r *reorderSink) StageAhead() int { return 4 }

func (r *reorderSink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	n := r.calls.Add(1)
	now := r.running.Add(1)
	defer r.running.Add(-1)
	for m := r.most.Load(); now > m && !r.most.CompareAndSwap(m, now); m = r.most.Load() {
	}
	if n == 1 {
		// Bounded, so that a pipeline staging one batch at a time fails
		// the assertion below instead of hanging.
		select {
		case <-r.second:
		case <-time.After(10 * time.Second):
		}
	}
	f, err := r.Sink.Stage(ctx, b)
	if n == 2 {
		close(r.second)
	}
	return f, err
}

// Batches of a remote sink stage concurrently (uploads overlap), yet reach
// the loader in the order they were read: a later file loading first would make the
// ledger fence skip the earlier one's records.
func TestStagesOverlapAndLoadInOrder(t *testing.T) {
	const n = 5000
	c := newCluster(t, 1)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 9, nil))
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = 500
	cfg.Load.MaxFiles = 1
	s := openSink(t, cfg)
	rs := &reorderSink{Sink: s, second: make(chan struct{})}
	runUntilIdle(t, cfg, rs, &pipeline.Stats{})
	if rs.most.Load() < 2 {
		t.Errorf("at most %d stage at once; want batches staged concurrently", rs.most.Load())
	}
	rep := verifyOK(t, cfg, s)
	if rows, _ := rep.Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
}

// gatedSink holds the first load until release is closed and records the
// offsets each staged batch covers.
type gatedSink struct {
	sink.Sink
	entered, release chan struct{}
	loads            atomic.Int64
	mu               sync.Mutex
	batchSizes       []int64
}

func (g *gatedSink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	var n int64
	for _, r := range b.Ranges {
		n += r.Last - r.First + 1
	}
	g.mu.Lock()
	g.batchSizes = append(g.batchSizes, n)
	g.mu.Unlock()
	return g.Sink.Stage(ctx, b)
}

func (g *gatedSink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	if g.loads.Add(1) == 1 {
		close(g.entered)
		<-g.release
	}
	return g.Sink.Load(ctx, files)
}

// A worker blocked behind a slow load reads nothing for longer than the
// exit-when-idle period, yet it is not idle: records are waiting in Kafka.
// Its open batch must not be closed early (that would only make more,
// smaller files), so every batch is full.
func TestBlockedWorkerIsNotIdle(t *testing.T) {
	const perBatch, batches = 700, 30
	c := newCluster(t, 1)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, perBatch*batches, 5, nil))
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = perBatch
	cfg.Batch.MaxInterval = config.Duration(time.Hour) // only full batches close, and the last flush
	cfg.Load.MaxFiles = 1
	s := openSink(t, cfg)
	g := &gatedSink{Sink: s, entered: make(chan struct{}), release: make(chan struct{})}
	stats := &pipeline.Stats{}
	idle := 100 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Run(context.Background(), context.Background(), cfg, g, pipeline.RunOptions{
			ExitWhenIdle: idle, RetryBase: 10 * time.Millisecond, Log: testLog(t), Stats: stats,
		})
	}()
	select {
	case <-g.entered:
	case <-time.After(time.Minute):
		t.Fatal("no load started within a minute")
	}
	// What is under test is time passing: the worker stays blocked for many
	// idle periods while the idle check runs.
	time.Sleep(10 * idle)
	if got := stats.Consumed.Load(); got >= perBatch*batches {
		t.Fatalf("the worker read all %d records before blocking; the test needs a backlog left in Kafka", got)
	}
	close(g.release)
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(time.Minute):
		t.Fatal("pipeline did not become idle within a minute of the release")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, n := range g.batchSizes {
		if n != perBatch {
			t.Errorf("batch %d covers %d offsets, want %d (closed early while blocked): all %v", i, n, perBatch, g.batchSizes)
			break
		}
	}
	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != perBatch*batches {
		t.Fatalf("rows = %d, want %d", rows, perBatch*batches)
	}
}

// A worker whose fetches are slow (a busy broker, a slow network) polls
// nothing for longer than the exit-when-idle period while Kafka still holds
// its records; it is not idle either, and its batches stay full. Before, a
// poll that returned nothing counted as idle, and under a loaded CI machine
// the idle flush cut batches short.
func TestSlowFetchesAreNotIdle(t *testing.T) {
	const perBatch, batches = 500, 8
	c := newCluster(t, 1)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, perBatch*batches, 5, nil))
	// Every fetch waits 400ms: longer than the idle period and than a
	// poll's wait.
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { time.Sleep(400 * time.Millisecond) })
		return nil, nil, false
	})
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Batch.MaxRecords = perBatch
	cfg.Batch.MaxInterval = config.Duration(time.Hour) // only full batches close, and the last flush
	cfg.Kafka.FetchMaxBytes = 1 << 20                  // several fetches
	s := openSink(t, cfg)
	g := &gatedSink{Sink: s, entered: make(chan struct{}), release: make(chan struct{})}
	close(g.release)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must(t, pipeline.Run(ctx, context.Background(), cfg, g, pipeline.RunOptions{
		ExitWhenIdle: 100 * time.Millisecond, RetryBase: 10 * time.Millisecond, Log: testLog(t),
	}))
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.batchSizes) < 2 {
		t.Fatalf("%d batches staged, want %d", len(g.batchSizes), batches)
	}
	for i, n := range g.batchSizes[:len(g.batchSizes)-1] {
		if n != perBatch {
			t.Errorf("batch %d covers %d offsets, want %d (closed early while fetches were slow): all %v", i, n, perBatch, g.batchSizes)
			break
		}
	}
	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != perBatch*batches {
		t.Fatalf("rows = %d, want %d", rows, perBatch*batches)
	}
}

// loadSizeSink records the most files and staged bytes of one load and the
// records (rows and dead letters) of each; with delay its loads take that
// much longer, as a busy database's do.
type loadSizeSink struct {
	sink.Sink
	delay             time.Duration
	mu                sync.Mutex
	maxFiles, maxSize int64
	records           []int64 // of each load
}

func (l *loadSizeSink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	time.Sleep(l.delay)
	var size, records int64
	for _, f := range files {
		size += f.Bytes
		for _, r := range f.Ranges {
			records += r.Records + r.DLQ
		}
	}
	l.mu.Lock()
	l.maxFiles, l.maxSize = max(l.maxFiles, int64(len(files))), max(l.maxSize, size)
	l.records = append(l.records, records)
	l.mu.Unlock()
	return l.Sink.Load(ctx, files)
}

// A backlog is loaded in loads of about load.max_bytes, not of
// load.max_files batches: the rows one DuckDB load holds in memory are
// bounded in bytes whatever the batch size.
func TestLoadsSizedInBytes(t *testing.T) {
	const n = 20_000
	c := newCluster(t, 2)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 2, nil))
	cfg := testConfig(t, c)
	cfg.Batch.MaxRecords = 1000 // ~0.9 MB of spans a batch
	// Batches close full (a worker's first fetch is small until it knows
	// how the records compress, and a slow machine's batch interval then
	// closed a batch of a hundred records: a load with it rightly took a
	// fourth batch to reach 2 MiB).
	cfg.Batch.MaxInterval = config.Duration(time.Minute)
	cfg.Load.MaxFiles = 100
	cfg.Load.MaxInterval = config.Duration(time.Minute) // only size and idleness load
	cfg.Load.MaxBytes = 2 << 20
	s := openSink(t, cfg)
	sizes := &loadSizeSink{Sink: s}
	runUntilIdle(t, cfg, sizes, &pipeline.Stats{})

	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	// A load closes at the batch that reaches 2 MiB of messages: three
	// batches of ~0.9 MB at most.
	if sizes.maxFiles > 3 {
		t.Errorf("a load took %d batches (%d staged bytes), want at most 3 for load.max_bytes 2MiB", sizes.maxFiles, sizes.maxSize)
	}
}

// bufferCounter notes the buffer each staged batch's rows came in.
type bufferCounter struct {
	mu      sync.Mutex
	buffers map[*byte]int // rows buffer → batches staged in it
}

func (c *bufferCounter) note(rows []byte) {
	c.mu.Lock()
	c.buffers[unsafe.SliceData(rows)]++
	c.mu.Unlock()
}

// releasingSink is a sink.RowsReleaser that notes the buffer each batch's
// rows came in.
type releasingSink struct {
	sink.Sink
	bufferCounter
}

func (r *releasingSink) ReleasesRows() {}

func (r *releasingSink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	r.note(b.Rows)
	return r.Sink.Stage(ctx, b)
}

// keepingSink is a sink that reads each batch's rows until its load
// ends (as Databend does): it notes the rows' buffer and a hash of them at
// staging and counts the files whose rows changed before their load.
type keepingSink struct {
	sink.Sink
	bufferCounter
	kept    map[string]keptRows // by file name, until loaded
	changed int
}

type keptRows struct {
	rows []byte
	sum  uint64
}

func rowsHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

func (k *keepingSink) Stage(ctx context.Context, b *sink.Batch) (sink.File, error) {
	f, err := k.Sink.Stage(ctx, b)
	if err == nil {
		k.note(b.Rows)
		k.mu.Lock()
		k.kept[f.Name] = keptRows{b.Rows, rowsHash(b.Rows)}
		k.mu.Unlock()
	}
	return f, err
}

func (k *keepingSink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	k.mu.Lock()
	for _, f := range files {
		if r, ok := k.kept[f.Name]; ok && rowsHash(r.rows) != r.sum {
			k.changed++
		}
		delete(k.kept, f.Name)
	}
	k.mu.Unlock()
	return k.Sink.Load(ctx, files)
}

// runReusing ingests 20,000 records in batches of 500 into the sink wrap
// makes of a DuckDB sink, checks that every record landed once and that
// batches shared buffers. Polls take fewer records than a batch, as with a
// backlog at the defaults (10,000 a batch; a poll takes a worker's share
// of what the budget has left), so buffers come back between polls.
func runReusing(t *testing.T, wrap func(sink.Sink) (sink.Sink, *bufferCounter)) {
	t.Helper()
	const n = 20_000
	c := newCluster(t, 2)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 2, nil))
	cfg := testConfig(t, c)
	cfg.Batch.MaxRecords = 500
	cfg.MaxInflightBytes = 1 << 20
	s := openSink(t, cfg)
	wrapped, counter := wrap(s)
	runUntilIdle(t, cfg, wrapped, &pipeline.Stats{})

	if rows, _ := verifyOK(t, cfg, s).Totals(); rows != n {
		t.Fatalf("rows = %d, want %d", rows, n)
	}
	var batches int
	for _, k := range counter.buffers {
		batches += k
	}
	// 40 batches or more in 2 workers, each in a buffer of its own
	// without reuse. With it a worker needs a few (open, staging,
	// waiting) however many batches it makes; how many batches share one
	// depends on timing (polls of several batches allocate), so only a
	// clear share is asked: a quarter of the batches in reused buffers.
	if batches < 40 || len(counter.buffers) > batches*3/4 {
		t.Errorf("%d batches staged in %d buffers: want several batches per buffer", batches, len(counter.buffers))
	}
}

// With a sink that keeps no rows after staging, a worker writes its next
// batches into the buffers of the batches it staged, instead of
// allocating a batch's worth of bytes for each; every record still lands
// once.
func TestStagedBuffersReused(t *testing.T) {
	runReusing(t, func(s sink.Sink) (sink.Sink, *bufferCounter) {
		rs := &releasingSink{Sink: s, bufferCounter: bufferCounter{buffers: map[*byte]int{}}}
		return rs, &rs.bufferCounter
	})
}

// With a sink that reads the rows until the load ends, a worker reuses
// the buffers of loaded batches, and never one whose load is to come.
func TestLoadedBuffersReused(t *testing.T) {
	var ks *keepingSink
	runReusing(t, func(s sink.Sink) (sink.Sink, *bufferCounter) {
		ks = &keepingSink{Sink: s, bufferCounter: bufferCounter{buffers: map[*byte]int{}}, kept: map[string]keptRows{}}
		return ks, &ks.bufferCounter
	})
	if ks.changed > 0 {
		t.Errorf("%d staged batches' rows were overwritten before their load", ks.changed)
	}
}
