package query

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/procmem"
)

// BenchmarkIcebergQuery measures queries of a lake of 240,000 spans in 36
// partitions (3 tenants × 12 days, a file each) on local disk: planning
// (manifests), reading the files the scan keeps and DuckDB's aggregate.
// It reports the rows the scans read per second and the files a query
// opened: a tenant's day is one file, its table thirteen (the lake's base
// rows are a file of their own).
func BenchmarkIcebergQuery(b *testing.B) {
	l := newIceLake(b, IcebergOptions{})
	var spans []span
	for _, tenant := range []string{"a", "b", "c"} {
		for d := 1; d <= 12; d++ {
			for i := range 240_000 / 36 {
				spans = append(spans, span{tenant, fmt.Sprintf("t%d", i%100), fmt.Sprintf("op%d", i%7), int64(i), day(d).Add(time.Duration(i) * time.Second)})
			}
		}
	}
	l.load(b, spans, nil)
	for _, c := range []struct{ name, q string }{
		{"TenantDay", `SELECT name, count(*), sum(duration_ms) FROM otel_spans WHERE start_time >= '2024-03-05' AND start_time < '2024-03-06' GROUP BY name`},
		{"Tenant", `SELECT name, count(*), sum(duration_ms) FROM otel_spans GROUP BY name`},
	} {
		b.Run(c.name, func(b *testing.B) {
			l.takeScans()
			b.ReportAllocs()
			for b.Loop() {
				rr, err := l.reader.Query(context.Background(), tenantA, c.q)
				if err != nil {
					b.Fatal(err)
				}
				for rr.Next() {
				}
				if err := rr.Err(); err != nil {
					b.Fatal(err)
				}
				rr.Release()
			}
			var rows, files, bytes int64
			for _, s := range l.takeScans() {
				rows, files, bytes = rows+s.Rows, files+int64(s.Files), bytes+s.Bytes
			}
			b.SetBytes(bytes / int64(b.N))
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(files)/float64(b.N), "files/op")
		})
	}
}

// BenchmarkIcebergSelectAll reads one tenant's 500,000 spans whole
// (SELECT * FROM otel_spans, the other tenant's 500,000 beside them in
// the same files) through the Iceberg reader, as Flight SQL's DoGet does,
// draining each batch: the engine side of a dump, without the transport.
// It reports the rows per second and the process's peak resident memory
// while reading (Linux: DuckDB's memory is not Go's heap), above what it
// held before the first read.
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
	procmem.ResetPeak()
	base := procmem.Resident()
	var rows int64
	for b.Loop() {
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
	}
	if rows < n/2 {
		b.Fatalf("read %d rows, want tenant a's %d and more", rows, n/2)
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(procmem.Peak()-base)/(1<<20), "peak-rss-above-MiB")
}
