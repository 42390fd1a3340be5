package envelope_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// BenchmarkEncodeRaw measures Check + AppendRawRow per core on ~1 KB agent
// traces, the whole per-record work of the ingest path, for each way a
// sink reads the value: escaped into a JSON string (text: Iceberg's
// rebuilds, replays), embedded (json: Databend) or verbatim in a
// delimited line (verbatim: DuckDB).
func BenchmarkEncodeRaw(b *testing.B) {
	g := tracegen.New(1)
	recs := make([]*kgo.Record, 1024)
	var total int
	for i := range recs {
		v := g.Append(nil)
		recs[i] = &kgo.Record{Topic: "llm-traces", Partition: 1, Offset: int64(i), Key: g.Key(), Value: v, Timestamp: time.Now()}
		total += len(v)
	}
	for _, enc := range []struct {
		name string
		enc  envelope.ValueEncoding
	}{{"text", envelope.ValueText}, {"json", envelope.ValueJSON}, {"verbatim", envelope.ValueVerbatim}} {
		b.Run(enc.name, func(b *testing.B) {
			ids := envelope.NewUUIDs()
			var id [16]byte
			buf := make([]byte, 0, 4<<20)
			b.SetBytes(int64(total / len(recs)))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := recs[i%len(recs)]
				if !envelope.Check(r.Value).OK() {
					b.Fatal("invalid trace")
				}
				ids.Next(&id)
				buf = envelope.AppendRawRow(buf[:0], r, &id, enc.enc)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
