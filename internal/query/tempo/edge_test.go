package tempo

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"
)

// TestMetricsAcrossTheWindowEdge: a metrics query whose range starts
// after a trace's root span sees the whole trace, as Tempo evaluates it
// (MetricsEvaluator) and counts the matched spans starting in the range.
// The checkout trace's root GET /api starts at base, db query at
// base+100ms, its child sql parse at base+150ms; over [base+120ms,
// base+1s] the parse span is counted once by its trace's rootServiceName,
// rootName and traceDuration (2s, stored with the trace, not the
// window's spans'), and by the structural operators to its ancestors.
func TestMetricsAcrossTheWindowEdge(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{
		`{ rootServiceName = "frontend" && name = "sql parse" } | count_over_time()`,
		`{ rootName = "GET /api" && name = "sql parse" } | count_over_time()`,
		`{ traceDuration >= 2s && name = "sql parse" } | count_over_time()`,
		`{ name = "GET /api" } >> { name = "sql parse" } | count_over_time()`,
		`{ name = "db query" } > { name = "sql parse" } | count_over_time()`,
	} {
		params := url.Values{"q": {q}, "start": {fmt.Sprint(base.Add(120 * time.Millisecond).UnixNano())},
			"end": {fmt.Sprint(base.Add(time.Second).UnixNano())}}
		rec := f.get("a", "/api/metrics/query?"+params.Encode(), "")
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", q, rec.Code, rec.Body)
		}
		var out struct {
			Series []struct{ Value float64 }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if len(out.Series) != 1 || out.Series[0].Value != 1 {
			t.Errorf("%s over [base+120ms, base+1s]: %s, want the sql parse span counted once", q, rec.Body)
		}
	}
}

// TestSearchEndIsTheInstantNotTheSecond: a search's end (Unix seconds) is
// the instant end×1e9 ns, as Tempo compares a trace's start with it
// (pkg/traceql/engine.go: EndTimeUnixNanos = unixSecToNano(searchReq.End);
// tempodb/encoding/vparquet4/block_traceql.go createTraceIterator: trace
// start <= end). The checkout trace starts at base (second s + 0.123s):
// a window ending at s does not hold it, one ending at s+1 does. A
// trace ending exactly at the window's start is in it (end >= start).
func TestSearchEndIsTheInstantNotTheSecond(t *testing.T) {
	f := newFixture(t)
	s := base.Unix()
	for _, c := range []struct {
		start, end int64
		want       []string
	}{
		{s - 10, s, nil},
		{s - 10, s + 1, []string{checkoutID}},
		// the pay trace runs [base+1min, base+1min+1.5s]: a window
		// ending at its start's second does not hold it, the next does.
		{s + 30, s + 60, nil},
		{s + 30, s + 61, []string{payID}},
	} {
		out := f.search("a", url.Values{"q": {"{}"}, "start": {fmt.Sprint(c.start)}, "end": {fmt.Sprint(c.end)}})
		var got []string
		for _, tr := range out.Traces {
			got = append(got, tr.TraceID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("search over [s%+d, s%+d]: traces %v, want %v (a trace starting after end×1e9 ns is not Tempo's)", c.start-s, c.end-s, got, c.want)
		}
	}
}
