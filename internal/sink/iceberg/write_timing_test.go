package iceberg

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// BenchmarkWriteParquet measures Parquet writing alone: 100,000 synthetic
// spans already in Arrow written as the raw table's data files (zstd, page
// statistics, as iceberg-go writes them) to local disk. BenchmarkLoad adds
// the decoding of staged rows and the commit.
func BenchmarkWriteParquet(b *testing.B) {
	const n = 100_000
	g := tracegen.New(1)
	records := make([]sink.Record, n)
	var valueBytes int64
	for o := range int64(n) {
		v := g.Append(nil)
		valueBytes += int64(len(v))
		records[o] = sink.Record{Record: &kgo.Record{Topic: "t", Offset: o, Value: v, Timestamp: time.Now()}, ID: [16]byte{byte(o), byte(o >> 8), byte(o >> 16)}}
	}
	dir := b.TempDir()
	s, err := Open(context.Background(), Options{Catalog: filepath.Join(dir, "catalog.db"), Warehouse: filepath.Join(dir, "warehouse"),
		Namespace: "tracelake", Table: "trace_raw"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Prepare(context.Background()); err != nil {
		b.Fatal(err)
	}
	tbl, err := s.cat.LoadTable(context.Background(), s.raw)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := arrowSchema(tbl, rawSchema)
	if err != nil {
		b.Fatal(err)
	}
	rec := buildRawRecord(sc, records, time.Now(), eventTimer{}, map[sink.TopicPartition]int64{})
	defer rec.Release()
	var fileBytes int64
	b.ResetTimer()
	for range b.N {
		rec.Retain() // WriteRecords releases what it consumes
		for f, err := range table.WriteRecords(context.Background(), tbl, rec.Schema(),
			func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }) {
			if err != nil {
				b.Fatal(err)
			}
			fileBytes += f.FileSizeBytes()
		}
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*n)/secs, "records/s")
	b.ReportMetric(float64(int64(b.N)*valueBytes)/secs/1e6, "MB/s")
	b.ReportMetric(float64(int64(b.N)*valueBytes)/float64(fileBytes), "values/file-bytes")
}
