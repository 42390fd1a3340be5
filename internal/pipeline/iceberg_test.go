package pipeline_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// The Iceberg sink in the pipeline (2 workers writing Parquet at once,
// rows built from the records): 20,000 traces and the nasty values land
// once each, the values byte for byte, the bad ones as dead letters.
func TestIcebergPipeline(t *testing.T) {
	const n = 20_000
	nasty := []struct {
		value []byte
		raw   bool
	}{
		{[]byte(`{"i":1234567890123456789012345678901234567890,"d":0.123456789012345678901234567890}`), true},
		{[]byte("{\n  \"a\": [\n    1\n  ]\n}\n"), true},
		{[]byte(`{"s":"日本語 😀 \u00e9 \"q\" \\ \n \t \ud800"}`), true}, // text, so even a lone surrogate escape stays
		{[]byte(`{"blob":"` + strings.Repeat("x", 4<<20) + `"}`), true},
		{nil, true},
		{[]byte(`{"a":`), false},
		{[]byte("{\"a\":\"\xff\"}"), false},
	}
	c := newCluster(t, 4)
	cl := producer(t, c, kgo.ProducerBatchMaxBytes(16<<20), kgo.MaxBufferedBytes(64<<20), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i, v := range nasty {
		produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Key: []byte{byte(i)}, Value: v.value})
	}
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 3, nil))
	cfg := testConfig(t, c)
	cfg.Sink.Type = config.SinkIceberg
	cfg.Sink.Iceberg.CommitInterval = config.Duration(200 * time.Millisecond)
	dir := t.TempDir()
	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: cfg.Sink.Table, Log: testLog(t)})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	must(t, s.Prepare(context.Background()))
	held := &heldShare{Sink: s}
	runUntilIdle(t, cfg, held, &pipeline.Stats{})
	// The open writers' memory is a share of max_inflight_bytes.
	if want := int64(cfg.MaxInflightBytes) / 4; held.bytes != want || held.streams != cfg.Workers {
		t.Errorf("the sink holds up to %d bytes for %d streams, want %d for %d", held.bytes, held.streams, want, cfg.Workers)
	}

	var rows, dead int64
	for _, dlq := range []bool{false, true} {
		stored, err := s.Stored(context.Background(), dlq)
		must(t, err)
		for tp, offs := range stored {
			if _, dups := sink.Coverage(offs); dups != 0 {
				t.Errorf("%v: %d rows twice (dead letters: %v)", tp, dups, dlq)
			}
			if dlq {
				dead += offs.Count()
			} else {
				rows += offs.Count()
			}
		}
	}
	wantDead := int64(0)
	for _, v := range nasty {
		if !v.raw {
			wantDead++
		}
	}
	if rows != n+int64(len(nasty))-wantDead || dead != wantDead {
		t.Errorf("%d rows and %d dead letters, want %d and %d", rows, dead, n+int64(len(nasty))-wantDead, wantDead)
	}

	// The values of partition 0's first offsets are the nasty ones.
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(context.Background(), raw)
	must(t, err)
	_, batches, err := tbl.Scan(table.WithSelectedFields("koffset", "kpartition", "raw_data")).ToArrowRecords(context.Background())
	must(t, err)
	got := map[int64]*string{}
	for rec, err := range batches {
		must(t, err)
		o, p, v := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int32), rec.Column(2).(*array.String)
		for i := range int(rec.NumRows()) {
			if p.Value(i) == 0 && o.Value(i) < int64(len(nasty)) {
				var text *string
				if !v.IsNull(i) {
					s := v.Value(i)
					text = &s
				}
				got[o.Value(i)] = text
			}
		}
		rec.Release()
	}
	for i, v := range nasty {
		text, ok := got[int64(i)]
		switch {
		case !v.raw && ok:
			t.Errorf("value %d: in the raw table, want a dead letter", i)
		case v.raw && !ok:
			t.Errorf("value %d: not in the raw table", i)
		case v.raw && v.value == nil && text != nil:
			t.Errorf("value %d: raw_data %q, want NULL", i, *text)
		case v.raw && v.value != nil && (text == nil || *text != string(v.value)):
			t.Errorf("value %d: raw_data not byte for byte", i)
		}
	}
}

