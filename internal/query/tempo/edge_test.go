package tempo

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"
)

// TestTraceLevelIntrinsicsAcrossTheWindowEdge: a metrics query whose
// range starts after a trace's root span still knows the trace's root
// service, root name and duration, as Tempo does (they are the trace's,
// stored with it, not the window's spans'): the checkout trace's root
// starts at base, its sql parse span at base+150ms; over
// [base+120ms, base+1s] the parse span is counted by its trace's
// rootServiceName, rootName and traceDuration (2s).
func TestTraceLevelIntrinsicsAcrossTheWindowEdge(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{
		`{ rootServiceName = "frontend" && name = "sql parse" } | count_over_time()`,
		`{ rootName = "GET /api" && name = "sql parse" } | count_over_time()`,
		`{ traceDuration >= 2s && name = "sql parse" } | count_over_time()`,
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

// TestStructuralMetricsAcrossTheWindowEdge: a metrics query's structural
// operators see the whole trace, as Tempo evaluates them over the trace
// and counts the matched spans starting in the range: over
// [base+120ms, base+1s] the sql parse span descends from GET /api
// (started at base) and is a child of db query (base+100ms).
func TestStructuralMetricsAcrossTheWindowEdge(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{
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
