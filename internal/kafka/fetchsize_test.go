package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/kafka/kafkatest"
)

const sizerTopic = "t"

// sizedConsumer reads the topic from its start with sizer's fetch sizes
// (none: the sizes in opts) and hands every record to each, read n at a
// time; after each poll it calls polled with the bytes the client holds.
func sizedConsumer(t *testing.T, c *kfake.Cluster, sizer *FetchSizer, partitions, records, n int, each func(*kgo.Record), polled func(buffered int64), opts ...kgo.Opt) {
	t.Helper()
	opts = append(opts, kgo.ConsumeTopics(sizerTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if sizer != nil {
		opts = append(opts, sizer.Options()...)
	}
	cl := kafkatest.Client(t, c, opts...)
	if sizer != nil {
		sizer.Attach(cl)
		sizer.SetPartitions(partitions)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for got := 0; got < records; {
		f := cl.PollRecords(ctx, n)
		if err := f.Err0(); err != nil {
			t.Fatalf("after %d of %d records: %v", got, records, err)
		}
		f.EachRecord(each)
		got += f.NumRecords()
		polled(cl.BufferedFetchBytes())
	}
}

// Records that compress ~200x on two partitions, read slowly: with the
// sizer the decompressed records a consumer holds stay near the bytes it
// was given; without it (the control) a fetch of that many compressed bytes
// holds many times more, which is what the test would see if the sizer did
// nothing.
func TestFetchSizerBoundsDecompressedBytes(t *testing.T) {
	const partitions, records, want = 2, 8000, 2 << 20
	c := kafkatest.Cluster(t, int32(partitions), sizerTopic)
	p := kafkatest.Client(t, c, kgo.ProducerBatchCompression(kgo.ZstdCompression()),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerLinger(10*time.Millisecond))
	text := strings.Repeat("the model answered the question about the weather; ", 80) // ~4 KB
	var recs []*kgo.Record
	for i := range records {
		recs = append(recs, &kgo.Record{Topic: sizerTopic, Value: fmt.Appendf(nil, `{"i":%d,"text":%q}`, i, text)})
	}
	if err := p.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	peak := func(sizer *FetchSizer) int64 {
		var most int64
		sizedConsumer(t, c, sizer, partitions, records, 20, func(*kgo.Record) {},
			func(b int64) { most = max(most, b) }, kgo.FetchMaxBytes(want), kgo.FetchMaxPartitionBytes(want))
		return most
	}
	control := peak(nil)
	if control < 4*want {
		t.Fatalf("without the sizer a fetch held %d KiB, under 4x the %d KiB asked: the records do not compress enough to test it", control>>10, want>>10)
	}
	s := NewFetchSizer(want)
	got := peak(s)
	// Each partition's part of a fetch may end inside a producer batch of
	// up to 64 KiB, and the first ask of a partition (4 KiB on the wire)
	// holds ~200 times that before the ratio is known.
	if limit := int64(want + partitions*(64<<10+200*firstAsk)); got > limit {
		t.Errorf("with the sizer the client held %d KiB decompressed, want at most %d KiB (without it: %d KiB)", got>>10, limit>>10, control>>10)
	}
	if a := asked(s); a >= want/partitions/64 {
		t.Errorf("asks each partition for %d bytes of records that compress ~200x, want well under %d", a, want/partitions/64)
	}
	t.Logf("held at most %d KiB with the sizer (asking %d KiB a partition), %d KiB without", got>>10, asked(s)>>10, control>>10)
}

// A read_committed consumer with small, sized fetches never reads a record
// of an aborted transaction. (A sizer asking the fetch for no more than its
// partitions' sum read aborted records in a few runs of ten here: kfake
// leaves out a partition's aborted transactions when the fetch's limit cuts
// a response inside it. TestFetchSizerAsks holds the limit above the sum.)
func TestFetchSizerReadCommitted(t *testing.T) {
	readCommitted(t, 6, 400, NewFetchSizer(192<<10))
}

// The asks follow the ratio and the partitions owned, never go below the
// largest recent batch, and the fetch's own limit stays above what the
// partitions' limits let through, one rejected batch each included (kfake
// counts a batch it did not return against the fetch's limit).
func TestFetchSizerAsks(t *testing.T) {
	const bytes = 4 << 20
	s := NewFetchSizer(bytes)
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, s.Options()...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s.Attach(cl)
	batch := func(compressed, uncompressed int) {
		s.OnFetchBatchRead(kgo.BrokerMetadata{}, sizerTopic, 0, kgo.FetchBatchMetrics{CompressedBytes: compressed, UncompressedBytes: uncompressed})
	}
	check := func(what string, want int32) {
		t.Helper()
		part := cl.OptValue(kgo.FetchMaxPartitionBytes).(int32)
		fetch := cl.OptValue(kgo.FetchMaxBytes).(int32)
		// The sizer resizes when the ask moves by more than a quarter.
		if part != asked(s) || part < want-want/4 || part > want+want/4 {
			t.Errorf("%s: asks %d (sizer says %d) of each partition, want %d", what, part, asked(s), want)
		}
		if lets := int64(s.partitions) * (int64(part) + int64(max(s.largest, s.prevLargest))); int64(fetch) <= lets {
			t.Errorf("%s: the fetch's limit %d is not above the %d bytes its %d partitions' limits let through", what, fetch, lets, s.partitions)
		}
	}
	check("before a batch", firstAsk)
	s.SetPartitions(2)
	check("before a batch, two partitions", firstAsk)
	for range 10 {
		batch(50<<10, 1<<20) // ~20x
	}
	check("20x, two partitions", bytes*50/1024/2)
	s.SetPartitions(16)
	check("20x, sixteen partitions: the largest batch", 50<<10)
	for range 1000 {
		batch(64<<10, 64<<10) // the ratio follows the data
	}
	check("uncompressed, sixteen partitions", bytes/16)
}

// readCommitted writes txns transactions of up to 60 ~1 KB records over
// the partitions, every third aborted, and reads them read_committed with
// the sizer.
func readCommitted(t *testing.T, partitions, txns int, s *FetchSizer) {
	t.Helper()
	c := kafkatest.Cluster(t, int32(partitions), sizerTopic)
	p := kafkatest.Client(t, c, kgo.TransactionalID("sizer"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx := context.Background()
	committed := 0
	for i := range txns {
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		abort := i%3 == 1
		n := 1 + mrand.IntN(60)
		for j := range n {
			// ~1 KB that does not compress: asks are near the bytes.
			pad := make([]byte, 500)
			_, _ = rand.Read(pad)
			v := fmt.Sprintf(`{"txn":%d,"i":%d,"aborted":%t,"pad":%q}`, i, j, abort, hex.EncodeToString(pad))
			p.Produce(ctx, &kgo.Record{Topic: sizerTopic, Value: []byte(v)}, nil)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		end := kgo.TryCommit
		if abort {
			end = kgo.TryAbort
		} else {
			committed += n
		}
		if err := p.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	read := 0
	sizedConsumer(t, c, s, partitions, committed, 7, func(r *kgo.Record) {
		read++
		if strings.Contains(string(r.Value), `"aborted":true`) {
			t.Fatalf("read a record of an aborted transaction: %.40s", r.Value)
		}
	}, func(int64) {}, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if read != committed {
		t.Errorf("read %d records, want the %d of committed transactions", read, committed)
	}
}

// A sized consumer reads its partitions together. With fetch sessions the
// broker kept the first, small ask of a partition that had not led a
// response yet, and the consumer read one partition to its end before the
// next.
func TestFetchSizerReadsPartitionsTogether(t *testing.T) {
	const partitions, perPartition = 2, 40
	c := kafkatest.Cluster(t, int32(partitions), sizerTopic)
	p := kafkatest.Client(t, c, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range partitions * perPartition {
		pad := make([]byte, 32<<10)
		_, _ = rand.Read(pad)
		r := &kgo.Record{Topic: sizerTopic, Partition: int32(i % partitions), Value: []byte(hex.EncodeToString(pad))}
		if err := p.ProduceSync(context.Background(), r).FirstErr(); err != nil { // a batch each
			t.Fatal(err)
		}
	}
	first := map[int32]int{}
	seen := 0
	sizedConsumer(t, c, NewFetchSizer(512<<10), partitions, partitions*perPartition, 1, func(r *kgo.Record) {
		if seen++; seen <= perPartition {
			first[r.Partition]++
		}
	}, func(int64) {})
	for p := range int32(partitions) {
		if first[p] < perPartition/partitions/2 {
			t.Errorf("partition %d had %d of the first %d records read, want about %d: %v", p, first[p], perPartition, perPartition/partitions, first)
		}
	}
}

// asked is what s last asked of each partition.
func asked(s *FetchSizer) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked
}
