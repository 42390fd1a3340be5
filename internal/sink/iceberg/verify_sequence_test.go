package iceberg_test

import (
	"bytes"
	"context"
	"testing"

	iceberggo "github.com/apache/iceberg-go"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
)

// sequenceBatch is messageBatch at positions first..last of the OTLP
// receivers' own sequence of traces (otlp.mode load), instance 0.
func sequenceBatch(first, last int64) *sink.Batch {
	b := messageBatch(first, last)
	b.Rows = bytes.ReplaceAll(b.Rows, []byte(`"ktopic":"traces"`), []byte(`"ktopic":"otlp:traces"`))
	b.Ranges[0].Topic = "otlp:traces"
	return b
}

// The rows of the first requests of an OTLP receiver's sequence deleted
// (a data file removed from the snapshot) are a gap: the sequence starts
// at 0, and no Kafka is there to say so. verify started the sequence at
// its first stored position and printed OK.
func TestVerifyChecksTheOTLPSequenceFromZero(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &sinktest.Spans})
	load(t, s, sequenceBatch(0, 9))
	load(t, s, sequenceBatch(10, 19))
	if rep := verifyTyped(t, s, nil); !rep.OK {
		t.Fatalf("before: %q", rep.Problems)
	}
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.Delete(ctx, iceberggo.LessThan(iceberggo.Reference(schema.OffsetColumn), int64(10)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rep := verifyTyped(t, s, nil)
	if rep.OK || !sinktest.HasProblem(rep, "otlp:traces/0", "10 offsets missing", "0-9") {
		t.Errorf("the first load's rows removed: ok=%v %q %+v", rep.OK, rep.Problems, rep.Partitions)
	}
}
