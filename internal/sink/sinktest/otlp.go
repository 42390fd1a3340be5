package sinktest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// OTLPBatch decodes OTLP export requests (protobuf) of signal as the
// records at offsets first.. of a partition of topic "otlp" into one
// batch, as the pipeline does: tenant from the header "tenant", else
// team-a.
func OTLPBatch(t testing.TB, signal string, partition int32, first int64, bodies ...[]byte) *sink.Batch {
	t.Helper()
	dec, err := otel.NewDecoder(signal, otel.EncodingProto, otel.Tenancy{Header: "tenant", Default: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "otlp", Partition: partition}, First: first, Last: first + int64(len(bodies)) - 1}}}
	for i, body := range bodies {
		n, err := dec.AppendRows(b, &kgo.Record{Topic: "otlp", Partition: partition, Offset: first + int64(i), Value: body})
		if err != nil {
			t.Fatal(err)
		}
		b.Ranges[0].Records += int64(n)
	}
	return b
}

// SpansWithIDs is an OTLP export request (protobuf) of one span per
// name, each with the trace and span id given, starting at 2023-11-14
// 22:13:20 UTC and lasting a second. An all-zero id is invalid in OTLP
// and stored as null: such spans have no identity, and the dedup model
// tells them apart by their content (merge.Dedup.Identity).
func SpansWithIDs(t testing.TB, trace pcommon.TraceID, span pcommon.SpanID, names ...string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	start := time.Unix(1_700_000_000, 0)
	for _, name := range names {
		s := ss.Spans().AppendEmpty()
		s.SetName(name)
		s.SetTraceID(trace)
		s.SetSpanID(span)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
