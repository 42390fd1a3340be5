package pipeline

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// batch is a batch with what the pipeline keeps about it besides what the
// sink stages. Batch is handed to the sink (and dropped here) at staging.
type batch struct {
	*sink.Batch
	records int64   // records, stored and dead-lettered
	created []int64 // create_time of each stored record, unix nanos (freshness)
	bytes   int64   // bytes held for max_inflight_bytes: message values, or decoded rows
	// spilled: the batch's bytes were freed from the in-flight budget
	// before its load ended: the sink staged it out of memory (a
	// sink.FileStager), or its load read it (a sink.CommitReporter).
	spilled  bool
	dlqKinds map[string]int64 // decode dead-letter records by problem kind
	// rows and derived are Batch's buffers, kept from staging to the end of
	// the load for a sink that reads them until then (see buffers).
	rows, derived []byte
}

// decodedBytes is what the batch's decoded rows hold in memory.
func (b *batch) decodedBytes() int64 {
	return int64(len(b.Rows)+len(b.DLQ)+len(b.Derived)) + b.RoutedBytes
}

// RowDecoder turns one record into rows of a declared table (OTLP spans or
// logs), appended to the batch's Rows as NDJSON lines (and rows derived
// from them to its Derived), or into rows of routed tables (Routed,
// counted in RoutedBytes: ChangelogDecoder), raising its MaxLine: it returns the count of
// rows, or why the record cannot be decoded (it then leaves the batch as it
// was and the record is dead-lettered with that reason).
type RowDecoder interface {
	AppendRows(b *sink.Batch, r *kgo.Record) (rows int, err error)
}

// batcher encodes records into the open batch and closes it at max records,
// max bytes or max interval. It also tracks, per owned partition, the next
// offset expected, so each range starts where the previous one ended.
// Not safe for concurrent use; the worker guards it with its mutex.
type batcher struct {
	transform   bool
	valueEnc    envelope.ValueEncoding // how raw rows carry the value (the sink's choice)
	keepRecords bool                   // raw rows kept as records, for a sink that builds its own rows
	maxRecords  int
	maxBytes    int64
	maxInterval time.Duration

	cur     *batch
	index   map[sink.TopicPartition]int // range index in cur.Ranges
	records int
	opened  time.Time

	// next is the offset expected next of each partition: records below
	// it are already batched. It outlives a revoke: a partition that comes
	// back to this worker resumes past what the worker still holds.
	next map[sink.TopicPartition]int64
	// topicIDs are Kafka's ids of the topics read, as listed when their
	// partitions were assigned (setTopicIDs): each range carries its
	// topic's, for the sink to record with the position.
	topicIDs map[string]string
	// ready are batches closed out of turn (cut), to be sent before the
	// open one.
	ready []*batch
	// stalled are the partitions whose batching stopped this poll at a
	// record to decode again (takeStalled): their later records are
	// skipped until the worker reads from it again.
	stalled map[sink.TopicPartition]stall
	// decoder, when set, makes the rows of a declared table of each record
	// (OTLP) instead of raw or transform rows.
	decoder RowDecoder
	ids     *envelope.UUIDs
	id      [16]byte

	// lastSize is the bytes the last record added holds in memory (its
	// value; for a decoded record, its rows), for max_inflight_bytes.
	lastSize int64

	// lastRows is the size of the previous batch's rows: a new batch starts
	// with room for about as much, instead of growing (and copying) its
	// buffer a dozen times on the way to 16 MiB.
	lastRows int
	// lastDerived is the same for the rows derived from them.
	lastDerived int
	// rows and derived recycle the buffers of batches the sink is done
	// with (see buffers).
	rows, derived *buffers
}

func newBatcher(transform bool, maxRecords int, maxBytes int64, maxInterval time.Duration) *batcher {
	return &batcher{
		transform:   transform,
		maxRecords:  maxRecords,
		maxBytes:    maxBytes,
		maxInterval: maxInterval,
		index:       map[sink.TopicPartition]int{},
		next:        map[sink.TopicPartition]int64{},
		topicIDs:    map[string]string{},
		ids:         envelope.NewUUIDs(),
	}
}

