// Tests of answers that once differed from Grafana Loki's, each
// citing the Loki source its expectation comes from.

package loki

import (
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// TestRateCounterExtrapolates: Loki's rate_counter is Prometheus's
// rate of a counter, extrapolated to the window's edges
// (pkg/logql/range_vector.go rateCounter → extrapolatedRate, since
// rate_counter was added, grafana/loki#6412). Counter values 10, 20, 30,
// 40 at t0+10s…40s, window (t0, t0+60s]: increase 30 over 30s sampled,
// extrapolated 10s to the start (under 1.1 × the 10s spacing; the zero
// point is 10s before the first sample, no nearer) and 5s to the end
// (half the spacing: the 20s gap is over the threshold), so 30·45/30 =
// 45 over 60s: 0.75 per second. Without extrapolation it is 0.5.
func TestRateCounterExtrapolates(t *testing.T) {
	var recs []record
	for i := 1; i <= 4; i++ {
		recs = append(recs, record{tenant: "a", resource: map[string]string{"service.name": "counter"},
			at: time.Duration(i) * 10 * time.Second, severity: plog.SeverityNumberInfo, body: fmt.Sprintf("requests=%d", i*10)})
	}
	srv := serverOf(t, recs)
	q := `sum(rate_counter({service_name="counter"} | logfmt | unwrap requests [1m]))`
	v := window(q, "step", "60s", "start", ns(t0.Add(time.Minute)), "end", ns(t0.Add(time.Minute)))
	typ, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", v))
	if typ != "matrix" || len(frames) != 1 || len(frames[0].values) != 1 {
		t.Fatalf("%s %+v", typ, frames)
	}
	if got := frames[0].values[0]; math.Abs(got-0.75) > 1e-9 {
		t.Fatalf("%s at t0+60s = %v, want 0.75 (Loki's extrapolatedRate)", q, got)
	}
}

// atOneMinute is an instant-like range query at t0+1m over lakeRecords.
func atOneMinute(q string) url.Values {
	return window(q, "step", "60s", "start", ns(t0.Add(time.Minute)), "end", ns(t0.Add(time.Minute)))
}

// TestComparisonOnKeepsOnlyTheOnLabels: a one-to-one vector
// comparison with on(…) answers samples labelled with the on labels
// alone, filter or bool alike (Loki pkg/logql/evaluator.go resultMetric:
// for CardOneToOne with On it deletes every other label, whatever the
// operator; Prometheus's resultMetric does the same).
func TestComparisonOnKeepsOnlyTheOnLabels(t *testing.T) {
	srv := server(t)
	q := `sum by (service_name, detected_level) (count_over_time({service_name="checkout", detected_level="error"}[1m]))` +
		` >= on(service_name) (sum by (service_name) (count_over_time({service_name="checkout"}[1m])) * 0)`
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q)))
	got := seriesValues(frames)
	want := "map[service_name:checkout]"
	if len(got) != 1 || !slices.Equal(got[want], []float64{1}) {
		t.Fatalf("%s: %v, want {%s: [1]} (the on() labels only)", q, got, want)
	}
}

// TestManyToOneMustBeExplicit: matching several series of one side
// with one of the other without group_left/group_right is an error in
// Loki (pkg/logql/evaluator.go vectorBinop: "multiple matches for
// labels: many-to-one matching must be explicit", and "found duplicate
// series on the right hand-side" when the one side has several), not an
// answer built from whichever sample was matched last.
func TestManyToOneMustBeExplicit(t *testing.T) {
	srv := server(t)
	// Loki answers these plain evaluation errors 500 with the message
	// (pkg/util/server/error.go ClientHTTPStatusAndError).
	for q, want := range map[string]string{
		// Three checkout series (one per level) on the left, one on the right.
		`count_over_time({service_name="checkout"}[1m]) / on(service_name) sum by (service_name) (count_over_time({service_name="checkout"}[1m]))`: "many-to-one matching must be explicit",
		// One on the left, three on the right.
		`sum by (service_name) (count_over_time({service_name="checkout"}[1m])) / on(service_name) count_over_time({service_name="checkout"}[1m])`: "found duplicate series on the right hand-side",
	} {
		status, body := get(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q))
		if status != http.StatusInternalServerError || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s, want 500 %q (as Loki)", q, status, body, want)
		}
	}
}