// A backlog many times max_inflight_bytes, and a commit interval longer
// than the test: batches are staged as data files, which frees their
// memory, so reading never waits for a commit, and the whole backlog goes
// in with one commit, at idle, once each. Were memory freed only by loads,
// reading would stop at max_inflight_bytes until the interval's commit.
func TestIcebergCommitInterval(t *testing.T) {
	const n, bound = 20_000, 1 << 20
	c := newCluster(t, 4)
	must(t, tracegen.Produce(context.Background(), producer(t, c), topic, n, 3, nil))
	cfg := testConfig(t, c)
	cfg.Sink.Type = config.SinkIceberg
	cfg.Sink.DuckDB = config.Default().Sink.DuckDB // read only with sink.type duckdb
	cfg.Sink.Iceberg.CommitInterval = config.Duration(10 * time.Minute)
	cfg.Load.MaxInterval = config.Default().Load.MaxInterval // Iceberg loads at its commit interval, and refuses another
	cfg.Load.MaxFiles = 1000                                 // only the interval, or idleness, loads
	cfg.Batch.MaxRecords = 500
	cfg.MaxInflightBytes = bound
	must(t, cfg.Validate())
	dir := t.TempDir()
	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: cfg.Sink.Table, Log: testLog(t), GroupWait: 200 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	must(t, s.Prepare(context.Background()))
	budget := pipeline.NewBudget(bound)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must(t, pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{ExitWhenIdle: 300 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, Log: testLog(t), Budget: budget}))
	if ctx.Err() != nil {
		t.Fatal("not idle within 2 minutes: reading waited for a commit")
	}

	stored, err := s.Stored(context.Background(), false)
	must(t, err)
	var rows int64
	for tp, offs := range stored {
		if _, dups := sink.Coverage(offs); dups != 0 {
			t.Errorf("%v: %d rows twice", tp, dups)
		}
		rows += offs.Count()
	}
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(context.Background(), raw)
	must(t, err)
	// One commit at idle; two if the interval's moment (a random phase)
	// fell within the run.
	if snaps := len(tbl.Metadata().Snapshots()); rows != n || snaps > 2 {
		t.Errorf("%d rows in %d snapshots; want %d rows in one or two", rows, snaps, n)
	}
	// A worker's batches of a commit share files: one per worker and
	// commit (all rows are of today), not one per batch (40).
	files, err := s.DataFiles(context.Background(), false)
	must(t, err)
	if snaps := len(tbl.Metadata().Snapshots()); len(files) > cfg.Workers*snaps {
		t.Errorf("%d data files from %d workers in %d commits, want at most one per worker and commit", len(files), cfg.Workers, snaps)
	}
	t.Logf("peak in flight %d KiB of %d, %d data files", budget.Peak()>>10, bound>>10, len(files))
}

// heldShare is a sink telling what the pipeline gave it to hold.
type heldShare struct {
	*iceberg.Sink
	bytes   int64
	streams int
}

func (h *heldShare) HoldUpTo(bytes int64, streams int) {
	h.bytes, h.streams = bytes, streams
	h.Sink.HoldUpTo(bytes, streams)
}

// A worker's batch staged while its load begins is committed with that
// load (the Iceberg sink's load-sized files), so the load reports its dead
// letters too; its own load then reports none. The dead-letter metric
// counts each dead letter once, by its decode reason: none is a row the
// table rejected.
func TestIcebergDeadLettersCommittedEarlyAreCountedOnce(t *testing.T) {
	const n, every = 3000, 10
	c := newCluster(t, 1)
	cl := producer(t, c)
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Appendf(nil, `{"i":%d}`, i)
		if i%every == 0 {
			v = []byte("not json")
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: v})
	}
	produce(t, cl, recs...)
	cfg := testConfig(t, c)
	cfg.Workers = 1
	cfg.Sink.Type = config.SinkIceberg
	cfg.Sink.DuckDB = config.Default().Sink.DuckDB // read only with sink.type duckdb
	cfg.Sink.Iceberg.CommitInterval = config.Duration(100 * time.Millisecond)
	cfg.Load.MaxInterval = config.Default().Load.MaxInterval // Iceberg loads at its commit interval, and refuses another
	cfg.Batch.MaxRecords = 50
	cfg.Load.MaxFiles = 2
	must(t, cfg.Validate())
	dir := t.TempDir()
	// Each load waits for others to share its commit: the worker stages its
	// next batches meanwhile, into the files the load then closes.
	s, err := iceberg.Open(context.Background(), iceberg.Options{Catalog: filepath.Join(dir, "catalog.db"),
		Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake", Table: cfg.Sink.Table, Log: testLog(t),
		GroupWait: 100 * time.Millisecond})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	must(t, s.Prepare(context.Background()))
	m := obs.New()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	must(t, pipeline.Run(ctx, context.Background(), cfg, s, pipeline.RunOptions{ExitWhenIdle: 300 * time.Millisecond,
		RetryBase: 10 * time.Millisecond, Log: testLog(t), Metrics: m}))
	dead, err := s.Stored(context.Background(), true)
	must(t, err)
	var stored int64
	for _, offs := range dead {
		stored += offs.Count()
	}
	if stored != n/every {
		t.Errorf("%d dead letters stored, want %d", stored, n/every)
	}
	if got := testutil.ToFloat64(m.DLQRecords.WithLabelValues("invalid_json")); got != n/every {
		t.Errorf("dead letters counted invalid_json: %v, want %d", got, n/every)
	}
	if got := testutil.ToFloat64(m.DLQRecords.WithLabelValues(envelope.KindRejected)); got != 0 {
		t.Errorf("dead letters counted rejected by the table: %v, want none (each was counted by its decode reason too)", got)
	}
}
