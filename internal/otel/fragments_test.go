package otel

import (
	"bytes"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// The fragments of a message (its coordinates, its resources' and scopes'
// fields) are written into a pooled buffer: decoding messages at once, on
// one decoder, gives each the rows it gets alone, and rows decoded before
// do not change when the buffer is reused.
func TestFragmentsAreNotSharedBetweenMessages(t *testing.T) {
	g := tracegen.New(3)
	var traces, logs []*kgo.Record
	for i := range 64 {
		v, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(g.OTLPTrace())
		if err != nil {
			t.Fatal(err)
		}
		traces = append(traces, &kgo.Record{Topic: "spans", Partition: int32(i % 3), Offset: int64(i), Value: v})
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", string(rune('a'+i%26)))
		rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("line")
		lv, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, &kgo.Record{Topic: "logs", Offset: int64(i), Value: lv})
	}
	for _, c := range []struct {
		signal string
		msgs   []*kgo.Record
	}{{SignalTraces, traces}, {SignalLogs, logs}} {
		d, err := NewDecoder(c.signal, EncodingProto, Tenancy{Default: "t"})
		if err != nil {
			t.Fatal(err)
		}
		alone := make([][]byte, len(c.msgs))
		for i, r := range c.msgs {
			var b sink.Batch
			if _, err := d.AppendRows(&b, r); err != nil {
				t.Fatal(err)
			}
			alone[i] = b.Rows
		}
		first := bytes.Clone(alone[0])
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < len(c.msgs); i += 4 {
					var b sink.Batch
					if _, err := d.AppendRows(&b, c.msgs[i]); err != nil {
						t.Error(err)
						return
					}
					if !bytes.Equal(b.Rows, alone[i]) {
						t.Errorf("%s message %d: rows decoded beside others differ:\n%s\n%s", c.signal, i, b.Rows, alone[i])
					}
				}
			})
		}
		wg.Wait()
		if !bytes.Equal(alone[0], first) {
			t.Errorf("%s: the first message's rows changed as others were decoded", c.signal)
		}
	}
}

// A GenAI operation's row carries its span's coordinates (written from
// the same fragment), so that the fence and verify treat the two as one.
func TestOperationsHaveTheirSpansCoordinates(t *testing.T) {
	d, _ := NewDecoder(SignalTraces, EncodingProto, Tenancy{Default: "t"})
	d.WithGenAI(genai.NewMapper(prices.Embedded(), false))
	g := tracegen.New(5)
	var b sink.Batch
	for i := range 20 {
		v, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(g.OTLPTrace())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.AppendRows(&b, &kgo.Record{Topic: "spans", Partition: int32(i % 2), Offset: int64(100 + i), Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	coordinates := func(r map[string]any) [4]any {
		return [4]any{r[schema.TopicColumn], r[schema.PartitionColumn], r[schema.OffsetColumn], r[schema.IndexColumn]}
	}
	spans := map[any][4]any{}
	for _, r := range parseRows(t, b.Rows) {
		spans[r["span_id"]] = coordinates(r)
	}
	ops := parseRows(t, b.Derived)
	if len(ops) == 0 {
		t.Fatal("no operations")
	}
	for _, op := range ops {
		if want, ok := spans[op["span_id"]]; !ok || coordinates(op) != want {
			t.Fatalf("operation of span %v at %v, its span at %v", op["span_id"], coordinates(op), want)
		}
	}
}