// TestOrLabelFilterShortCircuits: Loki's `a or b` label filter does
// not run b when a holds (pkg/logql/log/label_filter.go
// BinaryLabelFilter.Process: `if !b.And && lok { return line, true }`),
// so b's conversion error is never set on a line a keeps. Here rows=42
// keeps the line and msg (not a number) is never compared: the count is
// 1, not a pipeline error.
func TestOrLabelFilterShortCircuits(t *testing.T) {
	srv := serverOf(t, []record{{tenant: "a", resource: map[string]string{"service.name": "db"},
		at: time.Second, severity: plog.SeverityNumberInfo, body: `rows=42 msg=slow`}})
	q := `sum(count_over_time({service_name="db"} | logfmt | rows > 40 or msg > 1 [1m]))`
	status, body := get(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q))
	if status != http.StatusOK {
		t.Fatalf("%s: %d %s, want 200 with the value 1 (Loki does not evaluate the right of or when the left holds)", q, status, body)
	}
	_, frames := decodeGrafana(t, body)
	if got := seriesValues(frames); !slices.Equal(got["map[]"], []float64{1}) {
		t.Fatalf("%s: %v, want 1", q, got)
	}
}

// TestUnwrapErrorSurvivesGrouping: a range aggregation grouped with
// by (…) still fails on a sample whose unwrapped value does not convert:
// Loki's LabelsBuilder.GroupedLabels returns every label, __error__
// among them, before it groups when the entry has an error
// (pkg/logql/log/labels.go: "We need to return now before applying
// grouping otherwise the error might get lost"), and the range
// evaluator fails on it (pkg/logql/evaluator.go RangeVectorEvaluator.Next).
// Grouping first lost the error, and the failed conversion's 0 was
// averaged in: 5 instead of the pipeline error.
func TestUnwrapErrorSurvivesGrouping(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: time.Second, severity: plog.SeverityNumberInfo, body: `latency=10`},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 2 * time.Second, severity: plog.SeverityNumberInfo, body: `latency=abc`},
	})
	for _, q := range []string{
		`avg_over_time({service_name="api"} | logfmt | unwrap latency [1m]) by (service_name)`,
		`max_over_time({service_name="api"} | logfmt | unwrap latency [1m]) without (detected_level)`,
	} {
		status, body := get(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q))
		if status != http.StatusBadRequest || !strings.Contains(string(body), "SampleExtractionErr") {
			t.Errorf("%s: %d %s, want 400 with the pipeline error SampleExtractionErr (as Loki)", q, status, body)
		}
	}
	// The error filter after unwrap still drops the failed sample.
	q := `avg_over_time({service_name="api"} | logfmt | unwrap latency | __error__="" [1m]) by (service_name)`
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q)))
	if got := seriesValues(frames); !slices.Equal(got["map[service_name:api]"], []float64{10}) {
		t.Fatalf("%s: %v, want 10", q, got)
	}
}

// TestJSONExpressionsOnAnEmptyLine: json with expressions leaves an
// empty line alone, no label and no error (Loki pkg/logql/log/parser.go
// JSONExpressionParser.Process returns at once when len(line) == 0), and
// marks a JSONParserErr on a line that does not start as JSON does
// (isValidJSONStart: '"', '{' or '['; a leading space is not one), as
// unpack does a line not starting with '{' (UnpackParser.Process).
func TestJSONExpressionsOnAnEmptyLine(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: time.Second, severity: plog.SeverityNumberInfo, body: ``},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 2 * time.Second, severity: plog.SeverityNumberInfo, body: `{"msg":"ok"}`},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 3 * time.Second, severity: plog.SeverityNumberInfo, body: ` {"msg":"spaced"}`},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 4 * time.Second, severity: plog.SeverityNumberInfo, body: `42`},
	})
	for q, want := range map[string][]string{
		// Newest first: the spaced and numeric lines fail, the empty
		// one does not.
		`{service_name="api"} | json msg="msg" | __error__="" | line_format "[{{.msg}}]"`:      {"[ok]", "[]"},
		`{service_name="api"} | json msg="msg" | __error__!="" | line_format "{{.__error__}}"`: {"JSONParserErr", "JSONParserErr"},
		`{service_name="api"} | unpack | __error__="" | line_format "[{{.msg}}]"`:              {"[ok]", "[]"},
	} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", window(q)))
		if got := newestFirst(frames[0]); !slices.Equal(got, want) {
			t.Errorf("%s\n  got %q, want %q (as Loki's JSONExpressionParser and UnpackParser)", q, got, want)
		}
	}
}

