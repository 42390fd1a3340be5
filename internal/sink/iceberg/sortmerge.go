package iceberg

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Sorted compaction in bounded memory: an external merge sort. The
// partition's files are read as Arrow record batches, a few thousand rows
// at a time; rows gather into a run until it holds compactRunBytes of
// Arrow buffers, the run is sorted (an index of its rows, compared column
// by column of the sort order) and spilled to a local temporary file in
// Arrow IPC (zstd), in batches of about mergeBatchBytes. Once every file
// was read, the runs are merged (a heap of one cursor per run, each
// holding one batch) into batches of about outBatchBytes, which
// iceberg-go's writer turns into data files rolled at the target size.
// More than mergeFanIn runs are first merged mergeFanIn at a time into
// longer runs, so the cursors' memory does not grow with the partition.
// A partition that fits in one run is sorted in memory and never spilled.
//
// Why not sorted runs written straight as data files, with ranges that
// overlap only across runs: a run is bounded by memory, a data file by
// compressed bytes, and traces compress 5-100x, so a run of 128 MiB of
// Arrow buffers is a file far below the target. Files under 3/4 of the
// target are what the next round compacts again (so it never converges),
// and every run's file spans the whole trace-id range, so a lookup opens
// one file per run. Merged, the output files' trace-id ranges do not
// overlap: a lookup opens one of them. The price is local disk for the
// spilled runs, about the partition's compressed size, and reading the
// rows twice more (spill, merge).
//
// Memory, independent of the partition's size: the run being gathered and
// its index (compactRunBytes plus 8 bytes a row), or while merging
// mergeFanIn batches of mergeBatchBytes; plus one batch from the reader,
// the output batch being built, the writer's queue (compactWriteQueue
// batches of outBatchBytes) and the Parquet row group it encodes (at most
// about the target / 16, rowGroupBytesOf). With the defaults about
// 128 + 16 + 8 + 3×8 + 8 MiB ≈ 190 MiB of Arrow buffers; measured, with
// the garbage the collector has yet to take, ~400 MiB of Go heap and
// ~500 MiB of RSS for partitions of 300,000 and 900,000 spans alike
// (docs/BENCHMARKS.md, "compaction_streams").

var (
	// compactRunBytes is the Arrow bytes of rows a run gathers before it
	// is sorted and spilled. (Variables for tests, which use small ones.)
	compactRunBytes int64 = 128 << 20
	// mergeBatchBytes is the size of a spilled batch: what each run's
	// cursor holds while the runs are merged.
	mergeBatchBytes int64 = 1 << 20
	// mergeFanIn is how many runs are merged at once.
	mergeFanIn = 16
	// outBatchBytes is the size of the batches handed to the writer.
	outBatchBytes int64 = 8 << 20
)

// compactWriteQueue is the writer's queue of batches (iceberg-go's
// default, 64, would hold 64 output batches while Parquet encodes).
const compactWriteQueue = 2

// compactReadBatchRows is the rows per batch read from the files to
// compact.
const compactReadBatchRows = 4096

// peakRowsHeld is the most rows the last sorted compaction held at once
// in its own hands (read, gathered, spilled batch being built, cursors,
// output batch). A test measures the memory bound with it.
var peakRowsHeld atomic.Int64

// rowOrder compares rows of record batches of one schema by a table's
// sort order.
type rowOrder []orderKey

type orderKey struct {
	col        int
	desc       bool
	nullsFirst bool
	cmp        func(a, b arrow.Array, i, j int) int
}

// newRowOrder maps tbl's sort order onto the columns of sc. Only identity
// transforms of primitive columns can be compared.
func newRowOrder(tbl *table.Table, sc *arrow.Schema) (rowOrder, error) {
	var o rowOrder
	for _, f := range tbl.SortOrder().Fields() {
		field, ok := tbl.Schema().FindFieldByID(f.SourceID())
		if !ok {
			return nil, fmt.Errorf("sort field %d is not in the schema", f.SourceID())
		}
		if _, identity := f.Transform.(iceberggo.IdentityTransform); !identity {
			return nil, fmt.Errorf("sort order on %s(%s): only identity transforms are compacted in order", f.Transform, field.Name)
		}
		idx := sc.FieldIndices(field.Name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("sort column %s is not read", field.Name)
		}
		c, err := comparerOf(sc.Field(idx[0]).Type)
		if err != nil {
			return nil, fmt.Errorf("sort column %s: %w", field.Name, err)
		}
		o = append(o, orderKey{col: idx[0], desc: f.Direction == table.SortDESC, nullsFirst: f.NullOrder == table.NullsFirst, cmp: c})
	}
	if len(o) == 0 {
		return nil, errors.New("the table has no sort order")
	}
	return o, nil
}

