package flightsql

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
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
		rec := rdr.RecordBatch()
		rows, step := rec.NumRows(), rec.NumRows()
		if size := batchBytes(rec); size > maxBatchBytes && rows > 1 {
			step = max(1, rows*maxBatchBytes/size)
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
				break
			}
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return ctx.Err()
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
