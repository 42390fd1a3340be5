package directload

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// Two loaders with one otlp.instance on Iceberg (the misconfiguration
// TestOneInstanceTwiceIsCaught covers for spans): a's loads hold positions
// 0-1 with spans only, so the dead-letter table's own positions never move.
// b then loads a request the decoder refuses at position 0. Its dead letter
// is fenced by the dead-letter table's positions, not the main table's, so
// it is stored under a's position 0 and answered OK: the collision is not
// caught, and position 0 holds rows of two requests (verify reports a
// duplicate). Expected: the request is told to retry (as a span request at
// a taken position is), and after the retry the dead letter sits at a
// position of its own.
func TestIcebergDeadLetterAtAnotherLoadersPositionIsCaught(t *testing.T) {
	f := newIcebergFixture(t)
	s := f.sink.Sink.(*iceberg.Sink)
	bodies, spans := requestBodies(t, 2)
	a, b := f.start(0), f.start(0) // both resume at 0
	f.forward(t, a, bodies[0], bodies[1])

	garbage := []byte{0xff, 0xff, 0xff, 0xff}
	err := forward(b, garbage)
	if err == nil {
		t.Error("a refused request loaded at position 0, which a's load holds, was answered OK")
		// The client's request is done: nothing to retry.
	} else {
		if err := forward(b, garbage); err != nil { // the client's retry
			t.Fatal(err)
		}
	}
	raw, dlq, tp := storedOf(t, s)
	if n := raw[tp].Count(); n != int64(spans) {
		t.Errorf("%d spans stored, want %d", n, spans)
	}
	if dlq[tp] == nil || dlq[tp].Count() != 1 {
		t.Fatalf("dead letters: %v, want 1", dlq[tp])
	}
	_, dup := sink.Coverage(raw[tp], dlq[tp])
	// Spans of one request share a position (rows beyond the first are
	// AddRow, not duplicates): any duplicate is two requests at one position.
	if dup != 0 {
		union, _ := sink.Coverage(raw[tp], dlq[tp])
		t.Errorf("%d positions hold rows of two requests (dead letter under another request's position); positions %v", dup, union)
	}
}

// oneSpanBody is an export request of one span.
func oneSpanBody(t *testing.T) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	sp.SetSpanID(pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	sp.SetName("lonely")
	now := time.Now()
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Millisecond)))
	b, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same collision in a load of two requests: b loads a refused request
// G (position 1) and a request S of one span (position 2) while a holds
// both positions with spans. The dead-letter table's fence lets G's dead
// letter in, the main table's drops S's span; the load reports 1 row of 2
// stored, and fencedBefore, which takes what was stored for a suffix of the
// requests, answers S as stored (its span was dropped: LOST) and G with a
// retry (its dead letter was stored: the retry DOUBLES it). Expected, once
// every request answered with an error is retried: each span once, one
// dead letter.
func TestIcebergFencedLoadWithADeadLetterStoresEachRequestOnce(t *testing.T) {
	f := newIcebergFixture(t)
	s := f.sink.Sink.(*iceberg.Sink)
	bodies, spans := requestBodies(t, 3)
	single := oneSpanBody(t)
	garbage := []byte{0xff, 0xff, 0xff, 0xff}
	gate1, gate2 := make(chan struct{}), make(chan struct{})
	f.sink.beforeLoad = func(n int) {
		switch n {
		case 1:
			<-gate1 // b's load of X at position 0, held while G and S queue behind it
		case 3:
			<-gate2 // b's load of G and S (positions 1-2), held until a holds them
		}
	}
	a, b := f.start(0), f.start(0) // both resume at 0
	x := make(chan error, 1)
	go func() { x <- forward(b, bodies[0]) }()
	waitFor(t, func() bool { return f.sink.loads.Load() == 1 })
	type answer struct {
		body []byte
		err  error
	}
	gs := make(chan answer, 2)
	go func() { gs <- answer{garbage, forward(b, garbage)} }()
	waitFor(t, func() bool { return f.decoded.Load() == 2 })
	go func() { gs <- answer{single, forward(b, single)} }()
	waitFor(t, func() bool { return f.decoded.Load() == 3 })
	f.forward(t, a, bodies[1]) // load 2: a at position 0
	close(gate1)
	var retry [][]byte
	if err := <-x; err != nil { // fenced: position 0 is a's
		retry = append(retry, bodies[0])
	}
	// b resumed at 1: G at 1, S at 2, load 3 held; a takes 1 and 2.
	waitFor(t, func() bool { return f.sink.loads.Load() == 3 })
	f.forward(t, a, bodies[2]) // load 4: position 1
	f.forward(t, a, bodies[2]) // load 5: position 2 (the same spans again: counted below)
	close(gate2)
	for range 2 {
		if r := <-gs; r.err != nil {
			retry = append(retry, r.body)
		}
	}
	f.forward(t, b, retry...) // the clients retry what was answered with an error
	raw, dlq, tp := storedOf(t, s)
	want := int64(spans + spansIn(t, bodies[2]) + 1) // bodies[2] forwarded twice by a; S once
	if n := raw[tp].Count(); n != want {
		t.Errorf("%d spans stored, want %d (the one-span request answered as stored, its span fenced out?)", n, want)
	}
	if n := dlq[tp].Count(); n != 1 {
		t.Errorf("%d dead letters stored, want 1 (the refused request told to retry after its dead letter was stored?)", n)
	}
}

// storedOf is what s holds of the traces partition: its rows' and dead
// letters' positions.
func storedOf(t *testing.T, s *iceberg.Sink) (raw, dlq map[sink.TopicPartition]*sink.Offsets, tp sink.TopicPartition) {
	t.Helper()
	ctx := context.Background()
	var err error
	if raw, err = s.Stored(ctx, false); err != nil {
		t.Fatal(err)
	}
	if dlq, err = s.Stored(ctx, true); err != nil {
		t.Fatal(err)
	}
	return raw, dlq, sink.TopicPartition{Topic: Topic("traces"), Partition: 0}
}
