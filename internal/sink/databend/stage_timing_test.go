package databend_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// BenchmarkStage measures what staging a batch costs tracelake: encoding
// is done before; this is splitting the batch into kept lines, zstd and
// the upload (PRESIGN UPLOAD and a PUT, to a loopback server that only
// stores the bytes). Databend's own COPY time is not here: no Databend
// runs on this machine.
func BenchmarkStage(b *testing.B) {
	const records = 10_000
	g := tracegen.New(1)
	batch := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "t"}, Last: records - 1, Records: records}}}
	var id [16]byte
	var valueBytes int64
	for o := range int64(records) {
		v := g.Append(nil)
		valueBytes += int64(len(v))
		id[0], id[1] = byte(o), byte(o>>8)
		batch.Rows = envelope.AppendRawRow(batch.Rows, &kgo.Record{Topic: "t", Offset: o, Value: v, Timestamp: time.Now()}, &id, envelope.ValueJSON)
	}
	for _, zstd := range []bool{false, true} {
		name := "none"
		if zstd {
			name = "zstd"
		}
		b.Run(name, func(b *testing.B) {
			srv := databendtest.New("u", "p")
			defer srv.Close()
			s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "t", Prefix: "p/", Zstd: zstd, Uploads: 4})
			if err != nil {
				b.Fatal(err)
			}
			var staged int64
			b.ResetTimer()
			for i := range b.N {
				batch.Ranges[0].First = int64(i) * records // a new name each time
				f, err := s.Stage(context.Background(), batch)
				if err != nil {
					b.Fatal(err)
				}
				staged += f.Bytes
				s.Discard([]sink.File{f})
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*records)/secs, "records/s")
			b.ReportMetric(float64(int64(b.N)*valueBytes)/secs/1e6, "MB/s")
			b.ReportMetric(float64(int64(b.N)*int64(len(batch.Rows)))/float64(staged), "ratio")
		})
	}
}
