package tempo

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Spans whose times are past 2262-04-11, where int64 nanoseconds end:
// OTLP's times are uint64 (to 2554), and a client with a broken clock or
// an unset field filled with all ones sends them.
const (
	traceEndsFar   = "000000000000000000000000000000e1" // starts at base, ends in 2300
	traceStartsFar = "000000000000000000000000000000e2" // starts and ends in 2300
	traceMaxTime   = "000000000000000000000000000000e3" // starts and ends at the largest uint64
	traceNoStart   = "000000000000000000000000000000e4" // no start (0), ends at base
)

// farTime is 2300-01-01 in OTLP's nanoseconds.
var farTime = uint64(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) * 1e9

// farTraces is tenant a's fixture with the three traces above.
func farTraces() map[string][]ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "clock-skew")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	add := func(trace, span string, start, end uint64) {
		sp := ss.AppendEmpty()
		sp.SetTraceID(pcommon.TraceID(traceID(trace)))
		sp.SetSpanID(pcommon.SpanID(spanID(span)))
		sp.SetName("far " + span)
		sp.SetStartTimestamp(pcommon.Timestamp(start))
		sp.SetEndTimestamp(pcommon.Timestamp(end))
	}
	add(traceEndsFar, "e100000000000001", uint64(base.UnixNano()), farTime)
	add(traceStartsFar, "e200000000000001", farTime, farTime+1e9)
	add(traceMaxTime, "e300000000000001", math.MaxUint64, math.MaxUint64)
	add(traceNoStart, "e400000000000001", 0, uint64(base.UnixNano()))
	return map[string][]ptrace.Traces{"a": {traces(tenantA), td}}
}

// TestSearchWithASpanEndingPast2262: a span whose start plus duration is
// past int64 nanoseconds does not make every search over its window (or
// over all time) fail with DuckDB's "Overflow in addition of INT64": its
// trace's end is held at int64's end, and the other traces are found
// beside it.
func TestSearchWithASpanEndingPast2262(t *testing.T) {
	f := newFixtureOf(t, farTraces(), maxTraceSpans)
	s := base.Unix()
	for _, params := range []url.Values{
		{"q": {"{}"}, "start": {fmt.Sprint(s - 10)}, "end": {fmt.Sprint(s + 10)}},
		{"q": {"{ traceDuration > 1s }"}, "start": {fmt.Sprint(s - 10)}, "end": {fmt.Sprint(s + 10)}},
		{"q": {"{}"}, "limit": {"100"}},
	} {
		rec := f.get("a", "/api/search?"+params.Encode(), "")
		if rec.Code != 200 {
			t.Errorf("search %v: %d %s, want the traces found beside the span ending in 2300", params, rec.Code, rec.Body)
			continue
		}
		var out grafanaSearch
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, tr := range out.Traces {
			found[tr.TraceID] = true
		}
		if !found[checkoutID] || !found[trimID(traceEndsFar)] {
			t.Errorf("search %v: traces %v, want the checkout trace and the one ending in 2300", params, found)
		}
	}
	params := url.Values{"q": {"{ traceDuration > 1s } | count_over_time()"}, "start": {fmt.Sprint(base.Add(-time.Second).UnixNano())},
		"end": {fmt.Sprint(base.Add(time.Second).UnixNano())}}
	if rec := f.get("a", "/api/metrics/query?"+params.Encode(), ""); rec.Code != 200 {
		t.Errorf("metrics %v: %d %s, want an answer beside the span ending in 2300", params, rec.Code, rec.Body)
	}
}

// TestTraceByIDInAWindowWithASpanEndingPast2262: a trace asked for by id
// within a window holding its span is found, also when the span ends
// past int64 nanoseconds (its end did wrap to before 1970, which put
// the trace outside every window).
func TestTraceByIDInAWindowWithASpanEndingPast2262(t *testing.T) {
	f := newFixtureOf(t, farTraces(), maxTraceSpans)
	s := base.Unix()
	rec := f.get("a", fmt.Sprintf("/api/traces/%s?start=%d&end=%d", traceEndsFar, s-10, s+10), "")
	if rec.Code != 200 {
		t.Fatalf("trace %s over [%d, %d]: %d %s, want the trace starting in it", traceEndsFar, s-10, s+10, rec.Code, rec.Body)
	}
}

// TestTraceByIDKeepsStartsPast2262: a span starting past int64
// nanoseconds is answered with the start it was sent with (OTLP's
// fixed64 holds it, and start_time keeps its microseconds), not with
// 2262-04-11T23:47:16.854775807Z, where start_time_unix_nano holds it;
// its end is its start plus its duration. A span sent without a start
// keeps its end (it has no duration to add).
func TestTraceByIDKeepsTimesPast2262(t *testing.T) {
	f := newFixtureOf(t, farTraces(), maxTraceSpans)
	for _, c := range []struct {
		trace      string
		start, end uint64
	}{
		{traceStartsFar, farTime, farTime + 1e9},
		// all ones: its microseconds, the nanoseconds beyond them lost
		{traceMaxTime, math.MaxUint64 / 1000 * 1000, math.MaxUint64 / 1000 * 1000},
		{traceEndsFar, uint64(base.UnixNano()), farTime},
		// no start, so no duration: the end of end_time, to the microsecond
		{traceNoStart, 0, uint64(base.Truncate(time.Microsecond).UnixNano())},
	} {
		rec := f.get("a", "/api/traces/"+c.trace, "application/protobuf")
		if rec.Code != 200 {
			t.Fatalf("trace %s: %d %s", c.trace, rec.Code, rec.Body)
		}
		var td tracepb.TracesData
		if err := proto.Unmarshal(rec.Body.Bytes(), &td); err != nil {
			t.Fatal(err)
		}
		sp := td.ResourceSpans[0].ScopeSpans[0].Spans[0]
		if sp.StartTimeUnixNano != c.start || sp.EndTimeUnixNano != c.end {
			t.Errorf("trace %s: span [%d, %d], want [%d, %d] as sent", c.trace, sp.StartTimeUnixNano, sp.EndTimeUnixNano, c.start, c.end)
		}
	}
}