// TestMinMaxSkipNaN: max_over_time, min_over_time, max and min take a
// NaN only when nothing else is there: Loki's maxOverTime and
// minOverTime (pkg/logql/range_vector.go) replace the running value
// when it is NaN and never with a NaN, and its vector max and min
// (pkg/logql/evaluator.go VectorAggEvaluator.Next) likewise, as
// Prometheus does. A NaN among the values (an unwrapped "NaN", a 0/0
// ratio) made the whole answer NaN.
func TestMinMaxSkipNaN(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: time.Second, severity: plog.SeverityNumberInfo, body: `v=NaN`},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 2 * time.Second, severity: plog.SeverityNumberInfo, body: `v=3`},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 3 * time.Second, severity: plog.SeverityNumberInfo, body: `v=5`},
		{tenant: "a", resource: map[string]string{"service.name": "web"}, at: time.Second, severity: plog.SeverityNumberInfo, body: `v=NaN`},
	})
	for q, want := range map[string]float64{
		`max_over_time({service_name="api"} | logfmt | unwrap v [1m])`: 5,
		`min_over_time({service_name="api"} | logfmt | unwrap v [1m])`: 3,
		// web's series is NaN alone, api's 5 and 3.
		`max(max_over_time({service_name=~"api|web"} | logfmt | unwrap v [1m]))`: 5,
		`min(min_over_time({service_name=~"api|web"} | logfmt | unwrap v [1m]))`: 3,
	} {
		_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q)))
		if len(frames) != 1 || len(frames[0].values) != 1 || frames[0].values[0] != want {
			t.Errorf("%s: %+v, want one value %v (NaN skipped, as Loki)", q, frames, want)
		}
	}
}

// TestUnwrapPostFilterSeesTheUnwrappedLabel: a label filter after
// unwrap compares the unwrapped label itself: Loki's
// streamLabelSampleExtractor.Process (pkg/logql/log/metrics_extraction.go)
// runs the post filters on the labels as they are, and only the series'
// labels leave the unwrapped one out (LabelExtractorWithStages groups
// without it). Removing the label before the post filters dropped every
// sample of `| unwrap v | v > 3`.
func TestUnwrapPostFilterSeesTheUnwrappedLabel(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: time.Second, severity: plog.SeverityNumberInfo, body: `v=3`},
		{tenant: "a", resource: map[string]string{"service.name": "api"}, at: 2 * time.Second, severity: plog.SeverityNumberInfo, body: `v=5`},
	})
	q := `sum_over_time({service_name="api"} | logfmt | unwrap v | v > 3 [1m])`
	_, frames := decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q)))
	if len(frames) != 1 || len(frames[0].values) != 1 || frames[0].values[0] != 5 {
		t.Fatalf("%s: %+v, want one series of 5 (the post filter reads v, as Loki's)", q, frames)
	}
	if _, has := frames[0].metric["v"]; has {
		t.Fatalf("%s: series %v keeps the unwrapped label", q, frames[0].metric)
	}
	// Grouped by the unwrapped label, the series keep it (Loki groups
	// without it only when no by (…) names labels).
	q = `max_over_time({service_name="api"} | logfmt | unwrap v [1m]) by (v)`
	_, frames = decodeGrafana(t, ok(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q)))
	got := seriesValues(frames)
	if len(got) != 2 || !slices.Equal(got["map[v:3]"], []float64{3}) || !slices.Equal(got["map[v:5]"], []float64{5}) {
		t.Fatalf("%s: %v, want {v=3}: 3 and {v=5}: 5", q, got)
	}
}

