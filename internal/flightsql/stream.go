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
// batches then stream one at a time, as the client takes them, never
// held all at once.
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
	ch := make(chan flight.StreamChunk)
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
		rec.Retain() // the reader reuses it on Next; DoGet releases it once written
		select {
		case ch <- flight.StreamChunk{Data: rec}:
		case <-ctx.Done():
			rec.Release()
			return ctx.Err()
		}
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

// sendErr ends the stream with err, unless the call already ended.
func (h *handler) sendErr(ctx context.Context, ch chan<- flight.StreamChunk, err error) {
	select {
	case ch <- flight.StreamChunk{Err: err}:
	case <-ctx.Done():
	}
}
