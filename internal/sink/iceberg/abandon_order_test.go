package iceberg_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// Two processes on one otlp.instance (README names it a misconfiguration,
// but it must not lose rows silently): one starts while the other has
// committed request b's operation and not yet its span. The starting one
// abandons b's position. It deleted the operation before its commit of the
// spans table took the position, so the other's span commit, landing in
// between, was not fenced: b was acknowledged, its span stored without
// its operation. A commit of an unknown outcome reaching the catalog late
// does the same. The positions are taken first, then the rows deleted:
// either the span commit lands first and nothing is abandoned, or it is
// fenced and b refused, its operation deleted.
func TestAbandonmentTakesThePositionsBeforeDeleting(t *testing.T) {
	dir := t.TempDir()
	s := openDerived(t, dir)
	var logs syncBuffer
	other := openPrepared(t, dir, iceberg.Options{Table: "spans", Typed: &sinktest.Spans, Derived: &sinktest.Ops, DerivedTable: "ops",
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	forward := startLoader(t, s, spanAndOp{}, nil)
	if err := forward("a"); err != nil {
		t.Fatal(err)
	}
	// b's operation is committed; its span's commit waits.
	opsIn, spansGo := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.SetBeforeTableCommit(func(table string) {
		if table == "tracelake.spans" {
			once.Do(func() { close(opsIn); <-spansGo })
		}
	})
	answered := make(chan error, 1)
	go func() { answered <- forward("b") }()
	<-opsIn
	// At the abandonment's first commit, b's span commit goes on, and b
	// is answered.
	var bErr error
	released := false
	other.SetBeforeMaintenanceCommit(func() {
		if !released {
			released = true
			close(spansGo)
			bErr = <-answered
		}
	})
	startLoader(t, other, spanAndOp{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if !released {
		t.Fatal("the abandonment committed nothing: b's position was not abandoned")
	}
	spansWithTheirOperations(t, s, bErr)
	tp := sink.TopicPartition{Topic: directload.Topic("traces")}
	abandoned, err := s.Abandoned(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The log says what happened: an abandonment that found b's span
	// committed abandoned nothing.
	said := logs.String()
	if len(abandoned[tp]) == 0 && strings.Contains(said, "positions abandoned") {
		t.Errorf("nothing abandoned, and the log says positions were:\n%s", said)
	}
	if strings.Contains(said, "maintenance commit") {
		t.Errorf("the abandonment's commit logged as a maintenance commit:\n%s", said)
	}
}

// The same two processes, the starting one abandoning b's position after
// b's dead letter is committed and before its operation's commit lands.
// The operations table had nothing at b's position when the abandonment
// deleted, and nothing fenced the late commit of the operation there: it
// stayed, at a position abandoned, without its span (refused, fenced by
// the spans table's position). The deletion takes each table's position
// past the abandoned ones.
func TestAbandonmentFencesALateOperationCommit(t *testing.T) {
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	forward := startLoader(t, s, spanOpAndDeadLetter{}, nil)
	if err := forward("a"); err != nil {
		t.Fatal(err)
	}
	started := false
	s.SetBeforeTableCommit(func(table string) {
		if table == "tracelake.ops" && !started {
			started = true
			startLoader(t, other, spanOpAndDeadLetter{}, nil) // abandons b's position
		}
	})
	bErr := forward("b")
	if !started {
		t.Fatal("the other process did not start between b's commits")
	}
	spansWithTheirOperations(t, s, bErr)
	tp := []sink.TopicPartition{{Topic: directload.Topic("traces")}}
	main, err := s.Positions(context.Background(), tp)
	if err != nil {
		t.Fatal(err)
	}
	if furthest, err := s.FurthestPositions(context.Background(), tp); err != nil || furthest[tp[0]] != main[tp[0]] {
		t.Errorf("furthest position %v (%v), the spans' %v: want them equal", furthest, err, main)
	}
}

// spansWithTheirOperations checks that s stores the operation of every
// span it stores, and no other, and b's span if b was answered bErr nil
// (acknowledged).
func spansWithTheirOperations(t *testing.T, s *iceberg.Sink, bErr error) {
	t.Helper()
	spans, ops := spanNames(t, s), opNames(t, s)
	if !slices.Equal(spans, ops) {
		t.Errorf("spans %v, operations %v: want the operation of every span stored, and no other", spans, ops)
	}
	if bErr == nil && !slices.Contains(spans, "b") {
		t.Errorf("b acknowledged, its span not stored: %v", spans)
	}
}

// startLoader starts the OTLP receivers' loading (directload) of
// requests, decoded by dec, into s (its start abandons the positions a
// failed load holds in part), and returns how to send a request. It is
// safe to call from a goroutine other than the test's.
func startLoader(t *testing.T, s *iceberg.Sink, dec directload.RowDecoder, log *slog.Logger) (forward func(name string) error) {
	l, err := directload.Start(context.Background(), directload.Options{Sink: s, Decoder: dec, Signal: "traces", MaxLoadBytes: 1 << 20, Log: log})
	if err != nil {
		t.Errorf("start loading: %v", err)
		return func(string) error { return err }
	}
	t.Cleanup(l.Close)
	return func(name string) error {
		_, err := l.Forward(context.Background(), "traces", "team-a", []byte(name))
		return err
	}
}

// spanOpAndDeadLetter is spanAndOp with a dead letter too at each
// request's position: its load commits all three tables.
type spanOpAndDeadLetter struct{}

func (spanOpAndDeadLetter) AppendRows(b *sink.Batch, r *kgo.Record) (int, error) {
	n, err := spanAndOp{}.AppendRows(b, r)
	b.DLQ = envelope.AppendDLQRow(b.DLQ, r, "refused beside its span", envelope.StageDecode)
	b.Ranges[0].DLQ++
	return n, err
}

// spanNames reads the names of the spans table's rows, sorted.
func spanNames(t *testing.T, s *iceberg.Sink) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := s.Catalog().LoadTable(ctx, table.Identifier{"tracelake", "spans"})
	if err != nil {
		t.Fatal(err)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("name")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rec, err := range batches {
		if err != nil {
			t.Fatal(err)
		}
		names := rec.Column(0).(*array.String)
		for i := range int(rec.NumRows()) {
			out = append(out, names.Value(i))
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

// opNames are the names of the spans the ops table's rows come from
// (spanAndOp's "op <name>"), sorted.
func opNames(t *testing.T, s *iceberg.Sink) []string {
	t.Helper()
	var out []string
	for _, op := range operations(t, s) {
		var name, cost string
		if _, err := fmt.Sscanf(op, "op %s %s", &name, &cost); err != nil {
			t.Fatalf("operation %q: %v", op, err)
		}
		out = append(out, name)
	}
	return out
}

// syncBuffer is a bytes.Buffer that loggers on several goroutines can
// write to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A process stopped between the abandonment's steps (the spans' position
// taken, b's operation not yet deleted) leaves the positions marked as to
// delete: the next start deletes the operation and clears the mark, and
// the client's retry of b stores its span and operation once.
func TestAbandonmentInterruptedIsFinishedAtTheNextStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	pastAHalfCommittedLoad(t, s, other)
	stopping, stop := context.WithCancel(ctx)
	defer stop()
	commits := 0
	other.SetBeforeMaintenanceCommit(func() {
		if commits++; commits == 2 { // the first deletion, after the spans' commit
			stop()
		}
	})
	if _, err := directload.Start(stopping, directload.Options{Sink: other, Decoder: spanAndOp{}, Signal: "traces", MaxLoadBytes: 1 << 20}); err == nil {
		t.Fatal("a start stopped in its abandonment succeeded")
	}
	mark := "tracelake.abandoning." + directload.Topic("traces") + ".0"
	props, err := s.RawProperties(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if props[mark] != "1-1" {
		t.Fatalf("after the stop, %s=%q, want 1-1: the stop did not come between the steps", mark, props[mark])
	}
	forward := startLoader(t, openDerived(t, dir), spanAndOp{}, nil)
	if err := forward("b"); err != nil { // the client's retry
		t.Fatal(err)
	}
	// Those of the requests: not the other instance's spans of partition
	// 1, which made b's commit lose its races.
	spans := slices.DeleteFunc(spanNames(t, s), func(n string) bool { return strings.HasPrefix(n, "span ") })
	ops := opNames(t, s)
	if want := []string{"a", "b"}; !slices.Equal(spans, want) || !slices.Equal(ops, want) {
		t.Errorf("spans %v, operations %v: want %v each", spans, ops, want)
	}
	if props, err = s.RawProperties(ctx); err != nil || props[mark] != "" {
		t.Errorf("after the next start, %s=%q (%v): want it cleared", mark, props[mark], err)
	}
	tp := sink.TopicPartition{Topic: directload.Topic("traces")}
	abandoned, err := s.Abandoned(ctx)
	if err != nil || !slices.Equal(abandoned[tp], []sink.Run{{First: 1, Last: 1}}) {
		t.Errorf("abandoned %v (%v), want 1-1", abandoned[tp], err)
	}
}