func comparerOf(t arrow.DataType) (func(a, b arrow.Array, i, j int) int, error) {
	switch t.ID() {
	case arrow.STRING:
		return compareValues[string, *array.String], nil
	case arrow.LARGE_STRING:
		return compareValues[string, *array.LargeString], nil
	case arrow.BINARY:
		return func(a, b arrow.Array, i, j int) int {
			return bytes.Compare(a.(*array.Binary).Value(i), b.(*array.Binary).Value(j))
		}, nil
	case arrow.INT32:
		return compareValues[int32, *array.Int32], nil
	case arrow.INT64:
		return compareValues[int64, *array.Int64], nil
	case arrow.TIMESTAMP:
		return compareValues[arrow.Timestamp, *array.Timestamp], nil
	case arrow.DATE32:
		return compareValues[arrow.Date32, *array.Date32], nil
	case arrow.FLOAT64:
		return compareValues[float64, *array.Float64], nil
	}
	return nil, fmt.Errorf("type %s cannot be compared", t)
}

// compareValues compares value i of a with value j of b, arrays of type A.
func compareValues[T cmp.Ordered, A interface{ Value(int) T }](a, b arrow.Array, i, j int) int {
	return cmp.Compare(a.(A).Value(i), b.(A).Value(j))
}

// compare orders row i of a against row j of b.
func (o rowOrder) compare(a arrow.RecordBatch, i int, b arrow.RecordBatch, j int) int {
	for _, k := range o {
		x, y := a.Column(k.col), b.Column(k.col)
		xn, yn := x.IsNull(i), y.IsNull(j)
		switch {
		case xn && yn:
			continue
		case xn != yn:
			if xn == k.nullsFirst {
				return -1
			}
			return 1
		}
		c := k.cmp(x, y, i, j)
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// rowBuilder builds record batches of one schema out of rows of others.
type rowBuilder struct {
	b    *array.RecordBuilder
	rows int
}

func newRowBuilder(sc *arrow.Schema) *rowBuilder {
	return &rowBuilder{b: array.NewRecordBuilder(memory.DefaultAllocator, sc)}
}

func (rb *rowBuilder) add(rec arrow.RecordBatch, i int) error {
	for c, col := range rec.Columns() {
		if err := appendValue(rb.b.Field(c), col, i); err != nil {
			return fmt.Errorf("column %s: %w", rec.ColumnName(c), err)
		}
	}
	rb.rows++
	return nil
}

// take returns the rows added so far as a batch and starts a new one.
func (rb *rowBuilder) take() arrow.RecordBatch {
	rb.rows = 0
	return rb.b.NewRecordBatch()
}

func (rb *rowBuilder) release() { rb.b.Release() }

// appendValue appends value i of a to b, of the same type.
func appendValue(b array.Builder, a arrow.Array, i int) error {
	if a.IsNull(i) {
		b.AppendNull()
		return nil
	}
	switch b := b.(type) {
	case *array.StringBuilder:
		b.Append(a.(*array.String).Value(i))
	case *array.LargeStringBuilder:
		b.Append(a.(*array.LargeString).Value(i))
	case *array.BinaryBuilder:
		switch a := a.(type) {
		case *array.Binary:
			b.Append(a.Value(i))
		case *array.LargeBinary:
			b.Append(a.Value(i))
		default:
			return fmt.Errorf("cannot append %s to a binary column", a.DataType())
		}
	case *array.Int32Builder:
		b.Append(a.(*array.Int32).Value(i))
	case *array.Int64Builder:
		b.Append(a.(*array.Int64).Value(i))
	case *array.Float64Builder:
		b.Append(a.(*array.Float64).Value(i))
	case *array.Float32Builder:
		b.Append(a.(*array.Float32).Value(i))
	case *array.BooleanBuilder:
		b.Append(a.(*array.Boolean).Value(i))
	case *array.TimestampBuilder:
		b.Append(a.(*array.Timestamp).Value(i))
	case *array.Date32Builder:
		b.Append(a.(*array.Date32).Value(i))
	case *array.Time64Builder:
		b.Append(a.(*array.Time64).Value(i))
	case *array.Decimal128Builder:
		b.Append(a.(*array.Decimal128).Value(i))
	case *array.FixedSizeBinaryBuilder:
		b.Append(a.(*array.FixedSizeBinary).Value(i))
	default:
		// Columns of other types (none in tracelake's tables) by their
		// text form: slower, not wrong.
		return b.AppendValueFromString(a.ValueStr(i))
	}
	return nil
}

// externalSort sorts the rows added to it by a rowOrder in bounded memory
// (see the top of this file).
type externalSort struct {
	sc    *arrow.Schema
	order rowOrder
	dir   string   // spilled runs, created at the first spill
	lock  *os.File // held on dir while it exists (removeStaleSpills)

	run      []arrow.RecordBatch // rows gathered, not yet sorted
	runBytes int64
	runs     []string // spilled runs, each sorted
	nextRun  int

	// rowBytes is the Arrow bytes of a row, measured on the first batch:
	// it sizes spilled and output batches in rows.
	rowBytes int64
	// maxRows caps a batch's rows: the writer rolls a file between
	// batches, so an output batch is at most a row group.
	maxRows int

	held, peak int64 // rows in hand
}

func newExternalSort(sc *arrow.Schema, order rowOrder, maxRows int) *externalSort {
	peakRowsHeld.Store(0)
	return &externalSort{sc: sc, order: order, maxRows: maxRows}
}

func (s *externalSort) hold(n int64) {
	s.held += n
	if s.held > s.peak {
		s.peak = s.held
		peakRowsHeld.Store(s.peak)
	}
}

// add takes rec (its reference: add releases it) into the current run,
// and sorts and spills the run once it holds compactRunBytes.
func (s *externalSort) add(rec arrow.RecordBatch) error {
	if rec.NumRows() == 0 {
		rec.Release()
		return nil
	}
	size := recordBytes(rec)
	if s.rowBytes == 0 {
		s.rowBytes = max(1, size/rec.NumRows())
	}
	s.hold(rec.NumRows())
	s.run = append(s.run, rec)
	s.runBytes += size
	if s.runBytes >= compactRunBytes {
		return s.spill()
	}
	return nil
}

// batchRows is the rows of a batch of about n bytes.
func (s *externalSort) batchRows(n int64) int {
	return int(min(max(n/max(s.rowBytes, 1), 16), int64(s.maxRows)))
}

// sortedRun returns the order of the gathered rows: (batch, row) pairs.
func (s *externalSort) sortedRun() []runRow {
	var n int64
	for _, b := range s.run {
		n += b.NumRows()
	}
	refs := make([]runRow, 0, n)
	for bi, b := range s.run {
		for i := range int32(b.NumRows()) {
			refs = append(refs, runRow{int32(bi), i})
		}
	}
	slices.SortStableFunc(refs, func(x, y runRow) int {
		return s.order.compare(s.run[x.batch], int(x.row), s.run[y.batch], int(y.row))
	})
	return refs
}

type runRow struct{ batch, row int32 }

// emitRun yields the gathered rows in order, in batches of about n bytes,
// releasing the run as it ends.
func (s *externalSort) emitRun(n int64, yield func(arrow.RecordBatch) error) error {
	defer s.releaseRun()
	refs := s.sortedRun()
	rb := newRowBuilder(s.sc)
	defer rb.release()
	per := s.batchRows(n)
	for _, r := range refs {
		if err := rb.add(s.run[r.batch], int(r.row)); err != nil {
			return err
		}
		s.hold(1)
		if rb.rows == per {
			s.hold(-int64(per))
			if err := yield(rb.take()); err != nil {
				return err
			}
		}
	}
	if rb.rows > 0 {
		s.hold(-int64(rb.rows))
		return yield(rb.take())
	}
	return nil
}

func (s *externalSort) releaseRun() {
	for _, b := range s.run {
		s.hold(-b.NumRows())
		b.Release()
	}
	s.run, s.runBytes = nil, 0
}

// spill sorts the current run and writes it to a file of its own.
func (s *externalSort) spill() error {
	if len(s.run) == 0 {
		return nil
	}
	w, err := s.newRunFile()
	if err != nil {
		s.releaseRun()
		return err
	}
	err = s.emitRun(mergeBatchBytes, w.write)
	return w.close(err)
}

// runFile writes one spilled run.
type runFile struct {
	s   *externalSort
	f   *os.File
	buf *bufio.Writer
	w   *ipc.Writer
}

func (s *externalSort) newRunFile() (*runFile, error) {
	if s.dir == "" {
		removeStaleSpills()
		dir, err := os.MkdirTemp("", spillDirPrefix)
		if err != nil {
			return nil, fmt.Errorf("spill a sorted run: %w", err)
		}
		lock, err := lockSpillDir(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("spill a sorted run: %w", err)
		}
		s.dir, s.lock = dir, lock
	}
	f, err := os.Create(fmt.Sprintf("%s/run-%06d.arrows", s.dir, s.nextRun))
	if err != nil {
		return nil, fmt.Errorf("spill a sorted run: %w", err)
	}
	s.nextRun++
	buf := bufio.NewWriterSize(f, 1<<20)
	return &runFile{s: s, f: f, buf: buf, w: ipc.NewWriter(buf, ipc.WithSchema(s.sc), ipc.WithZstd())}, nil
}

func (r *runFile) write(rec arrow.RecordBatch) error {
	defer rec.Release()
	return r.w.Write(rec)
}

// close ends the file and adds it to the runs, or removes it after err.
func (r *runFile) close(err error) error {
	err = errors.Join(err, r.w.Close(), r.buf.Flush(), r.f.Close())
	if err != nil {
		os.Remove(r.f.Name())
		return fmt.Errorf("spill a sorted run: %w", err)
	}
	r.s.runs = append(r.s.runs, r.f.Name())
	return nil
}

// sorted yields every row added, in order, in batches of about
// outBatchBytes; each batch is the receiver's to release. Call it once,
// after the last add.
func (s *externalSort) sorted() iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		stop := errors.New("stop")
		out := func(rec arrow.RecordBatch) error {
			if !yield(rec, nil) {
				return stop
			}
			return nil
		}
		var err error
		if len(s.runs) == 0 {
			err = s.emitRun(outBatchBytes, out) // one run: never spilled
		} else if err = s.spill(); err == nil {
			err = s.mergeAll(out)
		}
		if err != nil && err != stop {
			yield(nil, err)
		}
	}
}