// TestParserErrorsAsLokiHintsThem: Loki's parsers run as the query's
// hints say (pkg/logql/log/parser_hints.go NewParserHint). Under a sum
// without labels, which Loki pushes into the range aggregation
// (pkg/logql/evaluator.go sends the sum as the selector;
// pkg/logql/syntax/ast.go VectorAggregationExpr.Extractor,
// canInjectVectorGrouping), a query that reads no label leaves its
// parsers unrun (NoLabels: JSONParser.Process returns at once), so a
// line that is not JSON is counted, not a pipeline error; and a query
// that groups or filters by __error__ keeps the parsers' errors as
// samples (shouldPreserveError, addErrLabel's __preserve_error__, which
// RangeVectorEvaluator.Next lets through). Elsewhere the error fails
// the query, as before.
func TestParserErrorsAsLokiHintsThem(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "mix"}, at: time.Second, severity: plog.SeverityNumberInfo, body: `{"level":"info"}`},
		{tenant: "a", resource: map[string]string{"service.name": "mix"}, at: 2 * time.Second, severity: plog.SeverityNumberInfo, body: `not json`},
	})
	for q, want := range map[string]map[string][]float64{
		`sum(count_over_time({service_name="mix"} | json [1m]))`:                   {"map[]": {2}},
		`sum(bytes_over_time({service_name="mix"} | json [1m]))`:                   {"map[]": {24}},
		`sum by (__error__) (count_over_time({service_name="mix"} | json [1m]))`:   {"map[]": {1}, "map[__error__:JSONParserErr]": {1}},
		`sum(count_over_time({service_name="mix"} | json | __error__ != "" [1m]))`: {"map[]": {1}},
	} {
		status, body := get(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q))
		if status != http.StatusOK {
			t.Errorf("%s: %d %s, want 200 %v (as Loki's parser hints)", q, status, body, want)
			continue
		}
		_, frames := decodeGrafana(t, body)
		got := seriesValues(frames)
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", q, got, want)
			continue
		}
		for k, w := range want {
			if !slices.Equal(got[k], w) {
				t.Errorf("%s: %v, want %v", q, got, want)
			}
		}
	}
	// Where the labels are read, the parser runs and its error fails
	// the query.
	for _, q := range []string{
		`count_over_time({service_name="mix"} | json [1m])`,
		`sum by (level) (count_over_time({service_name="mix"} | json [1m]))`,
		`sum without (level) (count_over_time({service_name="mix"} | json [1m]))`,
		`max(count_over_time({service_name="mix"} | json [1m]))`,
		// line_format reads level: the parser runs.
		`sum(rate({service_name="mix"} | json | line_format "{{.level}}" [1m]))`,
	} {
		status, body := get(t, srv, "a", "/loki/api/v1/query_range", atOneMinute(q))
		if status != http.StatusBadRequest || !strings.Contains(string(body), "JSONParserErr") {
			t.Errorf("%s: %d %s, want 400 with the pipeline error JSONParserErr (as Loki)", q, status, body)
		}
	}
}

// TestErrorBetweenWindowsIsNotAnError: with a step longer than the
// range, an entry between two steps' windows is in no sample, so its
// pipeline error fails nothing: Loki fails a query on the samples of a
// step's vector (pkg/logql/evaluator.go RangeVectorEvaluator.Next), and
// its range iterator drops what no window holds
// (pkg/logql/range_vector.go load).
func TestErrorBetweenWindowsIsNotAnError(t *testing.T) {
	srv := serverOf(t, []record{
		{tenant: "a", resource: map[string]string{"service.name": "gap"}, at: 55 * time.Second, severity: plog.SeverityNumberInfo, body: `{"ok":true}`},
		{tenant: "a", resource: map[string]string{"service.name": "gap"}, at: 80 * time.Second, severity: plog.SeverityNumberInfo, body: `not json`},
	})
	// Steps t0+60s and t0+120s, windows (t0+50s, t0+60s] and (t0+110s,
	// t0+120s]: the line at t0+80s is in neither.
	q := `count_over_time({service_name="gap"} | json [10s])`
	v := window(q, "step", "60s", "start", ns(t0.Add(time.Minute)), "end", ns(t0.Add(2*time.Minute)))
	status, body := get(t, srv, "a", "/loki/api/v1/query_range", v)
	if status != http.StatusOK {
		t.Fatalf("%s: %d %s, want 200 (the failed line is in no window)", q, status, body)
	}
	_, frames := decodeGrafana(t, body)
	if len(frames) != 1 || !slices.Equal(frames[0].values, []float64{1}) {
		t.Fatalf("%s: %+v, want one series with 1 at t0+60s", q, frames)
	}
	// In a window, the same line fails the query.
	v.Set("query", `count_over_time({service_name="gap"} | json [45s])`)
	if status, body := get(t, srv, "a", "/loki/api/v1/query_range", v); status != http.StatusBadRequest {
		t.Fatalf("%s: %d %s, want 400 (the failed line is in the window (t0+75s, t0+120s])", v.Get("query"), status, body)
	}
}
