package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// Load-sized files. A worker stages a batch every fraction of a second and
// loads what it staged once per commit interval; written one file per
// batch, that is ~80 files a second at 100 MB/s, millions a day. Instead
// the batches of one stream (a worker: sink.Batch.Stream) go into writers
// kept open across them, one per table and partition, rolled at the
// table's target file size (write.target-file-size-bytes, else
// Options.TargetFileBytes, compaction's target), until the stream's next
// load closes them: the batches written together are one staged entry,
// fenced at the commit by the union of their ranges (refence writes it
// again without what the positions cover, as for one batch).
//
// The load closes the writers at the moment it begins, with every batch
// written so far: a worker stages its next batch while its load of the
// ones before runs, and a batch written into the open files cannot be
// taken out of them. Such a batch is committed with the load, its
// positions with it, and its own load later finds it committed
// (committedEarly). A batch that covers offsets the open files already
// hold (a partition read again), or whose columns differ from theirs (the
// table gained a column), starts a new entry, committed after the first.
//
// Memory: a writer buffers the row group it is filling. Row groups are
// sized at a sixty-fourth of the target file in Arrow bytes
// (loadRowGroupBytesOf), and a stream's
// writers hold at most writerBytes between them: past it, the writer
// buffering the most finishes its file early. The pipeline takes the
// streams' share out of max_inflight_bytes (sink.MemoryHolder). Not
// counted: the batches still in iceberg-go's writer (its goroutines and
// channels, a few per writer) after Stage handed them over.
//
// Crash safety: files being written are in the staging leases from the
// moment each is created (noticeCreates), so `tracelake orphans` keeps
// them; after a crash nothing references them and orphan cleanup removes
// them once the lease is stale. A write that fails loses the rows of
// every batch written into the entry before it: the load fails with
// sink.ErrFatal and the records are read again from Kafka.

const (
	// defaultLoadFileBytes is the target size of load files when neither
	// the table nor Options set one: hot data is queried often, so files
	// stay well below iceberg-go's 512 MiB default.
	defaultLoadFileBytes = 128 << 20
	// defaultWriterBytes is a stream's open writers' memory when the
	// pipeline gives none (HoldUpTo).
	defaultWriterBytes = 32 << 20
)

// openEntry is a staged entry whose writers are still open.
type openEntry struct {
	mu     sync.Mutex
	stream string
	// ctx is the writers'; canceled, they stop (an entry failed or
	// discarded).
	ctx    context.Context
	cancel context.CancelFunc
	st     *staged
	tables map[kind]*openTable
	err    error // a write failed: the entry's rows are lost with it
	// seen is the last offset written per partition, to start a new
	// entry for a batch that covers one of them again.
	seen map[sink.TopicPartition]int64
}

// openTable is an entry's writers into one table.
type openTable struct {
	view     *table.Table // the table as written: write properties, created files leased
	sc       *arrow.Schema
	opts     []table.WriteRecordOption
	rowBytes int64 // Arrow bytes per row, of the first batch
	rgRows   int64
	keyOf    partitionKeyer
	parts    map[string]*partWriter
}

// partWriter writes one partition's rows as iceberg-go's writer, fed
// batch by batch through recs.
type partWriter struct {
	recs     chan arrow.RecordBatch
	finished chan struct{} // closed when the writer has ended; then files, err
	files    []iceberggo.DataFile
	err      error
	rows     int64 // rows fed
}

// loadRowGroupBytesOf is the Arrow bytes of a load file's row groups for
// a target: a sixty-fourth of it, 2 MiB at 128 MiB. A writer buffers the
// row group it fills (arrow-go's buffered row group writer), and holds
// several times its Arrow bytes doing so: with a sixteenth, as
// compaction's row groups, `tracelake run` into Iceberg peaked at 574–700
// MiB where a file per batch had peaked at 515–577, with a sixty-fourth
// at 403–494 (docs/BENCHMARKS.md, "load_sized_files"). Compaction
// rewrites the files in row groups sized for queries.
func loadRowGroupBytesOf(target int64) int64 { return max(target/64, 1<<10) }

// buffered is what w's open row group holds, at most, in Arrow bytes.
func (t *openTable) buffered(w *partWriter) int64 { return w.rows % t.rgRows * t.rowBytes }