// add encodes r into the open batch and returns the batch if r filled it;
// added is false when r was skipped as already batched, is a transaction
// marker, or stalled its partition (stalled).
func (b *batcher) add(r *kgo.Record, now time.Time) (full *batch, added bool) {
	tp := sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	if want, ok := b.next[tp]; ok && r.Offset < want {
		// Already batched (a fetch replayed after a seek); loading it again
		// would be skipped by the sink's ledger check anyway.
		return nil, false
	}
	if _, ok := b.stalled[tp]; ok {
		// Past a record to decode again: read again after it.
		return nil, false
	}
	if r.Attrs.IsControl() {
		// A transaction's commit or abort marker holds an offset and no
		// message. The range covers it, so the ledger stays contiguous and
		// the committed offset passes it: past a partition's last marker
		// is its end (lag 0, idle).
		b.rangeOf(tp, r.Offset, now)
		return nil, false
	}
	if b.decoder != nil {
		// Held in memory are the rows, not the message (dropped once
		// decoded): they count against the budget, usually 3-5 times
		// the protobuf's size.
		size, ok := b.addDecoded(tp, r, now)
		if !ok {
			return nil, false
		}
		b.lastSize = size
	} else {
		b.addJSON(r, b.rangeOf(tp, r.Offset, now))
		b.lastSize = messageBytes(r)
	}
	b.records++
	b.cur.bytes += b.lastSize
	if b.records >= b.maxRecords || b.cur.bytes >= b.maxBytes {
		return b.close(), true
	}
	return nil, true
}

// messageBytes is what a raw or transform record holds in memory until it
// loads: its value, key and headers, which its staged row (or dead letter,
// or the record a sink.RecordStager keeps) carries all of. Counting the
// value alone let records with large headers or keys and small values
// pass batch.max_bytes and max_inflight_bytes unbounded.
func messageBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// addJSON adds a JSON message: a raw or transform row, or a dead letter
// saying why the value cannot be one.
func (b *batcher) addJSON(r *kgo.Record, rg *sink.Range) {
	problem := envelope.Check(r.Value)
	if problem.OK() && b.transform {
		problem = envelope.CheckObject(r.Value)
	}
	if !problem.OK() {
		b.deadLetter(r, rg, problem)
		return
	}
	start := len(b.cur.Rows)
	switch {
	case b.transform:
		b.cur.Rows = envelope.AppendTransformRow(b.cur.Rows, r, b.valueEnc)
	case b.keepRecords:
		b.cur.Records = append(b.cur.Records, sink.Record{Record: r})
		b.ids.Next(&b.cur.Records[len(b.cur.Records)-1].ID)
	default:
		b.ids.Next(&b.id)
		b.cur.Rows = envelope.AppendRawRow(b.cur.Rows, r, &b.id, b.valueEnc)
	}
	b.cur.MaxLine = max(b.cur.MaxLine, len(b.cur.Rows)-start)
	rg.Records++
	b.cur.created = append(b.cur.created, r.Timestamp.UnixNano())
}

// addDecoded adds the rows the decoder makes of r (any number, none for
// an empty message), or a dead letter with the decoder's reason. A
// decoder that could not decide (sink.ErrTransient) stalls r's
// partition instead: no range covers r, and false says it was not added.
// size is what the rows added hold in memory.
func (b *batcher) addDecoded(tp sink.TopicPartition, r *kgo.Record, now time.Time) (size int64, added bool) {
	opened := b.open(now)
	held := b.cur.decodedBytes()
	n, err := b.decoder.AppendRows(b.cur.Batch, r)
	if errors.Is(err, sink.ErrTransient) {
		if opened {
			b.cur = nil // nothing else in it; an empty batch is no load
		}
		if b.stalled == nil {
			b.stalled = map[sink.TopicPartition]stall{}
		}
		b.stalled[tp] = stall{offset: r.Offset, err: err}
		return 0, false
	}
	rg := b.rangeOf(tp, r.Offset, now)
	if err != nil {
		b.deadLetter(r, rg, envelope.Problem{Kind: envelope.KindUndecodable, Reason: err.Error()})
	} else {
		rg.Records += int64(n)
		b.cur.created = append(b.cur.created, r.Timestamp.UnixNano())
	}
	return b.cur.decodedBytes() - held, true
}

// stall is where a partition's batching stopped: the record the decoder
// could not decide on, which the worker reads again.
type stall struct {
	offset int64
	err    error
}

// takeStalled returns the partitions stalled since the last call, each
// with the offset to read again from, and batches them again from there.
func (b *batcher) takeStalled() map[sink.TopicPartition]stall {
	s := b.stalled
	b.stalled = nil
	return s
}

