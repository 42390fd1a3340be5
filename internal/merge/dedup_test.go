package merge

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// otelLoader loads OTLP messages into an OTel table through the DuckDB
// sink and the decoder, as the pipeline does.
type otelLoader struct {
	t    *testing.T
	s    *duckdb.Sink
	d    *otel.Decoder
	next int64
}

func newOTelLoader(t *testing.T, signal string) *otelLoader {
	t.Helper()
	dir := t.TempDir()
	table := otel.TableOf(signal)
	s, err := duckdb.Open(duckdb.Options{Path: filepath.Join(dir, "o.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: table.Name, Typed: table, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	d, err := otel.NewDecoder(signal, otel.EncodingProto, otel.Tenancy{Default: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return &otelLoader{t: t, s: s, d: d}
}

// load loads the messages, one offset each, in one load.
func (l *otelLoader) load(values ...[]byte) {
	l.t.Helper()
	b := &sink.Batch{}
	first := l.next
	var rows int64
	for _, v := range values {
		n, err := l.d.AppendRows(b, &kgo.Record{Topic: "otlp", Offset: l.next, Value: v})
		if err != nil {
			l.t.Fatal(err)
		}
		rows += int64(n)
		l.next++
	}
	b.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "otlp"}, First: first, Last: l.next - 1, Records: rows}}
	ctx := context.Background()
	f, err := l.s.Stage(ctx, b)
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.s.Load(ctx, []sink.File{f}); err != nil {
		l.t.Fatal(err)
	}
}

func (l *otelLoader) count(q string) int64 {
	l.t.Helper()
	var n int64
	if err := l.s.DB().QueryRow(q).Scan(&n); err != nil {
		l.t.Fatal(err)
	}
	return n
}

// Requests stored twice (a client's retry) leave one copy of each span in
// otel_spans_dedup; merges are incremental, and one repeated with nothing
// new changes nothing.
func TestDedupKeepsOneCopyOfEachSpan(t *testing.T) {
	l := newOTelLoader(t, otel.SignalTraces)
	g := tracegen.New(3)
	var msgs [][]byte
	spans := 0
	for range 6 {
		td := g.OTLPTrace()
		spans += td.SpanCount()
		v, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, v)
	}
	// Messages 0-3, then 2-5: 2 and 3 arrive twice.
	l.load(msgs[0], msgs[1], msgs[2], msgs[3])
	mg := NewMerger(l.s.DB(), slog.New(slog.DiscardHandler))
	dd := Dedup{Table: &otel.Spans, Name: "otel_spans"}
	first, err := mg.Dedup(context.Background(), dd)
	if err != nil {
		t.Fatal(err)
	}
	l.load(msgs[2], msgs[3], msgs[4], msgs[5])
	second, err := mg.Dedup(context.Background(), dd)
	if err != nil {
		t.Fatal(err)
	}
	again, err := mg.Dedup(context.Background(), dd)
	if err != nil {
		t.Fatal(err)
	}
	stored := l.count(`SELECT count(*) FROM otel_spans`)
	kept := l.count(`SELECT count(*) FROM otel_spans_dedup`)
	distinct := l.count(`SELECT count(DISTINCT (tenant_id, trace_id, span_id)) FROM otel_spans_dedup`)
	if kept != int64(spans) || distinct != kept || stored <= kept {
		t.Fatalf("%d spans, %d stored, %d kept (%d distinct)", spans, stored, kept, distinct)
	}
	if first.Read+second.Read != stored || first.Inserted+second.Inserted != kept || again.Read != 0 || again.Inserted != 0 {
		t.Fatalf("merges: %v; %v; %v", first, second, again)
	}
	// The kept copy is the first one stored.
	if n := l.count(`SELECT count(*) FROM otel_spans_dedup WHERE koffset > 3`); n != kept-l.count(`SELECT count(*) FROM otel_spans WHERE koffset <= 3`) {
		t.Fatalf("%d kept rows come from the later copies", n)
	}
}

