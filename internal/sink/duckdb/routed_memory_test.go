package duckdb

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
)

// Dead letters of 12 MB changes (a source row of a 12 MB text column
// whose change cannot be applied) are held, one a load as the pipeline
// cuts them, with database change capture's sink at the default
// memory_limit (256 MiB), past as much as the limit: the log of routed
// loads was checkpointed only once it held 256 MiB, and the checkpoint of
// that many bytes of new values failed every commit from the 22nd on
// ("failed to pin block"), the pipeline stalled on the record.
func TestRoutedDeadLettersOutgrowTheMemoryLimit(t *testing.T) {
	opt := testOptions(t.TempDir())
	opt.Table, opt.Routed, opt.MemoryLimit = "cdc", true, 256<<20
	s := openPrepared(t, opt)
	big := `{"op":"c","after":{"id":1,"body":"` + strings.Repeat("x", 12<<20) + `"}}`
	const loads = 30 // ~360 MB: 1.4x the limit
	for i := range int64(loads) {
		rec := &kgo.Record{Topic: "dbserver1", Partition: 0, Offset: i, Value: []byte(big)}
		b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "dbserver1"}, First: i, Last: i, DLQ: 1}}}
		b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, "a change that cannot be applied", envelope.StageDecode)
		b.MaxLine = len(b.DLQ)
		f, err := s.Stage(context.Background(), b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Load(context.Background(), []sink.File{f}); err != nil {
			t.Fatalf("load %d of %d (dead letters ~%d MB, memory_limit %d MiB): %.300v", i+1, loads, i*12, opt.MemoryLimit>>20, err)
		}
	}
	if n := count(t, s, "SELECT count(*) FROM cdc_dlq WHERE octet_length(\"value\") > 12000000"); n != loads {
		t.Fatalf("%d dead letters of 12 MB, want %d", n, loads)
	}
}
