package query

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// A query in flight while maintenance compacts the files it reads and
// expires the snapshot it planned them from (`tracelake serve` beside a
// `tracelake run` with scheduled maintenance), then the reader's refresh:
// the query reads every row of its snapshot once, from the files it
// planned, which an expiry keeps while that snapshot was current within
// its window; the next query reads the compacted file, every row once
// (not the old files beside it). The query is read a batch before the
// maintenance and the rest after it: its later files are opened after
// the expiry (an expiry of the window 0 deletes them under it, and it
// fails on a missing file).
func TestIcebergQueryInFlightAcrossCompactionAndExpiry(t *testing.T) {
	l := newIceLake(t, IcebergOptions{ScanConcurrency: 1, BatchRows: 1024, Threads: 1})
	const perLoad, loads = 10_000, 30
	for n := range loads {
		spans := make([]span, perLoad)
		for i := range spans {
			spans[i] = span{"a", "bulk", "n", int64(n*perLoad + i), day(2)}
		}
		l.load(t, spans, nil)
	}
	const q = `SELECT duration_ms FROM otel_spans WHERE trace_id = 'bulk'`
	ctx := context.Background()
	rr, err := l.reader.Query(ctx, tenantA, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	seen := make([]int, perLoad*loads)
	read := func(rr array.RecordReader) {
		rec := rr.RecordBatch()
		col := rec.Column(0).(*array.Int64)
		for i := range col.Len() {
			seen[col.Value(i)]++
		}
	}
	if !rr.Next() {
		t.Fatalf("no first batch: %v", rr.Err())
	}
	read(rr)

	c, err := l.snk.Compact(ctx, 1<<30, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), false)
	if err != nil || c[0].FilesBefore != loads || c[0].FilesAfter != 1 {
		t.Fatalf("compaction %+v (%v): want the %d files of the day in one", c, err, loads)
	}
	if _, err := l.snk.Expire(ctx, time.Hour, 1); err != nil {
		t.Fatal(err)
	}
	if err := l.reader.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for rr.Next() {
		read(rr)
	}
	if err := rr.Err(); err != nil {
		t.Fatalf("the query in flight: %v", err)
	}
	checkOnce(t, "the query in flight", seen)

	clear(seen)
	after, err := l.reader.Query(ctx, tenantA, q)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Release()
	for after.Next() {
		read(after)
	}
	if err := after.Err(); err != nil {
		t.Fatal(err)
	}
	checkOnce(t, "the query after the refresh", seen)
	if scans := l.takeScans(); len(scans) != 2 || scans[1].Files != 1 {
		t.Errorf("scans %+v: want the second of the compacted file alone", scans)
	}
}

// checkOnce fails unless every value was read once.
func checkOnce(t *testing.T, what string, seen []int) {
	t.Helper()
	var lost, doubled int
	for _, n := range seen {
		switch {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	if lost > 0 || doubled > 0 {
		t.Errorf("%s: %d of %d rows lost, %d read more than once", what, lost, len(seen), doubled)
	}
}
