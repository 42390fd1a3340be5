package tracegen

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The logs and metrics derived from traces agree with the spans: a
// record per span in its trace, tokens summed across exports, every span
// in one bucket of its operation's histogram.
func TestSignalsAgreeWithTheSpans(t *testing.T) {
	g, m := New(7), NewMeter()
	var spans, errors int
	var input int64
	var exported pcommon.Timestamp
	for range 20 {
		td := g.OTLPTrace()
		ld := LogsOf(td)
		if ld.LogRecordCount() != td.SpanCount() {
			t.Fatalf("%d log records for %d spans", ld.LogRecordCount(), td.SpanCount())
		}
		s := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		logs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := range s.Len() {
			if logs.At(i).SpanID() != s.At(i).SpanID() || logs.At(i).TraceID() != s.At(i).TraceID() {
				t.Fatalf("log record %d is not in its span", i)
			}
			if s.At(i).Status().Code() == ptrace.StatusCodeError {
				errors++
				if logs.At(i).SeverityNumber() != plog.SeverityNumberError {
					t.Fatalf("a failed span's record is %s", logs.At(i).SeverityText())
				}
			}
			if v, ok := s.At(i).Attributes().Get("gen_ai.usage.input_tokens"); ok {
				input += v.Int()
			}
		}
		spans += td.SpanCount()
		md := m.Record(td)
		at := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).Timestamp()
		if at <= exported {
			t.Fatalf("export at %v, not after the previous one at %v: a series would have two points at one time", at, exported)
		}
		exported = at
		var gotInput int64
		var counted uint64
		for _, metric := range md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().All() {
			switch metric.Name() {
			case "gen_ai.client.token.usage":
				for _, p := range metric.Sum().DataPoints().All() {
					if typ, _ := p.Attributes().Get("gen_ai.token.type"); typ.Str() == "input" {
						gotInput += p.IntValue()
					}
				}
			case "gen_ai.client.operation.duration":
				for _, p := range metric.Histogram().DataPoints().All() {
					var inBuckets uint64
					for _, c := range p.BucketCounts().All() {
						inBuckets += c
					}
					if inBuckets != p.Count() {
						t.Fatalf("buckets hold %d of %d", inBuckets, p.Count())
					}
					counted += p.Count()
				}
			}
		}
		if gotInput != input || counted != uint64(spans) {
			t.Fatalf("cumulative input tokens %d, want %d; durations of %d spans, want %d", gotInput, input, counted, spans)
		}
	}
	if errors == 0 {
		t.Fatal("no failed span among the traces: the ERROR records went untested")
	}
}
