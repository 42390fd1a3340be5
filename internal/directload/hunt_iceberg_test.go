package directload

import (
	"context"
	"testing"

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
func TestHuntADeadLetterAtAnotherLoadersPositionIsCaught(t *testing.T) {
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
	ctx := context.Background()
	raw, err := s.Stored(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := s.Stored(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	tp := sink.TopicPartition{Topic: Topic("traces"), Partition: 0}
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