// HoldUpTo makes the sink a sink.MemoryHolder: the pipeline gives the
// streams' open writers bytes of max_inflight_bytes, shared by streams.
func (s *Sink) HoldUpTo(bytes int64, streams int) {
	s.writing.Lock()
	s.writerBytes = max(bytes/int64(max(streams, 1)), 1<<20)
	s.writing.Unlock()
}

// stageOpen writes b into the open writers of its stream, and records it
// as staged there.
func (s *Sink) stageOpen(ctx context.Context, b *sink.Batch, f *sink.File) error {
	recs := map[kind]arrow.RecordBatch{}
	counts := map[kind]map[sink.TopicPartition]int64{}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	// Everything that can fail without harm first: a failure after the
	// first row is written would leave part of the batch in the entry.
	schemas := map[kind]*arrow.Schema{}
	for _, k := range s.kinds() {
		_, sc, err := s.tableSchema(ctx, k)
		if err != nil {
			return err
		}
		counts[k] = map[sink.TopicPartition]int64{}
		rec, err := s.buildRecord(sc, b, k, counts[k])
		if err != nil {
			return err
		}
		if rec != nil {
			recs[k], schemas[k] = rec, sc
			f.Bytes += recordBytes(rec)
		}
	}
	var e *openEntry
	for {
		e = s.openEntryFor(b, schemas)
		e.mu.Lock()
		if e.tables != nil {
			break
		}
		e.mu.Unlock() // closed by a load meanwhile: the batch goes into a new entry
	}
	defer e.mu.Unlock()
	if e.err == nil {
		for _, k := range s.kinds() {
			if rec := recs[k]; rec != nil {
				if e.err = s.writeOpen(ctx, e, k, rec); e.err != nil {
					break
				}
			}
		}
	}
	if e.err != nil {
		if len(e.st.names) == 0 {
			// Nothing else was written into it: its files go now.
			e.mu.Unlock()
			s.abortEntry(ctx, e)
			e.mu.Lock()
		}
		return fmt.Errorf("%w: writing batch %s into the open data files of its stream: %w "+
			"(the rows of the batches written before it are lost with them: they are read again from Kafka)", sink.ErrFatal, b.Name(), e.err)
	}
	s.mu.Lock()
	for _, k := range s.kinds() {
		sf := e.st.of(k)
		for tp, n := range counts[k] {
			sf.counts[tp] += n
		}
	}
	for _, r := range b.Ranges {
		e.st.ranges = addRange(e.st.ranges, r, 0, 0)
	}
	e.st.names = append(e.st.names, f.Name)
	e.st.batches[f.Name] = &earlyRows{rows: counts[mainTable], dlq: counts[dlqTable]}
	s.kept[f.Name] = e.st
	s.mu.Unlock()
	sink.Advance(e.seen, b.Ranges)
	return nil
}

// buildRecord is b's rows of table k as an Arrow record batch of schema
// sc (nil if none), added to counts per partition.
func (s *Sink) buildRecord(sc *arrow.Schema, b *sink.Batch, k kind, counts map[sink.TopicPartition]int64) (arrow.RecordBatch, error) {
	switch {
	case k == dlqTable:
		return buildDLQRecord(sc, b.DLQ, time.Now(), counts)
	case k == derivedTable:
		return buildTypedRecord(sc, s.opt.Derived, b.Derived, counts)
	case s.opt.Typed != nil:
		return buildTypedRecord(sc, s.opt.Typed, b.Rows, counts)
	}
	return buildRawRecord(sc, b.Records, time.Now(), s.eventAt, counts), nil
}

