package iceberg_test

import (
	"context"
	"fmt"
	"testing"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sink/sinktest"
	"github.com/tracelake/tracelake/internal/verify"
)

// messageBatch holds, per offset first..last of partition 0 of topic
// "traces", three Spans rows (index 0, 1, 2): one OTLP message's spans.
func messageBatch(first, last int64) *sink.Batch {
	b := &sink.Batch{}
	r := sink.Range{TopicPartition: sink.TopicPartition{Topic: "traces"}, First: first, Last: last}
	for o := first; o <= last; o++ {
		for i := range 3 {
			b.Rows = fmt.Appendf(b.Rows, `{"name":"span %d.%d","ktopic":"traces","kpartition":0,"koffset":%d,"kindex":%d}`+"\n", o, i, o, i)
			r.Records++
		}
	}
	b.Ranges = []sink.Range{r}
	return b
}

// verifyTyped is verify's report of s's tables as `tracelake verify` builds
// it (Kafka's records not asked: every hole is a gap), with Kafka's
// watermarks marks (nil: unknown).
func verifyTyped(t *testing.T, s *iceberg.Sink, marks map[sink.TopicPartition]kafka.Watermarks) *verify.Report {
	t.Helper()
	return verifyAsking(t, s, marks, nil)
}

// verifyAsking is verifyTyped with Kafka's committed records read through
// records (nil: not asked).
func verifyAsking(t *testing.T, s *iceberg.Sink, marks map[sink.TopicPartition]kafka.Watermarks, records verify.RecordsFunc) *verify.Report {
	t.Helper()
	ctx := context.Background()
	next, err := s.AllPositions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	abandoned, err := s.Abandoned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.Stored(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	dlq, err := s.Stored(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	return verify.FromStored(marks, next, raw, dlq, abandoned, true, records)
}

// rowFilter selects the row of message o with index i.
func rowFilter(o int64, i int32) iceberggo.BooleanExpression {
	return iceberggo.NewAnd(iceberggo.EqualTo(iceberggo.Reference(schema.OffsetColumn), o),
		iceberggo.EqualTo(iceberggo.Reference(schema.IndexColumn), i))
}

// A message's rows beyond its first (an OTLP message's second span) count
// on Iceberg as they do on the sinks with a ledger: one stored twice is a
// duplicate, and one missing between its message's others is missing.
// verify counted only each message's first row by its offset and printed
// OK over either.
func TestVerifyCountsEveryRowOfAMessage(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &sinktest.Spans})
	load(t, s, messageBatch(0, 9))
	if rep := verifyTyped(t, s, nil); !rep.OK || rep.Partitions[0].Rows != 30 {
		t.Fatalf("after a clean load: %+v %q", rep.Partitions, rep.Problems)
	}
	raw, _ := s.Identifiers()

	// The second span of message 4 stored again.
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	again, err := tbl.Scan(table.WithRowFilter(rowFilter(4, 1))).ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.NumRows() != 1 {
		t.Fatalf("%d rows at 4/1", again.NumRows())
	}
	txn := tbl.NewTransaction()
	if err := txn.AppendTable(ctx, again, 1, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	again.Release()
	rep := verifyTyped(t, s, nil)
	if rep.OK || rep.Partitions[0].Duplicates != 1 {
		t.Errorf("message 4's second span stored twice: ok=%v %+v %q", rep.OK, rep.Partitions, rep.Problems)
	}

	// Message 6's second span deleted (its first and third stay).
	if tbl, err = s.Catalog().LoadTable(ctx, raw); err != nil {
		t.Fatal(err)
	}
	txn = tbl.NewTransaction()
	if err := txn.Delete(ctx, iceberggo.NewOr(rowFilter(6, 1), rowFilter(4, 1)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rep = verifyTyped(t, s, nil)
	if rep.OK || rep.Partitions[0].Rows != 28 {
		t.Errorf("message 4's and 6's second spans missing: ok=%v %+v %q", rep.OK, rep.Partitions, rep.Problems)
	}
}

// A partition whose rows left are all a message's later rows (its first
// span deleted, say by a user's delete of one span) is a gap at that
// offset. verify panicked there: the partition had rows but no offset
// (index out of range).
func TestVerifyPartitionWithoutAnyFirstRow(t *testing.T) {
	ctx := context.Background()
	s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &sinktest.Spans})
	load(t, s, messageBatch(0, 0))
	raw, _ := s.Identifiers()
	tbl, err := s.Catalog().LoadTable(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	txn := tbl.NewTransaction()
	if err := txn.Delete(ctx, rowFilter(0, 0), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := txn.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var rep *verify.Report
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("verify panicked: %v", r)
			}
		}()
		rep = verifyTyped(t, s, map[sink.TopicPartition]kafka.Watermarks{{Topic: "traces"}: {Low: 0, High: 1}})
	}()
	if rep.OK || rep.Partitions[0].Gaps != 1 {
		t.Errorf("message 0's first span deleted: ok=%v %+v %q", rep.OK, rep.Partitions, rep.Problems)
	}
}

// The first span of a partition's first message deleted (a user's delete
// of one span) while its other spans stay is missing as the first span of
// any later message is: the spans left show the message was stored. Kafka's
// log start is past those offsets (retention, as on any table older than
// it), so the hole cannot be asked about and is a gap. verify said OK: the
// stored offsets began at the first message whose first row is there, and
// a hole counted only from there (message 3's first span deleted was a gap,
// message 0's nothing).
func TestVerifyFirstMessageMissingItsFirstRow(t *testing.T) {
	ctx := context.Background()
	marks := map[sink.TopicPartition]kafka.Watermarks{{Topic: "traces"}: {Low: 5, High: 10}}
	for _, c := range []struct {
		name   string
		offset int64
	}{{"message 3", 3}, {"message 0", 0}} {
		s := openPrepared(t, t.TempDir(), iceberg.Options{Table: "spans", Typed: &sinktest.Spans})
		load(t, s, messageBatch(0, 9))
		if rep := verifyTyped(t, s, marks); !rep.OK {
			t.Fatalf("%s: after a clean load: %+v %q", c.name, rep.Partitions, rep.Problems)
		}
		raw, _ := s.Identifiers()
		tbl, err := s.Catalog().LoadTable(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		txn := tbl.NewTransaction()
		if err := txn.Delete(ctx, rowFilter(c.offset, 0), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		rep := verifyTyped(t, s, marks)
		want := fmt.Sprintf("traces/0: 1 offsets missing (gap: %d-%d)", c.offset, c.offset)
		if rep.OK || len(rep.Problems) != 1 || rep.Problems[0] != want || rep.Partitions[0].Rows != 29 {
			t.Errorf("%s's first span deleted, its others stored: ok=%v problems %q, want %q; %+v", c.name, rep.OK, rep.Problems, want, rep.Partitions)
		}
	}
}
