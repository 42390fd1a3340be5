package flightsql

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
)

// run answers a DoGet of a statement: once per bound parameter row (once
// when none are bound), one result after the other. The first query runs
// before the answer starts, so that its refusal is the call's error; the
// batches then stream as the client takes them, at most streamAhead
// batches (of at most maxBatchBytes) ahead of the one being written, so
// that the engine makes the next batches while gRPC sends one, and a
// result is never held all at once.
//
// The stream goroutine ends when the results do, or when ctx (the DoGet's)
// ends; arrow-go's DoGet drains the channel before it returns, so no
// goroutine outlives the call. Each reader is released as soon as it is
// read to its end, fails or the call ends.
func (h *handler) run(ctx context.Context, what string, hd handle) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	rows, err := paramRows(hd.params)
	if err != nil {
		return nil, nil, err
	}
	rdr, err := h.reader.Query(ctx, hd.scope, hd.sql, rows[0]...)
	if err != nil {
		return nil, nil, h.fail(ctx, what, err)
	}
	ch := make(chan flight.StreamChunk, streamAhead)
	go h.stream(ctx, what, hd, rdr, rows[1:], ch)
	return rdr.Schema(), ch, nil
}

func (h *handler) stream(ctx context.Context, what string, hd handle, rdr array.RecordReader, rest [][]any, ch chan<- flight.StreamChunk) {
	defer close(ch)
	schema := rdr.Schema()
	for {
		if err := h.send(ctx, rdr, ch); err != nil {
			h.sendErr(ctx, ch, h.fail(ctx, what, err))
			return
		}
		if len(rest) == 0 {
			return
		}
		var err error
		if rdr, err = h.reader.Query(ctx, hd.scope, hd.sql, rest[0]...); err != nil {
			h.sendErr(ctx, ch, h.fail(ctx, what, err))
			return
		}
		rest = rest[1:]
		if !rdr.Schema().Equal(schema) {
			rdr.Release()
			h.sendErr(ctx, ch, grpcstatus.Error(codes.InvalidArgument,
				"the bound parameter rows give results of different schemas: run them one at a time"))
			return
		}
	}
}

// send streams rdr's batches into ch and releases rdr.
func (h *handler) send(ctx context.Context, rdr array.RecordReader, ch chan<- flight.StreamChunk) (err error) {
	defer rdr.Release()
	defer func() {
		// A Reader that panics fails this call, not the process.
		if p := recover(); p != nil {
			err = fmt.Errorf("BUG: the query reader panicked: %v", p)
		}
	}()
	for rdr.Next() {
		if err := sendBatch(ctx, rdr.RecordBatch(), ch); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

// sendBatch sends rec into ch, in slices of about maxBatchBytes.
func sendBatch(ctx context.Context, rec arrow.RecordBatch, ch chan<- flight.StreamChunk) error {
	rows, step := rec.NumRows(), rec.NumRows()
	if size := batchBytes(rec); size > maxBatchBytes && rows > 1 {
		step = max(1, rows*maxBatchBytes/size)
	}
	if step < rows && hasUnion(rec.Schema()) {
		rec = unionsPadded(rec)
		defer rec.Release()
	}
	for lo := int64(0); ; lo += step {
		// A slice shares the batch's memory and holds it; the whole
		// batch is retained the same way (the reader reuses it on
		// Next). DoGet releases each once written.
		part := rec
		if step < rows {
			part = rec.NewSlice(lo, min(lo+step, rows))
		} else {
			rec.Retain()
		}
		select {
		case ch <- flight.StreamChunk{Data: part}:
		case <-ctx.Done():
			part.Release()
			return ctx.Err()
		}
		if lo+step >= rows {
			return nil
		}
	}
}

// unionsPadded is rec with the type codes of every union column (at any
// depth) copied into memory with room past their end. arrow-go's IPC
// writer (v18.8, getTruncatedBuffer) takes the type codes of a union that
// starts past its buffer's start (a slice of a batch, or a union inside
// one) as the slice's offset plus its length rounded up to 64 bytes,
// reading up to 63 bytes past the buffer's end: a panic that ended the
// stream at a batch's second slice. The room it reads is zeros, in the
// message's padding; what the client reads is the slice's own.
func unionsPadded(rec arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		d := padUnionCodes(c.Data())
		cols[i] = array.MakeFromData(d)
		d.Release()
		defer cols[i].Release()
	}
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// padUnionCodes is d with its unions' type codes padded (see
// unionsPadded), retained.
func padUnionCodes(d arrow.ArrayData) arrow.ArrayData {
	if !typeHasUnion(d.DataType()) {
		d.Retain()
		return d
	}
	children := make([]arrow.ArrayData, len(d.Children()))
	for i, c := range d.Children() {
		children[i] = padUnionCodes(c)
		defer children[i].Release()
	}
	bufs := slices.Clone(d.Buffers())
	if _, ok := d.DataType().(arrow.UnionType); ok && len(bufs) > 1 && bufs[1] != nil {
		codes := bufs[1].Bytes()
		padded := make([]byte, len(codes), len(codes)+64)
		copy(padded, codes)
		bufs[1] = memory.NewBufferBytes(padded)
	}
	return array.NewData(d.DataType(), d.Len(), bufs, children, d.NullN(), d.Offset())
}

// hasUnion says whether a column of s is or holds a union.
func hasUnion(s *arrow.Schema) bool {
	return slices.ContainsFunc(s.Fields(), func(f arrow.Field) bool { return typeHasUnion(f.Type) })
}

func typeHasUnion(t arrow.DataType) bool {
	switch t := t.(type) {
	case arrow.UnionType:
		return true
	case arrow.NestedType:
		return slices.ContainsFunc(t.Fields(), func(f arrow.Field) bool { return typeHasUnion(f.Type) })
	}
	return false
}

// streamAhead is how many batches a stream may have made ahead of the
// one gRPC is writing.
const streamAhead = 8

// maxBatchBytes bounds the batches sent: a larger one of the Reader's
// goes out as slices of its rows (not copied) of about this size. gRPC
// clients refuse a message past a limit (4 MiB by default in most; ADBC
// sets 16 MiB), while an engine's batch may hold a great many rows; half
// the common limit leaves room for rows of uneven size.
const maxBatchBytes = 2 << 20

// sendErr ends the stream with err, unless the call already ended.
func (h *handler) sendErr(ctx context.Context, ch chan<- flight.StreamChunk, err error) {
	select {
	case ch <- flight.StreamChunk{Err: err}:
	case <-ctx.Done():
	}
}

// batchBytes is the size of the memory rec's columns hold (all of it, for
// a batch that is a slice of a larger one), dictionaries aside: they go
// in messages of their own, and slicing rows would not make them smaller.
func batchBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	return n
}
