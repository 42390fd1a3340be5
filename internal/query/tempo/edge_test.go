package tempo

import (
	"encoding/json"
	"fmt"
	"net/url"
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
