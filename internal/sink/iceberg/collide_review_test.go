package iceberg_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/sink"
)

// deadB decodes as spanAndOp, but refuses request "b" (its dead letter
// only), and says on decoded which request it took.
type deadB struct{ decoded chan string }

func (d deadB) AppendRows(b *sink.Batch, r *kgo.Record) (int, error) {
	defer func() { d.decoded <- string(r.Value) }()
	if string(r.Value) == "b" {
		return 0, errors.New("refused")
	}
	return spanAndOp{}.AppendRows(b, r)
}

// Two processes on one otlp.instance (the misconfiguration README names;
// it must not lose rows silently). One loads b (position 2, a dead letter
// only) and c (3, a span); it commits b's dead letter, and before its
// other commits the second process commits spans at 2-3. The load's
// dead letter counts as one row stored, which directload took for the
// last request's: c was acknowledged, its span never stored.
func TestCollidingLoadAnswersOnlyWhatItStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, other := openDerived(t, dir), openDerived(t, dir)
	dec := deadB{decoded: make(chan string, 8)}
	l, err := directload.Start(ctx, directload.Options{Sink: s, Decoder: dec, Signal: "traces", MaxLoadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	forward := func(name string, answer chan<- error) {
		_, err := l.Forward(ctx, "traces", "team-a", []byte(name))
		answer <- err
	}
	a := make(chan error, 1)
	forward("a", a)
	<-dec.decoded
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	// w's load waits at its spans' commit while b and c queue behind it.
	wAt, wGo := make(chan struct{}), make(chan struct{})
	phase := 1
	var otherErr error
	s.SetBeforeTableCommit(func(table string) {
		switch {
		case phase == 1 && table == "tracelake.spans":
			phase = 2
			close(wAt)
			<-wGo
		case phase == 2 && table == "tracelake.ops": // b's dead letter committed
			phase = 3
			otherErr = loadSpans(ctx, other, 2, "x", "y")
		}
	})
	w, b, c := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go forward("w", w)
	<-dec.decoded
	<-wAt
	go forward("b", b)
	<-dec.decoded
	go forward("c", c)
	<-dec.decoded
	close(wGo)
	if err := <-w; err != nil {
		t.Fatal(err)
	}
	bErr, cErr := <-b, <-c
	if otherErr != nil {
		t.Fatal(otherErr)
	}
	if phase != 3 {
		t.Fatalf("b and c were not loaded together (phase %d)", phase)
	}
	spans := spanNames(t, s)
	if cErr == nil && !slices.Contains(spans, "c") {
		t.Errorf("c acknowledged, its span not stored: spans %v (b answered %v)", spans, bErr)
	}
}

// loadSpans loads into s (another process) a span and its operation per
// name, at positions from first on of the traces sequence.
func loadSpans(ctx context.Context, s interface {
	Stage(context.Context, *sink.Batch) (sink.File, error)
	Load(context.Context, []sink.File) (sink.Loaded, error)
}, first int64, names ...string) error {
	tp := sink.TopicPartition{Topic: directload.Topic("traces")}
	b := &sink.Batch{ID: sink.NewBatchID(), Ranges: []sink.Range{{TopicPartition: tp, First: first, Last: first + int64(len(names)) - 1}}}
	for i, n := range names {
		k, err := spanAndOp{}.AppendRows(b, &kgo.Record{Topic: tp.Topic, Offset: first + int64(i), Value: []byte(n), Timestamp: time.Now()})
		if err != nil {
			return err
		}
		b.Ranges[0].Records += int64(k)
	}
	f, err := s.Stage(ctx, b)
	if err != nil {
		return err
	}
	_, err = s.Load(ctx, []sink.File{f})
	return err
}
