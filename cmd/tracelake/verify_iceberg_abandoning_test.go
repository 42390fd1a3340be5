package main

import (
	"context"
	"strings"
	"testing"
	"time"

	iceberggo "github.com/apache/iceberg-go"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// An OTLP load-mode abandonment first commits the main table (its
// position past the failed load's, the positions abandoned and marked as
// to delete: tracelake.abandoning.*), then deletes the rows the other
// tables hold there, then clears the mark. verify read the abandoned
// positions as if their rows were deleted before they were recorded: run
// while an abandonment was between its steps, it reported the failed
// load's dead letter as a request stored twice, and failed a sound
// pipeline. It waits for the deletion now.
func TestIcebergVerifyWaitsForAnAbandonmentDeleting(t *testing.T) {
	ctx := context.Background()
	cfg, tp := halfAbandoned(t)
	finisher, err := openIceberg(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer finisher.Close()
	finished := make(chan error, 1)
	go func() { // the abandoning process, deleting
		_, err := finisher.FurthestPositions(ctx, []sink.TopicPartition{tp})
		finished <- err
	}()
	rep, err := verifyIceberg(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-finished; err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Errorf("verify during an abandonment's deletion: failed %q; want OK (the dead letter at the abandoned position was being deleted)", rep.Problems)
	}
}

// A process stopped between the abandonment's steps leaves the mark, and
// the failed load's dead letter at the abandoned position, until the next
// start on its otlp.instance deletes it. verify fails, saying so, not that
// a request was stored twice by a loading error.
func TestIcebergVerifyNamesAnAbandonmentLeftHalfDone(t *testing.T) {
	defer func(d time.Duration) { mainCommitWait = d }(mainCommitWait)
	mainCommitWait = 200 * time.Millisecond
	cfg, _ := halfAbandoned(t)
	rep, err := verifyIceberg(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(rep.Problems, "; ")
	if rep.OK || !strings.Contains(said, "not yet deleted") {
		t.Errorf("verify with an abandonment left half done: OK=%v %q; want it failed, naming the rows not yet deleted", rep.OK, rep.Problems)
	}
}

// halfAbandoned leaves an Iceberg sink of an OTLP load-mode sequence as
// an abandonment stopped between its steps does: offsets 0-4 loaded (4 a
// dead letter), a failed load's dead letter at 5, and the main table's
// position moved past 5, which it records as abandoned and marked as to
// delete.
func halfAbandoned(t *testing.T) (*config.Config, sink.TopicPartition) {
	t.Helper()
	tp := sink.TopicPartition{Topic: sink.SequenceTopicPrefix + "traces"}
	cfg, ice := deadLetterPastMain(t, tp)
	raw, _ := ice.Identifiers()
	pos := iceberg.PositionKeyPrefix + tp.Topic + ".0"
	setProperties(t, ice, raw, iceberggo.Properties{pos: "6", // the abandonment's first step
		"tracelake.abandoned." + tp.Topic + ".0": "5-5", "tracelake.abandoning." + tp.Topic + ".0": "5-5"})
	return cfg, tp
}

func setProperties(t *testing.T, ice *iceberg.Sink, id []string, props iceberggo.Properties) {
	t.Helper()
	ctx := context.Background()
	tbl, err := ice.Catalog().LoadTable(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.SetProperties(props); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A load over a killed load's operations marks, with its spans' commit,
// the offsets of its dead letters whose operations it then deletes
// (tracelake.dead-derived.*); a process stopped between leaves the mark
// until the partition's next load or assignment. verify fails, naming
// the operations not yet deleted, not only an operation without its span
// (here the span is stored: only the mark tells).
func TestIcebergVerifyNamesOperationsAtDeadLettersLeftMarked(t *testing.T) {
	defer func(d time.Duration) { mainCommitWait = d }(mainCommitWait)
	mainCommitWait = 200 * time.Millisecond
	tp := sink.TopicPartition{Topic: sink.SequenceTopicPrefix + "traces"}
	cfg, ice := loadedGenAIIceberg(t, tp.Topic)
	raw, _ := ice.Identifiers()
	setProperties(t, ice, raw, iceberggo.Properties{"tracelake.dead-derived." + tp.Topic + ".0": "3-3"})
	rep, err := verifyIceberg(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(rep.Problems, "; ")
	if want := tp.String() + ": the operations at the dead letters 3-3 not yet deleted"; rep.OK || !strings.Contains(said, want) {
		t.Errorf("verify with operations at dead letters marked and not deleted: OK=%v %q; want it failed, saying %q", rep.OK, rep.Problems, want)
	}
}
