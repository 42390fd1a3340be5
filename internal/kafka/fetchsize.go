package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FetchSizer keeps what one consumer's buffered fetches hold, decompressed,
// near a number of bytes (kafka.fetch_max_bytes). Kafka bounds a fetch by
// its bytes on the wire, compressed; franz-go decompresses a fetch as it
// arrives and holds it until polled, outside max_inflight_bytes, so records
// that compress 20x made a 4 MiB fetch hold ~80 MB. The sizer learns the
// ratio from the record batches fetched (a kgo.HookFetchBatchRead) and asks
// each partition for its share of the bytes divided by it.
//
// The limit is asked of each partition, and the fetch's own limit is set
// far above the partitions' sum, so the partitions' limits are what end a
// response: kfake (the test broker) leaves out a partition's aborted
// transactions when a response reaches the fetch's limit in the middle of
// that partition, and a read_committed consumer then reads them
// (docs/BENCHMARKS.md, "fetch_sizer").
type FetchSizer struct {
	bytes int64 // decompressed bytes the fetches may hold

	mu         sync.Mutex
	cl         *kgo.Client
	partitions int
	// compressed and uncompressed sum the recent batches' sizes, halved as
	// they pass a few fetches' worth so the ratio follows the data;
	// largest and prevLargest are the largest batch on the wire since the
	// last halving and in the window before it.
	compressed, uncompressed int64
	largest, prevLargest     int32
	asked                    int32 // the bytes last asked of each partition
}

const (
	// firstAsk is what the first fetches ask of each partition, before a
	// batch told the ratio: 4 KiB of records that compress 200x hold 800 KB.
	firstAsk = 4 << 10
	// maxPartitionAsk caps what a fetch takes of one partition.
	maxPartitionAsk = 16 << 20
	// fetchAsk is the fetch's own limit: above what the partitions' limits
	// let through on any but very wide assignments, and below franz-go's
	// 100 MiB BrokerMaxReadBytes, past which it refuses a response.
	fetchAsk = 64 << 20
)

// NewFetchSizer returns a sizer holding fetches near bytes.
func NewFetchSizer(bytes int64) *FetchSizer {
	return &FetchSizer{bytes: bytes, partitions: 1, asked: firstAsk}
}

// Options are the client options the sizer needs: itself as a hook, the
// first fetches' sizes, and no fetch sessions. In a fetch session
// (KIP-227) the broker keeps what each partition was last asked and the
// client sends a partition again only once its offset moved, so a
// partition first asked for 4 KiB kept that limit, returned nothing behind
// the partitions that led the response and never moved: a worker read its
// partitions one after another (TestFetchSizerReadsPartitionsTogether).
// Without sessions every fetch names each partition with the current ask;
// a worker fetches a few partitions, so the requests stay small.
func (s *FetchSizer) Options() []kgo.Opt {
	return []kgo.Opt{
		kgo.WithHooks(s),
		kgo.FetchMaxPartitionBytes(firstAsk),
		kgo.FetchMaxBytes(fetchAsk),
		kgo.DisableFetchSessions(),
	}
}

// Attach makes the sizer resize cl's fetches: the client made with Options.
func (s *FetchSizer) Attach(cl *kgo.Client) {
	s.mu.Lock()
	s.cl = cl
	s.mu.Unlock()
}

// SetPartitions tells the sizer how many partitions the consumer owns: they
// share the bytes.
func (s *FetchSizer) SetPartitions(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partitions = max(n, 1)
	s.resize()
}

// OnFetchBatchRead implements kgo.HookFetchBatchRead: it adds the batch to
// the ratio.
func (s *FetchSizer) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	if m.CompressedBytes <= 0 || m.UncompressedBytes <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compressed += int64(m.CompressedBytes)
	s.uncompressed += int64(m.UncompressedBytes)
	s.largest = max(s.largest, int32(m.CompressedBytes))
	if s.uncompressed > 4*s.bytes {
		s.compressed, s.uncompressed = s.compressed/2, s.uncompressed/2
		s.prevLargest, s.largest = s.largest, 0
	}
	s.resize()
}

// resize asks each partition for its share of the bytes on the wire, and at
// least the largest recent batch (a partition whose next batch is larger
// than its limit returns nothing unless it leads the response, KIP-74),
// when the ask moved by more than a quarter. Called with mu held.
func (s *FetchSizer) resize() {
	if s.uncompressed == 0 || s.cl == nil {
		return // no batch yet: the first, small asks stand
	}
	wire := s.bytes * min(s.compressed, s.uncompressed) / s.uncompressed
	ask := int32(min(max(wire/int64(s.partitions), int64(max(s.largest, s.prevLargest))), maxPartitionAsk))
	if ask > s.asked-s.asked/4 && ask < s.asked+s.asked/4 {
		return
	}
	s.asked = ask
	s.cl.UpdateFetchMaxBytes(fetchAsk, ask)
}