// mergeAll merges the spilled runs, mergeFanIn at a time into longer
// runs until at most mergeFanIn are left, then those into out.
func (s *externalSort) mergeAll(out func(arrow.RecordBatch) error) error {
	for len(s.runs) > mergeFanIn {
		some := s.runs[:mergeFanIn]
		s.runs = slices.Clone(s.runs[mergeFanIn:])
		w, err := s.newRunFile()
		if err != nil {
			return err
		}
		err = s.merge(some, mergeBatchBytes, w.write)
		if err := w.close(err); err != nil {
			return err
		}
		for _, p := range some {
			os.Remove(p)
		}
	}
	return s.merge(s.runs, outBatchBytes, out)
}

// merge merges the runs in paths into batches of about n bytes.
func (s *externalSort) merge(paths []string, n int64, out func(arrow.RecordBatch) error) error {
	h := &cursorHeap{order: s.order}
	defer func() {
		for _, c := range h.all {
			c.close(s)
		}
	}()
	for _, p := range paths {
		c, err := openCursor(p)
		if err != nil {
			return err
		}
		h.all = append(h.all, c)
		ok, err := c.next(s)
		if err != nil {
			return err
		}
		if ok {
			h.cs = append(h.cs, c)
		}
	}
	heap.Init(h)
	rb := newRowBuilder(s.sc)
	defer rb.release()
	per := s.batchRows(n)
	for h.Len() > 0 {
		c := h.cs[0]
		if err := rb.add(c.rec, c.pos); err != nil {
			return err
		}
		s.hold(1)
		if rb.rows == per {
			s.hold(-int64(per))
			if err := out(rb.take()); err != nil {
				return err
			}
		}
		ok, err := c.advance(s)
		switch {
		case err != nil:
			return err
		case ok:
			heap.Fix(h, 0)
		default:
			heap.Pop(h)
		}
	}
	if rb.rows > 0 {
		s.hold(-int64(rb.rows))
		return out(rb.take())
	}
	return nil
}

