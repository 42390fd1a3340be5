package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
)

func rec(p int32, off int64, v string) *kgo.Record {
	return &kgo.Record{Topic: "t", Partition: p, Offset: off, Value: []byte(v)}
}

// Batches close at max records, max bytes and max interval; consecutive
// ranges of a partition touch, starting at the assigned position.
func TestBatcherClosesAndRangesTouch(t *testing.T) {
	now := time.Now()
	b := newBatcher(false, 3, 1<<20, time.Second)
	b.setNext(sink.TopicPartition{Topic: "t", Partition: 0}, 10) // resume position
	var closed []*batch
	for off := int64(12); off < 18; off++ { // Kafka skipped 10 and 11 (e.g. txn markers)
		if full, added := b.add(rec(0, off, `{}`), now); !added {
			t.Fatalf("offset %d not added", off)
		} else if full != nil {
			closed = append(closed, full)
		}
	}
	if len(closed) != 2 {
		t.Fatalf("closed %d batches at max_records 3, want 2", len(closed))
	}
	r0, r1 := closed[0].Ranges[0], closed[1].Ranges[0]
	if r0.First != 10 || r0.Last != 14 || r0.Records != 3 || r1.First != 15 || r1.Last != 17 {
		t.Errorf("ranges %+v %+v, want 10..14 and 15..17", r0, r1)
	}

	if full, added := b.add(rec(0, 16, `{}`), now); added || full != nil {
		t.Error("a replayed offset below the position was batched again")
	}

	b.add(rec(1, 0, `not json`), now)
	if b.closeIfDue(now.Add(999*time.Millisecond)) != nil {
		t.Error("closed before max_interval")
	}
	got := b.closeIfDue(now.Add(time.Second))
	if got == nil || got.Ranges[0].DLQ != 1 || got.Ranges[0].Records != 0 || len(got.DLQ) == 0 {
		t.Fatalf("interval close: %+v", got)
	}

	big := newBatcher(false, 1000, 10, time.Hour)
	if full, _ := big.add(rec(0, 0, `"0123456789"`), now); full == nil {
		t.Error("batch not closed at max_bytes")
	}
}

// A range never goes backwards: when reading of a partition restarts below
// what the open batch holds, that batch is cut and the re-read offsets
// start a new one. Before, the open range took the re-read offsets (its
// Last went back) and one batch held the same records twice.
func TestBatcherRangeNeverGoesBackwards(t *testing.T) {
	now := time.Now()
	tp := sink.TopicPartition{Topic: "t", Partition: 0}
	b := newBatcher(false, 100, 1<<20, time.Hour)
	for off := int64(0); off < 10; off++ {
		b.add(rec(0, off, `{}`), now)
	}
	b.setNext(tp, 5) // read again from 5
	for off := int64(5); off < 8; off++ {
		if _, added := b.add(rec(0, off, `{}`), now); !added {
			t.Fatalf("re-read offset %d not batched", off)
		}
	}
	got := b.closeAll()
	if len(got) != 2 {
		t.Fatalf("%d batches, want the cut one and the re-read one", len(got))
	}
	r0, r1 := got[0].Ranges[0], got[1].Ranges[0]
	if r0.First != 0 || r0.Last != 9 || r0.Records != 10 || r1.First != 5 || r1.Last != 7 || r1.Records != 3 {
		t.Errorf("ranges %+v and %+v, want 0..9 (10) then 5..7 (3)", r0, r1)
	}
}

// A transaction marker takes an offset and stores nothing: the range
// covers it, so the next range starts after it.
func TestBatcherCoversTransactionMarkers(t *testing.T) {
	now := time.Now()
	b := newBatcher(false, 100, 1<<20, time.Hour)
	b.add(rec(0, 0, `{}`), now)
	marker := rec(0, 1, "")
	marker.Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
	if _, added := b.add(marker, now); added {
		t.Error("a marker counted as a record")
	}
	got := b.close()
	if r := got.Ranges[0]; r.First != 0 || r.Last != 1 || r.Records != 1 || got.records != 1 {
		t.Errorf("range %+v (%d records), want 0..1 holding 1 record", r, got.records)
	}
}

// tenRows is a RowDecoder making ten rows of each message, each as long as
// the message; a message "bad" is refused.
type tenRows struct{}

func (tenRows) AppendRows(b *sink.Batch, r *kgo.Record) (int, error) {
	if string(r.Value) == "bad" {
		return 0, errors.New("not OTLP")
	}
	for range 10 {
		b.Rows = append(append(b.Rows, r.Value...), '\n')
	}
	b.MaxLine = max(b.MaxLine, len(r.Value)+1)
	return 10, nil
}

// A decoded record holds its rows in memory, not its message: the batch's
// bytes (max_bytes, max_inflight_bytes) count the rows, and a refused
// record its dead-letter row.
func TestDecodedRowsCountAsHeldBytes(t *testing.T) {
	now := time.Now()
	b := newBatcher(false, 1000, 200, time.Second)
	b.decoder = tenRows{}
	value := `{"ten bytes"}`[:10]
	if full, _ := b.add(rec(0, 0, value), now); full != nil || b.lastSize != 110 {
		t.Fatalf("first record: held %d bytes (want its 10 rows, 110), closed %v", b.lastSize, full != nil)
	}
	full, _ := b.add(rec(0, 1, value), now)
	if full == nil || full.bytes != 220 || full.Ranges[0].Records != 20 {
		t.Fatalf("the batch did not close at 200 bytes of rows after 2 messages of 10 bytes: %+v", full)
	}
	b.add(rec(0, 2, "bad"), now)
	if b.lastSize == 0 || b.lastSize != int64(len(b.cur.DLQ)) || b.cur.Ranges[0].DLQ != 1 {
		t.Fatalf("a refused record held %d bytes, its dead-letter row is %d", b.lastSize, len(b.cur.DLQ))
	}
}

// A raw record holds its key and headers in memory as well as its value
// (the staged row carries all three): the batch's bytes (batch.max_bytes,
// max_inflight_bytes) count them. Before, only the value counted: records
// with large headers or keys and small values held nothing by the budget,
// the batch closed only at max_records, and memory grew without bound.
func TestRecordKeyAndHeadersCountAsHeldBytes(t *testing.T) {
	now := time.Now()
	b := newBatcher(false, 1000, 1<<20, time.Hour)
	header := make([]byte, 400<<10)
	r := func(off int64) *kgo.Record {
		return &kgo.Record{Topic: "t", Offset: off, Key: []byte("k"), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: "baggage", Value: header}}}
	}
	want := int64(len("k") + len(`{}`) + len("baggage") + len(header))
	if full, _ := b.add(r(0), now); full != nil || b.lastSize != want {
		t.Fatalf("first record held %d bytes, want %d (key, value and headers); closed %v", b.lastSize, want, full != nil)
	}
	b.add(r(1), now)
	full, _ := b.add(r(2), now)
	if full == nil || full.bytes != 3*want {
		t.Fatalf("the batch did not close at max_bytes 1 MiB after 3 records of 400 KiB headers: %v", full != nil)
	}
	// A null value with a null key and no headers holds nothing.
	if b.add(&kgo.Record{Topic: "t", Offset: 3}, now); b.lastSize != 0 {
		t.Errorf("an empty record held %d bytes", b.lastSize)
	}
}
