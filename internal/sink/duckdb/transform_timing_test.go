package duckdb

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// BenchmarkTransformLoad loads 100,000 objects in transform mode into a
// table with a primary key, a CHECK, a TIMESTAMP, a list and a struct (10
// loads of 10,000), every 100th object with a duplicate key and one in 50
// with a timestamp offset: the cost of mapping objects onto a user's table
// and deciding its rejects, in rows/s. Run with -benchtime 1x.
func BenchmarkTransformLoad(b *testing.B) {
	const loads, perLoad = 10, 10_000
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		opt := testOptions(b.TempDir())
		opt.Table, opt.Transform = "orders", true
		s := openWith(b, opt)
		if _, err := s.DB().Exec(`CREATE TABLE orders (id BIGINT PRIMARY KEY, amount INTEGER CHECK (amount > 0), ts TIMESTAMP,
			qty INTEGER[], dims STRUCT(w INTEGER, h INTEGER), note VARCHAR)`); err != nil {
			b.Fatal(err)
		}
		if err := s.Prepare(ctx); err != nil {
			b.Fatal(err)
		}
		var files []sink.File
		for l := range loads {
			bt := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, First: int64(l * perLoad), Last: int64(l*perLoad + perLoad - 1), Records: perLoad}}}
			for i := l * perLoad; i < (l+1)*perLoad; i++ {
				id, zone := i, ""
				if i%100 == 99 {
					id = i - 1
				}
				if i%50 == 0 {
					zone = "+02:00"
				}
				v := fmt.Sprintf(`{"id":%d,"amount":%d,"ts":"2024-01-01T10:%02d:00%s","qty":[%d,null,3],"dims":{"w":%d,"h":2},"note":"order %d"}`,
					id, 1+i%1000, i%60, zone, i, i%7, i)
				bt.Rows = envelope.AppendTransformRow(bt.Rows, &kgo.Record{Topic: "t", Offset: int64(i), Value: []byte(v)}, envelope.ValueText)
			}
			f, err := s.Stage(ctx, bt)
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, f)
		}
		b.StartTimer()
		for _, f := range files {
			if _, err := s.Load(ctx, []sink.File{f}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(loads*perLoad*b.N)/b.Elapsed().Seconds(), "rows/s")
}
