package sinktest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/verify"
)

// HasProblem says whether one of the report's problems contains each of
// want.
func HasProblem(rep *verify.Report, want ...string) bool {
	return slices.ContainsFunc(rep.Problems, func(p string) bool {
		return !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(p, w) })
	})
}

// SpansBatch decodes offsets first..last of partition 0 of topic "otlp"
// into otel_spans rows, each a message of three spans of tenant team-a,
// those in bad a message that does not decode (a dead letter).
func SpansBatch(t testing.TB, first, last int64, bad ...int64) *sink.Batch {
	t.Helper()
	dec, err := otel.NewDecoder(otel.SignalTraces, otel.EncodingProto, otel.Tenancy{Default: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 3 {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(fmt.Sprintf("span %d", i))
		sp.SetTraceID([16]byte{1})
		sp.SetSpanID([8]byte{byte(i + 1)})
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
	}
	body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "otlp"}, First: first, Last: last}}}
	for o := first; o <= last; o++ {
		r := &kgo.Record{Topic: "otlp", Offset: o, Value: body, Timestamp: time.Now()}
		if slices.Contains(bad, o) {
			r.Value = []byte("not OTLP")
			start := len(b.DLQ)
			b.DLQ = envelope.AppendDLQRow(b.DLQ, r, "not OTLP", envelope.StageDecode)
			b.MaxLine = max(b.MaxLine, len(b.DLQ)-start)
			b.Ranges[0].DLQ++
			continue
		}
		n, err := dec.AppendRows(b, r)
		if err != nil {
			t.Fatal(err)
		}
		b.Ranges[0].Records += int64(n)
	}
	return b
}