// openEntryFor is the open entry of b's stream that b may be written
// into: a new one when there is none, or when b covers an offset the
// entry holds or its columns differ from the entry's (the entry before is
// closed then, and waits for the load as it is).
func (s *Sink) openEntryFor(b *sink.Batch, schemas map[kind]*arrow.Schema) *openEntry {
	s.writing.Lock()
	e := s.streams[b.Stream]
	s.writing.Unlock()
	if e != nil {
		e.mu.Lock()
		fits := e.tables != nil && e.err == nil && !sink.Overlaps(e.seen, b.Ranges)
		for k, sc := range schemas {
			if t := e.tables[k]; t != nil && !t.sc.Equal(sc) {
				fits = false
			}
		}
		e.mu.Unlock()
		if fits {
			return e
		}
		// Closed now, its files are ready when the load comes (or its
		// error, which fails that load).
		_ = s.closeEntry(e)
	}
	e = &openEntry{stream: b.Stream, tables: map[kind]*openTable{}, seen: map[sink.TopicPartition]int64{},
		st: &staged{at: time.Now(), batches: map[string]*earlyRows{}}}
	e.ctx, e.cancel = context.WithCancel(s.writeCtx)
	e.st.open = e
	for _, k := range s.kinds() {
		e.st.of(k).counts = map[sink.TopicPartition]int64{}
	}
	s.writing.Lock()
	s.streams[b.Stream] = e
	s.writing.Unlock()
	return e
}

// writeOpen writes rec into the entry's writers of table k, split by
// partition, opening writers as needed; past the stream's memory, the
// writers buffering the most finish their files. Under e.mu.
func (s *Sink) writeOpen(ctx context.Context, e *openEntry, k kind, rec arrow.RecordBatch) error {
	t := e.tables[k]
	if t == nil {
		var err error
		if t, err = s.openTableFor(ctx, e, k, rec); err != nil {
			return err
		}
		e.tables[k] = t
	}
	parts, err := t.keyOf.split(ctx, rec)
	if err != nil {
		return fmt.Errorf("split the rows of %s by partition: %w", name(s.id(k)), err)
	}
	for key, part := range parts {
		w := t.parts[key]
		if w == nil {
			w = t.start(e.ctx)
			t.parts[key] = w
		}
		part.Retain() // iceberg-go's writer releases what it takes
		select {
		case w.recs <- part:
			w.rows += part.NumRows()
		case <-w.finished:
			part.Release()
			return cmp.Or(w.err, errors.New("the writer of a partition of "+name(s.id(k))+" ended early"))
		case <-ctx.Done():
			// A hard shutdown while the store hangs: the entry fails,
			// its batches are read again.
			part.Release()
			return fmt.Errorf("stopped while the writer of a partition of %s was busy: %w", name(s.id(k)), ctx.Err())
		}
	}
	for _, part := range parts {
		part.Release()
	}
	return s.boundMemory(e)
}

// openTableFor opens an entry's writing into table k, sized by rec.
func (s *Sink) openTableFor(ctx context.Context, e *openEntry, k kind, rec arrow.RecordBatch) (*openTable, error) {
	tbl, err := s.table(ctx, s.id(k))
	if err != nil {
		return nil, err
	}
	target := cmp.Or(s.opt.TargetFileBytes, defaultLoadFileBytes)
	if v, err := strconv.ParseInt(tbl.Properties()[table.WriteTargetFileSizeBytesKey], 10, 64); err == nil && v > 0 {
		target = v
	}
	rowBytes := max(recordBytes(rec)/max(rec.NumRows(), 1), 1)
	rgRows := min(max(loadRowGroupBytesOf(target)/rowBytes, 1024), 1<<20)
	sf := e.st.of(k)
	created := func(path string) {
		s.mu.Lock()
		sf.creating = append(sf.creating, path)
		s.mu.Unlock()
	}
	view := compactView(tbl, int(rgRows))
	view = table.New(view.Identifier(), view.Metadata(), view.MetadataLocation(), noticeCreates(view.FS, created), nil)
	return &openTable{
		view: view, sc: rec.Schema(), rowBytes: rowBytes, rgRows: rgRows, keyOf: partitionKeyerOf(tbl, rec.Schema()),
		parts: map[string]*partWriter{},
		opts: []table.WriteRecordOption{table.WithTargetFileSize(writerTarget(target)), table.WithParquetRowGroupLimit(int(rgRows)),
			table.WithMaxWriteWorkers(1), table.WithRecordBatchBufferSize(1)},
	}, nil
}

