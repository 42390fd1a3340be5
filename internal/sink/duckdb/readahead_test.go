package duckdb

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// valuesBatch stages values at offsets first… of partition 0 as raw rows.
func valuesBatch(first int64, values ...string) *sink.Batch {
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: first + int64(len(values)) - 1}}}
	ids := envelope.NewUUIDs()
	var id [16]byte
	for i, v := range values {
		ids.Next(&id)
		start := len(b.Rows)
		b.Rows = envelope.AppendRawRow(b.Rows, &kgo.Record{Topic: "t", Offset: first + int64(i), Value: []byte(v), Timestamp: time.Now()}, &id, envelope.ValueVerbatim)
		b.MaxLine = max(b.MaxLine, len(b.Rows)-start)
		b.Ranges[0].Records++
	}
	return b
}

func stage(t *testing.T, s *Sink, bs ...*sink.Batch) []sink.File {
	t.Helper()
	var files []sink.File
	for _, b := range bs {
		f, err := s.Stage(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// removeStaged deletes the files' staged rows: a load that still reads
// them fails.
func removeStaged(t *testing.T, files []sink.File) {
	t.Helper()
	for _, f := range files {
		if err := os.Remove(f.RowsPath); err != nil {
			t.Fatal(err)
		}
	}
}

// loadWhileLocked loads files while another load holds the lock, as
// when it commits: once the load read its files ahead, their staged rows
// are removed and the lock given up, so a load that reads them again
// fails. It fails the test if the load reads nothing ahead.
func loadWhileLocked(t *testing.T, s *Sink, files []sink.File) sink.Loaded {
	t.Helper()
	read := make(chan struct{})
	s.readAheadDone = func() { close(read) }
	defer func() { s.readAheadDone = nil }()
	s.loadMu.Lock()
	type result struct {
		loaded sink.Loaded
		err    error
	}
	done := make(chan result, 1)
	go func() {
		l, err := s.Load(context.Background(), files)
		done <- result{l, err}
	}()
	select {
	case <-read:
	case <-time.After(30 * time.Second):
		s.loadMu.Unlock()
		t.Fatal("the waiting load read nothing ahead")
	}
	removeStaged(t, files)
	s.loadMu.Unlock()
	r := <-done
	if r.err != nil {
		t.Fatalf("load: %v", r.err)
	}
	return r.loaded
}

// A load waiting for another load's commit reads its files meanwhile and
// inserts the rows from what it read, byte for byte; the files are not
// read again under the lock (here they are gone by then). Fails when the
// waiting load reads nothing ahead, or reads its files again.
func TestLoadWaitingForTheLockReadsAhead(t *testing.T) {
	s := prepared(t, false)
	values := []string{`{"a":1}`, "{\n  \"pretty\": [1, 2]\n}", `{"n":12345678901234567890123456789012345678901}`, ` {"spaced": "\u001f"} `}
	files := stage(t, s, valuesBatch(0, values[:2]...), valuesBatch(2, values[2:]...))
	loaded := loadWhileLocked(t, s, files)
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].First != 0 || loaded.Ranges[0].Last != 3 || loaded.Ranges[0].Records != 4 {
		t.Errorf("loaded %+v, want 0..3 with 4 records", loaded.Ranges)
	}
	rows, err := s.DB().Query(`SELECT koffset, raw_data::VARCHAR FROM trace_raw ORDER BY koffset`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for ; rows.Next(); n++ {
		var o int64
		var v string
		if err := rows.Scan(&o, &v); err != nil {
			t.Fatal(err)
		}
		if o != int64(n) || v != values[n] {
			t.Errorf("row %d: offset %d value %q, want %q", n, o, v, values[n])
		}
	}
	if n != len(values) {
		t.Errorf("%d rows, want %d", n, len(values))
	}
}

// Rows read ahead pass the fence as rows read from the files do: those of
// a file the ledger covers whole (left out of the plan) and of the part
// of a file a load before covers are not inserted again. Fails when the
// read-ahead rows are inserted unfiltered.
func TestReadAheadRowsAreFenced(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	mustLoad(t, s, batch(0, 99))
	files := stage(t, s, batch(0, 49), batch(50, 149), batch(150, 199))
	ahead := s.readAhead(ctx, files)
	if ahead == nil {
		t.Fatal("nothing read ahead")
	}
	defer ahead.close()
	removeStaged(t, files)
	s.loadMu.Lock()
	loaded, err := s.loadHalving(ctx, files, nil, ahead)
	s.loadMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].First != 100 || loaded.Ranges[0].Last != 199 || loaded.Ranges[0].Records != 100 {
		t.Errorf("loaded %+v, want 100..199 with 100 records", loaded.Ranges)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw`); n != 200 {
		t.Errorf("rows = %d, want 200", n)
	}
	if n := count(t, s, `SELECT count(DISTINCT koffset) FROM trace_raw`); n != 200 {
		t.Errorf("distinct offsets = %d, want 200", n)
	}
}

// A load whose files cannot be read ahead (a lone surrogate escape:
// valid JSON that DuckDB's parser rejects) reads them itself and sends
// the value to the dead-letter table, as without reading ahead.
func TestReadAheadFailureFallsBack(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	files := stage(t, s, valuesBatch(0, `{"ok":1}`, `{"s":"\ud800"}`))
	if ahead := s.readAhead(ctx, files); ahead != nil {
		ahead.close()
		t.Fatal("read ahead a value DuckDB's JSON parser rejects")
	}
	read := make(chan struct{})
	s.readAheadDone = func() { close(read) }
	s.loadMu.Lock()
	done := make(chan error, 1)
	go func() { _, err := s.Load(ctx, files); done <- err }()
	<-read // nothing was read: the files stay
	s.loadMu.Unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw`); n != 1 {
		t.Errorf("rows = %d, want 1", n)
	}
	if n := count(t, s, `SELECT count(*) FROM trace_raw_dlq`); n != 1 {
		t.Errorf("dead-letter rows = %d, want 1", n)
	}
}

// Loads of large values are not read ahead (readAheadMaxLine): they are
// mostly copying, which reading ahead would double.
func TestLargeValuesAreNotReadAhead(t *testing.T) {
	ctx := context.Background()
	s := prepared(t, false)
	small := stage(t, s, valuesBatch(0, `{"a":1}`))
	if a := s.readAhead(ctx, small); a == nil {
		t.Fatal("small values not read ahead")
	} else {
		a.close()
	}
	large := stage(t, s, valuesBatch(1, `{"a":"`+strings.Repeat("x", readAheadMaxLine)+`"}`))
	if a := s.readAhead(ctx, append(small, large...)); a != nil {
		a.close()
		t.Error("a load with a value longer than readAheadMaxLine read ahead")
	}
}

// OTLP spans (a typed table) and their GenAI operations load the same
// read ahead as read under the lock: every column of every row. Fails
// when typed rows are not read ahead.
func TestTypedRowsReadAhead(t *testing.T) {
	ctx := context.Background()
	g := tracegen.New(1)
	d, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	d = d.WithGenAI(genai.NewMapper(prices.Embedded(), false))
	var batches [2]*sink.Batch
	for i := range batches {
		first := int64(i * 20)
		b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: first + 19}}}
		for o := first; o <= first+19; o++ {
			v, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(g.OTLPTrace())
			if err != nil {
				t.Fatal(err)
			}
			n, err := d.AppendRows(b, &kgo.Record{Topic: "t", Offset: o, Value: v, Timestamp: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			b.Ranges[0].Records += int64(n)
		}
		batches[i] = b
	}
	content := func(readAhead bool) (spans, operations string) {
		opt := testOptions(t.TempDir())
		opt.Table, opt.Typed = "otel_spans", &otel.Spans
		opt.Derived, opt.DerivedTable = &genai.Table, "genai_operations"
		s := openWith(t, opt)
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		files := stage(t, s, batches[:]...)
		if readAhead {
			loadWhileLocked(t, s, files)
		} else if _, err := s.Load(ctx, files); err != nil {
			t.Fatal(err)
		}
		digest := func(table string) string {
			var n int64
			var h string
			q := `SELECT count(*), md5(string_agg(r::VARCHAR, '|' ORDER BY r::VARCHAR)) FROM ` + table + ` r`
			if err := s.DB().QueryRow(q).Scan(&n, &h); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%d rows %s", n, h)
		}
		return digest("otel_spans"), digest("genai_operations")
	}
	spans, ops := content(false)
	aheadSpans, aheadOps := content(true)
	if aheadSpans != spans || aheadOps != ops {
		t.Errorf("read ahead: spans %s, operations %s; read under the lock: %s, %s", aheadSpans, aheadOps, spans, ops)
	}
	if strings.HasPrefix(spans, "0 rows") || strings.HasPrefix(ops, "0 rows") {
		t.Errorf("nothing loaded: spans %s, operations %s", spans, ops)
	}
}
