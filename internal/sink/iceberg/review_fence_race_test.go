package iceberg_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// fenceByMain (load.go) reads the main table's positions before the
// dead-letter table's commit, but that commit is pinned to the
// dead-letter table's snapshot alone. Two processes sharing one
// otlp.instance (the collision 6648040 fences): b loads a refused request
// at position 0; after b read the main table's positions and before b's
// dead-letter commit, a (another process: another Sink on the same
// catalog) commits a request of one span at position 0, with no dead
// letter, so the dead-letter table does not move and b's commit lands. b's
// main commit is then fenced and its request answered with a retry, but
// its dead letter stays under a's position 0, and the retry stores it
// again at position 1. Expected: one dead letter, and no position holding
// rows of two requests.
func TestReviewDeadLetterFenceRacesAnotherProcessesMainCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *iceberg.Sink {
		s, err := iceberg.Open(ctx, iceberg.Options{Table: otel.Spans.Name, Typed: &otel.Spans,
			Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	start := func(s *iceberg.Sink) *directload.Loader {
		dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Header: directload.TenantHeader, Default: "default"})
		if err != nil {
			t.Fatal(err)
		}
		l, err := directload.Start(ctx, directload.Options{Sink: s, Decoder: dec, Signal: otel.SignalTraces, Partition: 0, MaxLoadBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	forward := func(l *directload.Loader, body []byte) error {
		_, err := l.Forward(ctx, otel.SignalTraces, "team-a", body)
		return err
	}
	s1, s2 := open(), open()
	a, b := start(s1), start(s2) // one otlp.instance in two processes: both resume at 0

	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1, 2, 3})
	sp.SetSpanID(pcommon.SpanID{4, 5, 6})
	sp.SetName("one")
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
	span, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	s2.SetBeforeTableCommit(func(table string) {
		if strings.HasSuffix(table, "_dlq") {
			once.Do(func() {
				if err := forward(a, span); err != nil {
					t.Errorf("a's request: %v", err)
				}
			})
		}
	})
	garbage := []byte{0xff, 0xff, 0xff, 0xff}
	if err := forward(b, garbage); err != nil {
		t.Logf("b's refused request answered %v; the client retries", err)
		if err := forward(b, garbage); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := s1.Stored(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := s1.Stored(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	tp := sink.TopicPartition{Topic: directload.Topic("traces"), Partition: 0}
	if n := raw[tp].Count(); n != 1 {
		t.Errorf("%d spans stored, want 1", n)
	}
	if n := dlq[tp].Count(); n != 1 {
		t.Errorf("%d dead letters stored of one refused request, want 1", n)
	}
	if _, dup := sink.Coverage(raw[tp], dlq[tp]); dup != 0 {
		union, _ := sink.Coverage(raw[tp], dlq[tp])
		t.Errorf("%d positions hold rows of two requests (positions %v)", dup, union)
	}
}