// start starts a writer of t's, running until its recs are closed.
func (t *openTable) start(ctx context.Context) *partWriter {
	w := &partWriter{recs: make(chan arrow.RecordBatch), finished: make(chan struct{})}
	go func() {
		defer close(w.finished)
		fed := func(yield func(arrow.RecordBatch, error) bool) {
			for rec := range w.recs {
				if !yield(rec, nil) {
					return
				}
			}
		}
		for df, err := range table.WriteRecords(ctx, t.view, t.sc, fed, t.opts...) {
			if err != nil {
				w.err = err
				break
			}
			w.files = append(w.files, df)
		}
		if w.err == nil && ctx.Err() != nil {
			w.err = ctx.Err()
		}
	}()
	return w
}

// boundMemory finishes the files of the entry's writers buffering the
// most until the entry's writers buffer at most the stream's share.
func (s *Sink) boundMemory(e *openEntry) error {
	s.writing.Lock()
	limit := s.writerBytes
	s.writing.Unlock()
	for {
		var held, most int64
		var kMost kind
		var keyMost string
		for k, t := range e.tables {
			for key, w := range t.parts {
				b := t.buffered(w)
				held += b
				if b > most {
					most, kMost, keyMost = b, k, key
				}
			}
		}
		if held <= limit || most == 0 {
			return nil
		}
		t := e.tables[kMost]
		w := t.parts[keyMost]
		delete(t.parts, keyMost)
		if err := s.finish(e, kMost, w); err != nil {
			return err
		}
	}
}

// finish ends w's files and adds them to the entry's of table k.
func (s *Sink) finish(e *openEntry, k kind, w *partWriter) error {
	close(w.recs)
	<-w.finished
	if w.err != nil {
		return w.err
	}
	if err := wroteAll(w.files, w.rows); err != nil {
		return fmt.Errorf("%s: %w", name(s.id(k)), err)
	}
	sf := e.st.of(k)
	s.mu.Lock()
	sf.files = append(sf.files, w.files...)
	s.mu.Unlock()
	return nil
}

// wroteAll checks that files hold the rows given to their writer:
// iceberg-go's partitioned writer drops a file whose writing failed,
// with its rows, and its error, when the failure comes before the next
// rows of the file's partition, and goes on in a new file.
func wroteAll(files []iceberggo.DataFile, rows int64) error {
	var n int64
	for _, df := range files {
		n += df.Count()
	}
	if n != rows {
		return fmt.Errorf("the data files written hold %d of the %d rows given to their writer: a file failed and its rows were dropped", n, rows)
	}
	return nil
}

// closeEntry finishes the files of an open entry: after it no batch is
// written into it, and its files are those of its staged entry. It
// returns the error of a write that failed, with the rows lost.
func (s *Sink) closeEntry(e *openEntry) error {
	s.writing.Lock()
	if s.streams[e.stream] == e {
		delete(s.streams, e.stream)
	}
	s.writing.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.tables != nil && e.err != nil {
		// Failed: its files are never committed, so its writers are
		// stopped, not waited for (a store that hangs would hold a hard
		// shutdown).
		e.cancel()
		e.tables = nil
	}
	if e.tables != nil {
		for k, t := range e.tables {
			for _, w := range t.parts {
				if err := s.finish(e, k, w); err != nil && e.err == nil {
					e.err = err
				}
			}
		}
		e.tables = nil
		e.cancel()
		if e.err == nil {
			// A failed entry keeps its open entry, closed: its load
			// (closeAll) finds the error, whoever closed it (a batch
			// read again, the next batch after a failed write).
			s.mu.Lock()
			e.st.open = nil
			s.mu.Unlock()
		}
	}
	return e.err
}

// sealStream closes the stream's open entry, if any: no later batch of
// the stream is written with the batches in it. A stage that failed
// calls it, so that a batch staged after the failed one is not committed
// with those before (its positions past the failed batch's records).
func (s *Sink) sealStream(stream string) {
	s.writing.Lock()
	e := s.streams[stream]
	s.writing.Unlock()
	if e != nil {
		_ = s.closeEntry(e) // a write's error stays with the entry, for its load
	}
}

// abortEntry stops an open entry's writers and forgets its batches, their
// files deleted: they will not be loaded. Closed first, it takes no batch
// after.
func (s *Sink) abortEntry(ctx context.Context, e *openEntry) {
	e.cancel() // its files go: they need not be finished first
	_ = s.closeEntry(e)
	s.forget(ctx, e.st)
}

