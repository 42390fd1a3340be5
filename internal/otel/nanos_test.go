package otel

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/sink"
)

// OTLP's times are unsigned nanoseconds: one past 2262 (int64's end)
// is held at int64's end in the nanosecond columns, as a metric point's
// are, and kept exactly in the microsecond ones. Found by a review: it
// wrapped to a time before 1970, which the Tempo and Loki APIs answer.
func TestNanosecondTimesPast2262DoNotWrap(t *testing.T) {
	at := pcommon.Timestamp(uint64(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) * 1e9) // > MaxInt64 ns
	if uint64(at) <= 1<<63-1 {
		t.Fatal("BUG in test: the time is not past int64")
	}
	check := func(kind string, row map[string]any, micros, nanos string) {
		t.Helper()
		us, _ := row[micros].(json.Number)
		ns, _ := row[nanos].(json.Number)
		if n, err := strconv.ParseInt(string(ns), 10, 64); err != nil || n != math.MaxInt64 {
			t.Errorf("%s: %s = %s, %s = %s µs (year 2300): want int64's end, never a wrapped time", kind, nanos, ns, micros, us)
		}
		if string(us) != "10413792000000000" {
			t.Errorf("%s: %s = %s µs, want the time as sent", kind, micros, us)
		}
	}

	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{1})
	s.SetSpanID(pcommon.SpanID{1})
	s.SetName("late")
	s.SetStartTimestamp(at)
	s.SetEndTimestamp(at + 1000)
	tv, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewDecoder(SignalTraces, EncodingProto, Tenancy{Default: "t"})
	b := &sink.Batch{}
	if _, err := d.AppendRows(b, &kgo.Record{Value: tv}); err != nil {
		t.Fatal(err)
	}
	check("span", parseRows(t, b.Rows)[0], "start_time", "start_time_unix_nano")

	ld := plog.NewLogs()
	l := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	l.SetTimestamp(at)
	l.Body().SetStr("late")
	lv, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	dl, _ := NewDecoder(SignalLogs, EncodingProto, Tenancy{Default: "t"})
	b = &sink.Batch{}
	if _, err := dl.AppendRows(b, &kgo.Record{Value: lv}); err != nil {
		t.Fatal(err)
	}
	check("log", parseRows(t, b.Rows)[0], "time", "time_unix_nano")
}
