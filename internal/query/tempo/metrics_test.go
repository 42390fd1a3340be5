package tempo

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// grafanaRange is the query_range answer as Grafana's datasource reads
// it (pkg/tsdb/tempo/traceql/metrics.go: labels and samples).
type grafanaRange struct {
	Series []struct {
		Labels []struct {
			Key   string                     `json:"key"`
			Value map[string]json.RawMessage `json:"value"`
		} `json:"labels"`
		Samples []struct {
			TimestampMs string  `json:"timestampMs"`
			Value       float64 `json:"value"`
		} `json:"samples"`
	} `json:"series"`
}

// rangeOf queries q over [base-1m, base+2m] with a 1m step and lists
// each series as "labels: value@minute …" (minutes after base-1m, zero
// samples left out).
func (f *fixture) rangeOf(tenant, q string) []string {
	f.t.Helper()
	start := base.Add(-time.Minute).Truncate(time.Minute)
	params := url.Values{"q": {q}, "start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(start.Add(3 * time.Minute).Unix())}, "step": {"60"}}
	var out grafanaRange
	rec := f.get(tenant, "/api/metrics/query_range?"+params.Encode(), "")
	if rec.Code != 200 {
		f.t.Fatalf("%s: %d %s", q, rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		f.t.Fatal(err)
	}
	var lines []string
	for _, s := range out.Series {
		var ls []string
		for _, l := range s.Labels {
			for k, v := range l.Value {
				ls = append(ls, l.Key+"="+k+":"+string(v))
			}
		}
		var vs []string
		for _, smp := range s.Samples {
			var ms int64
			fmt.Sscan(smp.TimestampMs, &ms)
			if smp.Value != 0 {
				vs = append(vs, fmt.Sprintf("%g@%d", math.Round(smp.Value*1e6)/1e6, (ms-start.UnixMilli())/60000))
			}
		}
		lines = append(lines, strings.Join(ls, ",")+": "+strings.Join(vs, " "))
	}
	slices.Sort(lines)
	return lines
}

// TestQueryRange: the metrics Grafana's Traces Drilldown asks for, per
// interval (right-closed, stamped with its end), by attributes, each
// span once though the pay trace was loaded twice; tenancy.
func TestQueryRange(t *testing.T) {
	f := newFixture(t)
	// base is 03:04:05.12; the range starts at 03:03 (aligned one step
	// earlier, 03:02, by the additional first interval); the checkout
	// spans fall in the interval ending 03:05 (+2 minutes after 03:03),
	// the pay spans (base+1m) in the one ending 03:06 (+3).
	for _, c := range []struct {
		q    string
		want []string
	}{
		{`{} | count_over_time()`, []string{`__name__=stringValue:"count_over_time": 3@2 2@3`}},
		{`{ resource.service.name = "db" } | rate()`, []string{`__name__=stringValue:"rate": 0.033333@2 0.016667@3`}},
		{`{} | count_over_time() by (resource.service.name)`, []string{
			`resource.service.name=stringValue:"db": 2@2 1@3`, `resource.service.name=stringValue:"frontend": 1@2`,
			`resource.service.name=stringValue:"payments": 1@3`}},
		{`{ kind = server } | count_over_time() by (span.http.status_code, status)`, []string{
			`span.http.status_code=intValue:"200",status=stringValue:"ok": 1@2`,
			`span.http.status_code=intValue:"500",status=stringValue:"error": 1@3`}},
		// Durations 2s, 0.5s, 0.01s at +2: log2 buckets 2.147s, 0.537s,
		// 0.0134s (powers of two of nanoseconds); p50 is the second
		// sample's bucket max, p100 the largest's.
		{`{ trace:rootService = "frontend" } | quantile_over_time(duration, .5, 1)`, []string{
			`p=doubleValue:0.5: 0.536871@2`, `p=doubleValue:1: 2.147484@2`}},
		// The heatmap of Traces Drilldown: a series per log2 bucket.
		{`{ resource.service.name = "db" } | histogram_over_time(duration)`, []string{
			`__bucket=doubleValue:0.016777216: 1@2`, `__bucket=doubleValue:0.033554432: 1@3`, `__bucket=doubleValue:0.536870912: 1@2`}},
	} {
		if got := f.rangeOf("a", c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.q, got, c.want)
		}
	}
	if got := f.rangeOf("b", `{} | count_over_time() by (resource.service.name)`); !slices.Equal(got, []string{`resource.service.name=stringValue:"secret-svc": 2@2`}) {
		t.Errorf("tenant b: %q", got)
	}
	for _, p := range []string{"q={}", "q=" + url.QueryEscape("{} | rate()") + "&step=x", "q=" + url.QueryEscape("{} | rate()") + "&start=20&end=10",
		"q=" + url.QueryEscape("{} | quantile_over_time(span.x, .5)")} {
		if rec := f.get("a", "/api/metrics/query_range?"+p, ""); rec.Code != 400 {
			t.Errorf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
	if rec := f.get("", "/api/metrics/query_range?q="+url.QueryEscape("{} | rate()"), ""); rec.Code != 401 {
		t.Errorf("no tenant: %d", rec.Code)
	}
}

// TestQueryInstant: one value per series over the whole range.
func TestQueryInstant(t *testing.T) {
	f := newFixture(t)
	params := url.Values{"q": {`{ resource.service.name != "frontend" } | count_over_time() by (resource.service.name)`},
		"start": {fmt.Sprint(base.Add(-time.Minute).Unix())}, "end": {fmt.Sprint(base.Add(2 * time.Minute).Unix())}}
	var out struct {
		Series []struct {
			Labels []struct {
				Key   string            `json:"key"`
				Value map[string]string `json:"value"`
			} `json:"labels"`
			Value float64 `json:"value"`
		} `json:"series"`
	}
	for _, tenant := range []string{"a", "b"} {
		if code := f.json(tenant, "/api/metrics/query?"+params.Encode(), &out); code != 200 {
			t.Fatalf("%d", code)
		}
		var got []string
		for _, s := range out.Series {
			got = append(got, fmt.Sprintf("%s=%s: %g", s.Labels[0].Key, s.Labels[0].Value["stringValue"], s.Value))
		}
		slices.Sort(got)
		want := map[string][]string{"a": {"resource.service.name=db: 3", "resource.service.name=payments: 1"},
			"b": {"resource.service.name=secret-svc: 2"}}[tenant]
		if !slices.Equal(got, want) {
			t.Errorf("tenant %s: %q, want %q", tenant, got, want)
		}
	}
}

// TestLog2Quantile: upstream's interpolation between power-of-two buckets
// (below the first bucket, from half its max).
func TestLog2Quantile(t *testing.T) {
	hist := map[float64]float64{1: 2, 2: 2, 4: 4}
	for _, c := range []struct{ p, want float64 }{{0, math.Pow(2, -.5)}, {.25, 1}, {.5, 2}, {.75, math.Pow(2, 1.5)}, {1, 4}} {
		if got := log2Quantile(c.p, hist); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("p%g: %g, want %g", c.p, got, c.want)
		}
	}
	if log2Quantile(.5, nil) != 0 {
		t.Error("empty histogram")
	}
}

// TestQueryInstantLeavesOutItsStart: an instant query counts the spans
// starting in (start, end], as a range query's intervals are
// left-open: Tempo's evaluator skips every span with start <= its
// request's start before any interval is chosen (pkg/traceql/
// engine_metrics.go metricsEvaluator.Do and DoSpansOnly, checkTime:
// "st <= e.start || st > e.end", since #5366; the instant interval
// mapper's ts >= start never sees such a span), and the frontend passes
// an instant query's start unchanged (modules/frontend/
// metrics_query_handler.go). The checkout root starts at base exactly.
func TestQueryInstantLeavesOutItsStart(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		start time.Time
		want  float64 // spans counted
	}{
		{base, 0},
		{base.Add(-time.Nanosecond), 1},
	} {
		params := url.Values{"q": {`{ resource.service.name = "frontend" } | count_over_time()`},
			"start": {fmt.Sprint(c.start.UnixNano())}, "end": {fmt.Sprint(base.Add(time.Second).UnixNano())}}
		var out struct {
			Series []struct {
				Value float64 `json:"value"`
			} `json:"series"`
		}
		if code := f.json("a", "/api/metrics/query?"+params.Encode(), &out); code != 200 {
			t.Fatalf("%d", code)
		}
		var got float64
		for _, s := range out.Series {
			got += s.Value
		}
		if got != c.want {
			t.Errorf("instant query from base%+v: %+v, want %g span(s) counted (the root span starts at base)", c.start.Sub(base), out.Series, c.want)
		}
	}
}

// TestQueryRangeByMissingAttribute: spans without a by() attribute are
// in a series without that label, as Tempo answers them
// (pkg/traceql/engine_metrics.go GroupingAggregator.labelsFor: "Nils are
// dropped"; when every by() value is missing, the first label is the
// string "nil", Static.AsAnyValue of a nil), not in one whose label has
// no value (Grafana's legend then shows an empty value, and a series
// beside the others' labels that Tempo never answers).
func TestQueryRangeByMissingAttribute(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{`{} | count_over_time() by (span.http.method)`, []string{
			`span.http.method=stringValue:"GET": 1@2`, `span.http.method=stringValue:"POST": 1@3`,
			`span.http.method=stringValue:"nil": 2@2 1@3`}},
		{`{} | count_over_time() by (span.http.method, resource.service.name)`, []string{
			`resource.service.name=stringValue:"db": 2@2 1@3`,
			`span.http.method=stringValue:"GET",resource.service.name=stringValue:"frontend": 1@2`,
			`span.http.method=stringValue:"POST",resource.service.name=stringValue:"payments": 1@3`}},
	} {
		if got := f.rangeOf("a", c.q); !slices.Equal(got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.q, got, c.want)
		}
		// No label without a value (which rangeOf does not show).
		params := url.Values{"q": {c.q}, "start": {fmt.Sprint(base.Add(-time.Minute).Unix())}, "end": {fmt.Sprint(base.Add(2 * time.Minute).Unix())}, "step": {"60"}}
		if rec := f.get("a", "/api/metrics/query_range?"+params.Encode(), ""); strings.Contains(rec.Body.String(), `"value":{}`) {
			t.Errorf("%s: a label without a value: %s", c.q, rec.Body)
		}
	}
}