// close removes the spilled runs.
func (s *externalSort) close() {
	s.releaseRun()
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.lock.Close()
	}
}

// Spills of a process that died. Only the sort that made a directory of
// spilled runs removes it, so a process killed while compacting (an OOM
// kill, a deploy) would leave about its partition's compressed size in
// $TMPDIR for good, once per crash. Each spilling sort holds a lock on its
// directory (flock: the kernel drops it when the process ends, however it
// ends), and the next sort to spill removes every directory whose lock is
// free. A directory modified in the last spillDirGrace is left alone: its
// sort may not have locked it yet.

// spillDirPrefix names the directories of spilled runs in $TMPDIR.
const spillDirPrefix = "tracelake-compact-"

// spillDirGrace is how long a new directory may go unlocked.
const spillDirGrace = time.Minute

// lockSpillDir takes the lock of a directory of spilled runs, held until
// the returned file is closed (or the process ends).
func lockSpillDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

// removeStaleSpills removes the directories of spilled runs no process
// holds. Best effort: what it cannot remove, a later sort tries again.
func removeStaleSpills() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), spillDirPrefix+"*"))
	for _, dir := range dirs {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < spillDirGrace {
			continue
		}
		lock, err := lockSpillDir(dir)
		if err != nil {
			continue // held: a sort is running
		}
		os.RemoveAll(dir)
		lock.Close()
	}
}

