package query

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkIcebergSelectAll reads one tenant's 500,000 spans whole
// (SELECT * FROM otel_spans, the other tenant's 500,000 beside them in
// the same files) through the Iceberg reader, as Flight SQL's DoGet does,
// draining each batch: the engine side of a dump, without the transport.
// It reports the rows per second and the process's resident memory at
// its peak while reading, sampled every 10 ms (Linux: DuckDB's memory is
// not Go's heap), above what it held before the first read.
func BenchmarkIcebergSelectAll(b *testing.B) {
	l := newIceLake(b, IcebergOptions{})
	const n = 1_000_000
	spans := make([]span, 0, n)
	for i := range n {
		tenant := "a"
		if i%2 == 1 {
			tenant = "b"
		}
		spans = append(spans, span{tenant, "bulk", "op", int64(i), day(3).Add(time.Duration(i) * time.Millisecond)})
	}
	l.load(b, spans, nil)
	debug.FreeOSMemory() // the load's garbage returned: base is what stays
	base := rss()
	var rows int64
	var peak int64
	for b.Loop() {
		stop := sampleRSS(&peak)
		rr, err := l.reader.Query(context.Background(), tenantA, `SELECT * FROM otel_spans`)
		if err != nil {
			b.Fatal(err)
		}
		rows = 0
		for rr.Next() {
			rows += rr.RecordBatch().NumRows()
		}
		if err := rr.Err(); err != nil {
			b.Fatal(err)
		}
		rr.Release()
		stop()
	}
	if rows < n/2 {
		b.Fatalf("read %d rows, want tenant a's %d and more", rows, n/2)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(peak-base)/(1<<20), "peak-rss-above-MiB")
}

// sampleRSS raises *peak to the process's resident memory, every 10 ms
// until the returned stop is called.
func sampleRSS(peak *int64) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			*peak = max(*peak, rss())
			select {
			case <-t.C:
			case <-done:
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// rss is the process's resident memory in bytes (Linux), 0 where
// /proc/self/statm cannot be read.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