func (b *batcher) deadLetter(r *kgo.Record, rg *sink.Range, problem envelope.Problem) {
	start := len(b.cur.DLQ)
	b.cur.DLQ = envelope.AppendDLQRow(b.cur.DLQ, r, problem.Reason, envelope.StageDecode)
	b.cur.MaxLine = max(b.cur.MaxLine, len(b.cur.DLQ)-start)
	rg.DLQ++
	if b.cur.dlqKinds == nil {
		b.cur.dlqKinds = map[string]int64{}
	}
	b.cur.dlqKinds[problem.Kind]++
}

// open opens a batch unless one is open, and says whether it did.
func (b *batcher) open(now time.Time) bool {
	if b.cur != nil {
		return false
	}
	b.cur = &batch{
		Batch:   &sink.Batch{Rows: b.rows.get(b.lastRows), Derived: b.derived.get(b.lastDerived)},
		created: make([]int64, 0, b.maxRecords),
	}
	if b.keepRecords {
		b.cur.Records = make([]sink.Record, 0, min(b.maxRecords, 1<<16))
	}
	b.opened = now
	return true
}

// rangeOf returns tp's range in the open batch, opening either as needed,
// extended to offset. A new range starts where the previous one ended.
func (b *batcher) rangeOf(tp sink.TopicPartition, offset int64, now time.Time) *sink.Range {
	b.open(now)
	i, ok := b.index[tp]
	if !ok {
		first, known := b.next[tp]
		if !known {
			first = offset
		}
		i = len(b.cur.Ranges)
		b.index[tp] = i
		b.cur.Ranges = append(b.cur.Ranges, sink.Range{TopicPartition: tp, First: first, TopicID: b.topicIDs[tp.Topic]})
	}
	rg := &b.cur.Ranges[i]
	rg.Last = offset
	b.next[tp] = offset + 1
	return rg
}

// due reports when the open batch must close, or the zero time if none is open.
func (b *batcher) due() time.Time {
	if b.cur == nil {
		return time.Time{}
	}
	return b.opened.Add(b.maxInterval)
}

// closeIfDue closes the open batch if its interval has passed.
func (b *batcher) closeIfDue(now time.Time) *batch {
	if b.cur != nil && !now.Before(b.due()) {
		return b.close()
	}
	return nil
}

// close closes the open batch (nil if none) and returns it.
func (b *batcher) close() *batch {
	out := b.cur
	if out == nil {
		return nil
	}
	slices.SortFunc(out.Ranges, func(x, y sink.Range) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	b.lastRows, b.lastDerived = len(out.Rows), len(out.Derived)
	out.records = int64(b.records)
	out.ID = sink.NewBatchID()
	b.cur, b.records = nil, 0
	clear(b.index)
	return out
}

// setNext records where reading of tp starts (-1: unknown until the first
// record arrives). Moving it, it cuts the open batch first: a range never
// goes backwards, so re-read offsets start a new batch; nor does it go on
// over offsets it did not read. A partition that resumes past what this
// worker holds of it (another owner loaded the offsets between, or
// retention deleted them before anyone read them) starts a new range
// there, so the ledger shows a hole, and verify reports it, unless
// another load covers it.
func (b *batcher) setNext(tp sink.TopicPartition, offset int64) {
	if cur, ok := b.next[tp]; ok && (offset < 0 || offset != cur) {
		b.cut(tp)
	}
	if offset < 0 {
		delete(b.next, tp)
		return
	}
	b.next[tp] = offset
}

// cut closes the open batch, to be sent before anything after it, if it
// holds a range of tp: the range must not go on (backwards, or over a
// gap).
func (b *batcher) cut(tp sink.TopicPartition) {
	if _, ok := b.index[tp]; ok {
		b.ready = append(b.ready, b.close())
	}
}

// takeReady returns the batches cut out of turn, oldest first.
func (b *batcher) takeReady() []*batch {
	r := b.ready
	b.ready = nil
	return r
}

// openBytes is what the open batch and the batches cut before it hold of
// max_inflight_bytes.
func (b *batcher) openBytes() int64 {
	var n int64
	if b.cur != nil {
		n = b.cur.bytes
	}
	for _, r := range b.ready {
		n += r.bytes
	}
	return n
}

// closeAll closes the open batch and returns it after the batches cut
// before it, in the order they must be sent.
func (b *batcher) closeAll() []*batch {
	out := b.takeReady()
	if c := b.close(); c != nil {
		out = append(out, c)
	}
	return out
}

// nextOf returns the next offset expected of tp, if known.
func (b *batcher) nextOf(tp sink.TopicPartition) (int64, bool) {
	n, ok := b.next[tp]
	return n, ok
}
