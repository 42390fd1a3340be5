package pipeline

import (
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