// TestDrilldownRootSpans: Traces Drilldown's default signal, root spans,
// is { nestedSetParent<0 && true } (grafana/traces-drilldown
// src/pages/Explore/primary-signals.ts), which Tempo answers with the
// spans without a parent: their nestedSetParent is -1, every other
// span's its parent's nestedSetLeft, 1 or more
// (pkg/traceql/enum_attributes.go IntrinsicNestedSetParent;
// tempodb/encoding/vparquet4 nested set numbering). Refusing it leaves
// Drilldown's first page empty.
func TestDrilldownRootSpans(t *testing.T) {
	f := newFixture(t)
	if got, want := f.rangeOf("a", `{nestedSetParent<0 && true} | count_over_time() by (resource.service.name)`), []string{
		`resource.service.name=stringValue:"frontend": 1@2`, `resource.service.name=stringValue:"payments": 1@3`}; !slices.Equal(got, want) {
		t.Errorf("root spans:\n got %q\nwant %q", got, want)
	}
	if got, want := matchedSpans(f.search("a", url.Values{"q": {`{ nestedSetParent > 0 }`}})), slices.Sorted(slices.Values([]string{
		checkoutID + ": db query,sql parse (2)", payID + ": db query (1)"})); !slices.Equal(got, want) {
		t.Errorf("spans with a parent:\n got %q\nwant %q", got, want)
	}
	if got, want := matchedSpans(f.search("a", url.Values{"q": {`{ nestedSetParent = -1 }`}})), slices.Sorted(slices.Values([]string{
		checkoutID + ": GET /api (1)", payID + ": POST /pay (1)"})); !slices.Equal(got, want) {
		t.Errorf("nestedSetParent = -1:\n got %q\nwant %q", got, want)
	}
	// A comparison whose answer depends on a span's place is refused.
	if rec := f.get("a", "/api/search?"+url.Values{"q": {`{ nestedSetParent = 3 }`}}.Encode(), ""); rec.Code != 400 {
		t.Errorf("nestedSetParent = 3: %d %s", rec.Code, rec.Body)
	}
}
