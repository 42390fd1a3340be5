package iceberg_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// BenchmarkLoad measures staging and loading 100,000 synthetic spans (10
// batches of 10,000 records) into the Iceberg raw table: Arrow conversion
// and Parquet (zstd) writing at staging, then the commit to a SQLite
// catalog on local disk; it reports the data files the table then has and
// their size. files=batch stages each batch on its own (a file each, as
// the OTLP receivers' loads do); files=stream stages them as a worker's,
// into open files shared by the batches.
func BenchmarkLoad(b *testing.B) {
	for _, stream := range []string{"", "worker"} {
		b.Run("files="+map[string]string{"": "batch", "worker": "stream"}[stream], func(b *testing.B) { benchmarkLoad(b, stream) })
	}
}

func benchmarkLoad(b *testing.B, stream string) {
	const batches, per = 10, 10_000
	g := tracegen.New(1)
	var valueBytes int64
	staged := make([]*sink.Batch, batches)
	for i := range staged {
		bt := &sink.Batch{}
		first := int64(i * per)
		for o := first; o < first+per; o++ {
			v := g.Append(nil)
			valueBytes += int64(len(v))
			bt.Records = append(bt.Records, sink.Record{Record: &kgo.Record{Topic: "t", Offset: o, Value: v, Timestamp: time.Now()},
				ID: [16]byte{byte(o), byte(o >> 8), byte(o >> 16)}})
		}
		bt.Ranges = []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: first, Last: first + per - 1, Records: per}}
		bt.Stream = stream
		staged[i] = bt
	}
	for range b.N {
		b.StopTimer()
		s := openSink(&testing.T{}, b.TempDir(), false)
		if err := s.Prepare(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var files []sink.File
		for _, bt := range staged {
			f, err := s.Stage(context.Background(), bt)
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
		if _, err := s.Load(context.Background(), files); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		written, err := s.DataFiles(context.Background(), false)
		if err != nil {
			b.Fatal(err)
		}
		var size int64
		for _, f := range written {
			size += f.FileSizeBytes()
		}
		b.ReportMetric(float64(len(written)), "files")
		b.ReportMetric(float64(size)/1e6, "file-MB")
		s.Close()
		b.StartTimer()
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*batches*per)/secs, "records/s")
	b.ReportMetric(float64(int64(b.N)*valueBytes)/secs/1e6, "MB/s")
}