// cursor reads one spilled run, one batch at a time.
type cursor struct {
	f   *os.File
	r   *ipc.Reader
	rec arrow.RecordBatch // the reader's: valid until its next Next
	pos int
}

func openCursor(path string) (*cursor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read a sorted run: %w", err)
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read a sorted run %s: %w", path, err)
	}
	return &cursor{f: f, r: r}, nil
}

// next moves to the run's next non-empty batch; false at its end.
func (c *cursor) next(s *externalSort) (bool, error) {
	if c.rec != nil {
		s.hold(-c.rec.NumRows())
		c.rec = nil
	}
	for c.r.Next() {
		if rec := c.r.RecordBatch(); rec.NumRows() > 0 {
			c.rec, c.pos = rec, 0
			s.hold(rec.NumRows())
			return true, nil
		}
	}
	if err := c.r.Err(); err != nil {
		return false, fmt.Errorf("read a sorted run %s: %w", c.f.Name(), err)
	}
	return false, nil
}

// advance moves to the run's next row; false at its end.
func (c *cursor) advance(s *externalSort) (bool, error) {
	c.pos++
	if c.pos < int(c.rec.NumRows()) {
		return true, nil
	}
	return c.next(s)
}

func (c *cursor) close(s *externalSort) {
	if c.rec != nil {
		s.hold(-c.rec.NumRows())
		c.rec = nil
	}
	c.r.Release()
	c.f.Close()
}

// cursorHeap orders cursors by their current rows.
type cursorHeap struct {
	order rowOrder
	cs    []*cursor
	all   []*cursor
}

func (h *cursorHeap) Len() int { return len(h.cs) }
func (h *cursorHeap) Less(i, j int) bool {
	a, b := h.cs[i], h.cs[j]
	return h.order.compare(a.rec, a.pos, b.rec, b.pos) < 0
}
func (h *cursorHeap) Swap(i, j int) { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *cursorHeap) Push(x any)    { h.cs = append(h.cs, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}

// sortedCompactionScan reads the files to compact a batch at a time, one
// file after the other: iceberg-go's parallel read holds the decoded
// batches of a whole file per worker while an earlier one is slow.
func sortedCompactionScan(tbl *table.Table) *table.Scan {
	return tbl.Scan(table.WithMaxConcurrency(1), table.WithArrowBatchSize(compactReadBatchRows))
}

// sortRecords passes every batch of recs through an external sort and
// returns its sorted output in batches of at most maxRows rows, and a func to call once that was read (it
// removes the spilled runs).
func sortRecords(ctx context.Context, sc *arrow.Schema, order rowOrder, maxRows int, recs iter.Seq2[arrow.RecordBatch, error]) (iter.Seq2[arrow.RecordBatch, error], func(), error) {
	s := newExternalSort(sc, order, maxRows)
	for rec, err := range recs {
		if err != nil {
			s.close()
			return nil, nil, err
		}
		if err := s.add(rec); err != nil {
			s.close()
			return nil, nil, err
		}
		if ctx.Err() != nil {
			s.close()
			return nil, nil, ctx.Err()
		}
	}
	return s.sorted(), s.close, nil
}

// recordBytes is the size of rec's buffers (arrow-go's
// array.Data.SizeInBytes, over its columns).
func recordBytes(rec arrow.RecordBatch) int64 {
	var n uint64
	for _, col := range rec.Columns() {
		n += col.Data().(*array.Data).SizeInBytes()
	}
	return int64(n)
}
