package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// Two processes on one otlp.instance. The first's load of x (position
// 1) committed x's operation and failed its spans' commit; a second
// process starts and reads the tables (furthest position 2: x's
// operation), and before its abandonment of 1-1 commits, the third
// process's load of b (1, a dead letter only) and c (2, a span and its
// operation) commits its dead letters. The abandonment deletes b's dead
// letter; c's load, fenced at 1 only (the main table's position moved to
// 2), stores c and still counted b's dead letter as stored: b was
// answered as dead-lettered, its dead letter gone.
func TestAbandonmentOfPartOfALoadDoesNotCountItsDeletedDeadLetters(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	failed, racer, s := openDerived(t, dir), openDerived(t, dir), openDerived(t, dir)
	pastAHalfCommittedLoad(t, failed, racer) // a at 0, x at 1 half committed
	tp := sink.TopicPartition{Topic: directload.Topic("traces")}

	b := &sink.Batch{ID: sink.NewBatchID(), Ranges: []sink.Range{{TopicPartition: tp, First: 1, Last: 2}}}
	at := time.Now()
	rec := &kgo.Record{Topic: tp.Topic, Offset: 1, Value: []byte("b"), Timestamp: at}
	b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "undecodable", envelope.StageDecode)
	b.MaxLine = len(b.DLQ)
	b.Ranges[0].DLQ++
	n, err := spanAndOp{}.AppendRows(b, &kgo.Record{Topic: tp.Topic, Offset: 2, Value: []byte("c"), Timestamp: at})
	if err != nil {
		t.Fatal(err)
	}
	b.Ranges[0].Records += int64(n)
	f, err := s.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}

	// c's load commits its dead letters, then waits at its operations'
	// commit while the abandonment runs.
	deadLetters, resume := make(chan struct{}), make(chan struct{})
	waited := false
	s.SetBeforeTableCommit(func(table string) {
		if table == "tracelake.ops" && !waited {
			waited = true
			close(deadLetters)
			<-resume
		}
	})
	type result struct {
		loaded sink.Loaded
		err    error
	}
	done := make(chan result, 1)
	abandoning := openDerived(t, dir)
	started := false
	abandoning.SetBeforeMaintenanceCommit(func() { // the abandonment's first commit, its tables read
		if !started {
			started = true
			go func() {
				l, err := s.Load(ctx, []sink.File{f})
				done <- result{l, err}
			}()
			<-deadLetters
		}
	})
	startLoader(t, abandoning, spanAndOp{}, nil)
	if !started {
		t.Fatal("the second process abandoned nothing")
	}
	close(resume)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	var reported int64
	for _, rg := range r.loaded.Ranges {
		if rg.TopicPartition == tp {
			reported += rg.DLQ
		}
	}
	stored, err := s.Stored(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	var have int64
	if o := stored[tp]; o != nil {
		have = o.Count()
	}
	if reported > have {
		t.Errorf("the load reports %d dead letters stored, the dead-letter table holds %d: b answered as stored, its dead letter deleted by the abandonment", reported, have)
	}
}
