package main

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// watchedReader is a RecordReader that calls seen with the rows it has
// handed out each time the next batch is asked for.
type watchedReader struct {
	array.RecordReader
	rows int
	seen func(rows int)
}

func (r *watchedReader) Next() bool {
	r.seen(r.rows)
	if !r.RecordReader.Next() {
		return false
	}
	r.rows += int(r.RecordBatch().NumRows())
	return true
}

// sql prints a large result as it reads it: the rows read are written
// before the rest is read. The aligned table was held whole (a
// tabwriter aligns every line it holds), so nothing reached the client
// until the last row, and a big result asked through `tracelake run`'s
// socket was held in run's memory, beside its loads, as text.
func TestWriteTableStreams(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	var batches []arrow.RecordBatch
	const batchRows, nBatches = 1000, 20
	for b := range nBatches {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := range batchRows {
			n := b*batchRows + i
			bld.Field(0).(*array.Int64Builder).Append(int64(n))
			bld.Field(1).(*array.StringBuilder).Append("row " + strconv.Itoa(n))
		}
		batches = append(batches, bld.NewRecordBatch())
		bld.Release()
	}
	rr, err := array.NewRecordReader(schema, batches)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var out bytes.Buffer
	const half = batchRows * nBatches / 2
	writtenAtHalf := -1
	w := &watchedReader{RecordReader: rr, seen: func(rows int) {
		if rows == half {
			writtenAtHalf = strings.Count(out.String(), "\n")
		}
	}}
	cw := &countedWriter{w: &out}
	if err := writeTable(cw, w); err != nil {
		t.Fatal(err)
	}
	// A block is written at once: through run's socket, a write per cell
	// (as the tabwriter writes them) cost a flush each.
	if blocks := batchRows * nBatches / alignRows; cw.writes > 2*blocks+2 {
		t.Errorf("%d writes for %d blocks of rows: not one write a block", cw.writes, blocks)
	}
	if got := strings.Count(out.String(), "\n"); got != batchRows*nBatches+2 {
		t.Fatalf("%d lines printed, want %d", got, batchRows*nBatches+2)
	}
	if writtenAtHalf < half/2 {
		t.Errorf("%d lines written when %d rows had been read: the result is held until its end, not streamed", writtenAtHalf, half)
	}
}

// countedWriter counts the writes made to w.
type countedWriter struct {
	w      io.Writer
	writes int
}

func (c *countedWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.w.Write(p)
}
