package iceberg_test

import (
	"context"
	"slices"
	"testing"

	iceberggo "github.com/apache/iceberg-go"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/verify"
)

// A dead letter deleted from Iceberg's dead-letter table (an operator
// clearing the ones read; no replay is built for Iceberg) is a record the
// tables no longer hold: verify asks Kafka about the offset, which holds a
// committed record there, and reports the gap; one stored again is a
// duplicate.
func TestVerifySeesADeadLetterDeleted(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "raw"})
	load(t, s, batch(0, 0, 9, 4))
	tp := sink.TopicPartition{Topic: "traces"}
	marks := map[sink.TopicPartition]kafka.Watermarks{tp: {Low: 0, High: 10}}
	// Kafka holds a committed record at every offset.
	records := func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error) {
		out := map[sink.TopicPartition]*sink.Offsets{}
		for p, r := range spans {
			out[p] = &sink.Offsets{}
			for o := r.First; o <= r.Last; o++ {
				out[p].Add(o)
			}
		}
		return out, nil
	}
	check := func() *verify.Report { return verifyAsking(t, s, marks, records) }
	if rep := check(); !rep.OK || rep.Partitions[0].DLQRows != 1 {
		t.Fatalf("after the load: %+v %q", rep.Partitions, rep.Problems)
	}
	_, dlqID := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, dlqID)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	txn := tbl.NewTransaction()
	if err := txn.AppendTable(ctx, again, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := check(); rep.OK || !slices.Equal(rep.Problems, []string{"traces/0: 1 offsets stored more than once (in 4-4)"}) {
		t.Errorf("the dead letter stored twice: %q", rep.Problems)
	}
	if tbl, err = s.Catalog().LoadTable(ctx, dlqID); err != nil {
		t.Fatal(err)
	}
	txn = tbl.NewTransaction()
	if err := txn.Delete(ctx, iceberggo.EqualTo(iceberggo.Reference("offset"), int64(4)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := check(); rep.OK || !slices.Equal(rep.Problems, []string{"traces/0: 1 offsets missing (gap: 4-4)"}) {
		t.Errorf("the dead letter deleted: %q", rep.Problems)
	}
}