// closeAll closes the open entries of the entries (before their commit):
// an entry whose write failed, when it was closed or before, fails the
// load with sink.ErrFatal, and is forgotten.
func (s *Sink) closeAll(ctx context.Context, entries []*staged) error {
	for _, st := range entries {
		s.mu.Lock()
		e := st.open
		s.mu.Unlock()
		if e == nil {
			continue
		}
		if err := s.closeEntry(e); err != nil {
			batch := s.forget(ctx, st)
			return fmt.Errorf("%w: the data files of batch %s and those written with it failed: %w: nothing of the load was committed, and its records are read again from Kafka",
				sink.ErrFatal, batch, err)
		}
	}
	return nil
}

// partitionKeyer tells the partitions of a table's rows apart, as its
// partition spec does, for the writers' memory (iceberg-go's writer
// partitions the rows itself): day and identity fields; a spec with other
// transforms is one key.
type partitionKeyer struct {
	cols []int  // Arrow column per field
	day  []bool // the field is a day of a timestamp; else identity
}

func partitionKeyerOf(tbl *table.Table, sc *arrow.Schema) partitionKeyer {
	var k partitionKeyer
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		src, ok := tbl.Schema().FindFieldByID(f.SourceID())
		if !ok {
			return partitionKeyer{}
		}
		idx := sc.FieldIndices(src.Name)
		if len(idx) != 1 {
			return partitionKeyer{}
		}
		switch f.Transform.(type) {
		case iceberggo.DayTransform:
			if _, ok := sc.Field(idx[0]).Type.(*arrow.TimestampType); !ok {
				return partitionKeyer{}
			}
			k.day = append(k.day, true)
		case iceberggo.IdentityTransform:
			k.day = append(k.day, false)
		default:
			return partitionKeyer{}
		}
		k.cols = append(k.cols, idx[0])
	}
	return k
}

// split is rec's rows by partition key. A record of one partition is
// itself (retained), the common case, found without a string per row.
func (k partitionKeyer) split(ctx context.Context, rec arrow.RecordBatch) (map[string]arrow.RecordBatch, error) {
	n := int(rec.NumRows())
	first := k.appendKey(nil, rec, 0)
	var buf []byte
	i := 1
	for ; i < n; i++ {
		if buf = k.appendKey(buf[:0], rec, i); !bytes.Equal(buf, first) {
			break
		}
	}
	if i >= n {
		rec.Retain()
		return map[string]arrow.RecordBatch{string(first): rec}, nil
	}
	rows := map[string][]int32{}
	for i := range n {
		buf = k.appendKey(buf[:0], rec, i)
		rows[string(buf)] = append(rows[string(buf)], int32(i))
	}
	out := map[string]arrow.RecordBatch{}
	for key, idx := range rows {
		b := array.NewInt32Builder(memory.DefaultAllocator)
		b.AppendValues(idx, nil)
		ids := b.NewInt32Array()
		b.Release()
		taken, err := compute.Take(ctx, *compute.DefaultTakeOptions(), compute.NewDatumWithoutOwning(rec), compute.NewDatumWithoutOwning(ids))
		ids.Release()
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, err
		}
		out[key] = taken.(*compute.RecordDatum).Value
	}
	return out, nil
}

// appendKey appends row i's partition key to b.
func (k partitionKeyer) appendKey(b []byte, rec arrow.RecordBatch, i int) []byte {
	for j, c := range k.cols {
		col := rec.Column(c)
		switch {
		case col.IsNull(i):
			b = append(b, 0)
		case k.day[j]:
			per := int64(24 * time.Hour / col.DataType().(*arrow.TimestampType).Unit.Multiplier())
			v := int64(col.(*array.Timestamp).Value(i))
			day := v / per
			if v%per < 0 {
				day--
			}
			b = strconv.AppendInt(b, day, 10)
		case col.DataType().ID() == arrow.STRING:
			b = append(b, col.(*array.String).Value(i)...)
		default:
			b = append(b, col.ValueStr(i)...)
		}
		b = append(b, 1)
	}
	return b
}