// Log records have no id: identical records are one; a record that
// differs in any column but the coordinates is another.
func TestDedupOfLogsByContent(t *testing.T) {
	l := newOTelLoader(t, otel.SignalLogs)
	msg := func(attempt int64) []byte {
		ld := plog.NewLogs()
		r := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
		r.SetTimestamp(pcommon.Timestamp(1_796_040_000_000_000_000))
		r.Body().SetStr("tool timed out")
		r.Attributes().PutInt("attempt", attempt)
		v, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	l.load(msg(1), msg(1), msg(2))
	res, err := NewMerger(l.s.DB(), slog.New(slog.DiscardHandler)).Dedup(context.Background(), Dedup{Table: &otel.Logs, Name: "otel_logs"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 3 || res.Inserted != 2 || l.count(`SELECT count(*) FROM otel_logs_dedup`) != 2 {
		t.Fatalf("%v", res)
	}
}

// A span whose span id is all zero (invalid in OTLP, but stored, with a
// null span_id) has no identity: the key concat_ws('/', tenant_id,
// trace_id, span_id) skips the null, so every such span of a trace shares
// one key and otel_spans_dedup keeps one of them, the others lost. They
// should be told apart by their content, as log records are. Likewise a
// span whose trace id is all zero (null trace_id), whose key was its
// tenant and span id, and one without either, whose key was its tenant.
// verify's identities count them as the merge keeps them.
func TestDedupKeepsSpansWithoutSpanID(t *testing.T) {
	for _, c := range []struct {
		name  string
		trace pcommon.TraceID
		span  pcommon.SpanID
	}{
		{"no span id", pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}},
		{"no trace id", pcommon.TraceID{}, pcommon.SpanID{4, 5, 6}},
		{"no ids", pcommon.TraceID{}, pcommon.SpanID{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newOTelLoader(t, otel.SignalTraces)
			v := sinktest.SpansWithIDs(t, c.trace, c.span, "first", "second")
			l.load(v, v) // the second copy: a client's retry
			mg := NewMerger(l.s.DB(), slog.New(slog.DiscardHandler))
			dd := Dedup{Table: &otel.Spans, Name: "otel_spans"}
			if _, err := mg.Dedup(context.Background(), dd); err != nil {
				t.Fatal(err)
			}
			if kept := l.count(`SELECT count(*) FROM otel_spans_dedup`); kept != 2 {
				t.Errorf("two spans without an id, each stored twice: %d kept, want 2", kept)
			}
			if got, err := mg.Counts(context.Background(), dd); err != nil || got != (DedupCounts{Rows: 4, Identities: 2, Kept: 2}) {
				t.Errorf("counts %+v (%v), want 4 rows, 2 distinct, 2 kept", got, err)
			}
		})
	}
}

// A target merged by a release before content keys for spans holds a
// span without a span id under its ids joined, the null skipped (the key
// of all such spans of its trace). After the upgrade a copy of it (a
// client's retry) is still left out, and a new span of that trace without
// a span id is kept: the merge carries the old key over to the content
// key. Without that the copy was kept twice; with the old key looked up
// as it was, the new span was dropped as a copy. A span with its ids
// keeps the key it had.
func TestDedupCarriesOverOldKeysOfSpansWithoutSpanID(t *testing.T) {
	ctx := context.Background()
	l := newOTelLoader(t, otel.SignalTraces)
	first := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "first")
	withIDs := sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{7}, "with ids")
	l.load(first, withIDs)
	mg := NewMerger(l.s.DB(), slog.New(slog.DiscardHandler))
	dd := Dedup{Table: &otel.Spans, Name: "otel_spans"}
	if _, err := mg.Dedup(ctx, dd); err != nil {
		t.Fatal(err)
	}
	// The keys as the release before made them.
	if _, err := l.s.DB().Exec(`UPDATE otel_spans_dedup SET dedup_key = concat_ws('/', tenant_id, trace_id, span_id)`); err != nil {
		t.Fatal(err)
	}
	l.load(first, sinktest.SpansWithIDs(t, pcommon.TraceID{1, 2, 3}, pcommon.SpanID{}, "second"), withIDs)
	res, err := mg.Dedup(ctx, dd)
	if err != nil {
		t.Fatal(err)
	}
	if res.Read != 3 || res.Inserted != 1 {
		t.Errorf("merge after the upgrade: %v; want 3 read, 1 inserted (the new span)", res)
	}
	for q, want := range map[string]int64{
		`SELECT count(*) FROM otel_spans_dedup WHERE name = 'first'`:    1,
		`SELECT count(*) FROM otel_spans_dedup WHERE name = 'second'`:   1,
		`SELECT count(*) FROM otel_spans_dedup WHERE name = 'with ids'`: 1,
		// Carried over: no row without an id keeps its old key.
		`SELECT count(*) FROM otel_spans_dedup WHERE span_id IS NULL AND dedup_key = concat_ws('/', tenant_id, trace_id, span_id)`: 0,
		`SELECT count(*) FROM otel_spans_dedup WHERE dedup_key = 't/01020300000000000000000000000000/0700000000000000'`:            1,
	} {
		if got := l.count(q); got != want {
			t.Errorf("%s: %d, want %d", q, got, want)
		}
	}
	if got, err := mg.Counts(ctx, dd); err != nil || got != (DedupCounts{Rows: 5, Identities: 3, Kept: 3}) {
		t.Errorf("counts %+v (%v), want 5 rows, 3 distinct, 3 kept", got, err)
	}
}
