package tempo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// newFixtureSpans is the Tempo API over a DuckDB holding spans alone, for
// tenant a.
func newFixtureSpans(t *testing.T, spans []span) *fixture {
	t.Helper()
	db, dir := openDB(t)
	loadSpans(t, db, dir, map[string][]ptrace.Traces{"a": {traces(spans)}})
	r, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, db: db}
	f.mux = http.NewServeMux()
	if _, err := register(f.mux, Options{Reader: r, Tenants: tenancy.Resolver{Required: true}, Version: "v-test"}, maxTraceSpans); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSearchTraceQLIgnoresMinMaxDuration: Tempo applies minDuration and
// maxDuration to the tags search alone (tempodb/encoding/vparquet4/
// block_search.go, req.MinDurationMs); a TraceQL search (q) goes to
// traceql.Engine.ExecuteSearch (pkg/traceql/engine.go), which never reads
// them (modules/querier/querier.go: api.IsTraceQLQuery picks the engine).
// So q={} with minDuration=1m answers every trace.
func TestSearchTraceQLIgnoresMinMaxDuration(t *testing.T) {
	f := newFixture(t)
	got := matchedSpans(f.search("a", url.Values{"q": {`{}`}, "minDuration": {"1m"}}))
	want := []string{payID + ": POST /pay,db query (2)", checkoutID + ": GET /api,db query,sql parse (3)"}
	if !slices.Equal(got, want) {
		t.Errorf("q={} minDuration=1m:\n got %q\nwant %q", got, want)
	}
	got = matchedSpans(f.search("a", url.Values{"q": {`{}`}, "maxDuration": {"1ms"}}))
	if len(got) != len(want) {
		t.Errorf("q={} maxDuration=1ms:\n got %q\nwant %q", got, want)
	}
}

// TestSearchSpssZeroIsDefault: spss=0 is parsed as 0 (pkg/api/http.go
// ParseSearchRequestWithDefault) and the engine reads 0 as its default,
// 3 spans a spanset (pkg/traceql/engine.go ExecuteSearch:
// "if spansPerSpanSet == 0 { spansPerSpanSet = DefaultSpansPerSpanSet }").
func TestSearchSpssZeroIsDefault(t *testing.T) {
	f := newFixture(t)
	got := matchedSpans(f.search("a", url.Values{"q": {`{}`}, "spss": {"0"}}))
	want := []string{payID + ": POST /pay,db query (2)", checkoutID + ": GET /api,db query,sql parse (3)"}
	if !slices.Equal(got, want) {
		t.Errorf("q={} spss=0:\n got %q\nwant %q", got, want)
	}
}

// TestSearchSpssOver100Refused: the frontend refuses more than
// max_spans_per_span_set (default 100, modules/frontend/config.go) with
// 400 "spans per span set exceeds 100. received 101"
// (modules/frontend/search_sharder.go RoundTrip).
func TestSearchSpssOver100Refused(t *testing.T) {
	f := newFixture(t)
	rec := f.get("a", "/api/search?"+url.Values{"q": {`{}`}, "spss": {"101"}}.Encode(), "")
	if rec.Code != 400 {
		t.Errorf("spss=101: %d %s, want 400 spans per span set exceeds 100. received 101", rec.Code, rec.Body)
	}
}

// TestRegexDotMatchesNewline: Tempo's =~ and !~ are Prometheus's
// FastRegexMatcher (pkg/regexp/regexp.go NewRegexp →
// labels.NewFastRegexMatcher, which compiles "^(?s:" + re + ")$"): `.`
// matches a newline, so "first.*" matches "first\nsecond".
func TestRegexDotMatchesNewline(t *testing.T) {
	f := newFixtureSpans(t, []span{
		{traceCheckout, spanRoot, "", "frontend", "GET /api", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second,
			map[string]any{"msg": "first\nsecond"}},
	})
	got := matchedSpans(f.search("a", url.Values{"q": {`{ span.msg =~ "first.*" }`}}))
	want := checkoutID + ": GET /api (1)"
	if len(got) != 1 || got[0] != want {
		t.Errorf(`{ span.msg =~ "first.*" } over "first\nsecond": got %q, want [%q]`, got, want)
	}
	got = matchedSpans(f.search("a", url.Values{"q": {`{ span.msg !~ "first.*" }`}}))
	if len(got) != 0 {
		t.Errorf(`{ span.msg !~ "first.*" } over "first\nsecond": got %q, want none`, got)
	}
}

// searchStatus runs q for tenant a and returns the status code and, on
// 200, the answer as matchedSpans lists it.
func (f *fixture) searchStatus(q string) (int, []string, string) {
	f.t.Helper()
	rec := f.get("a", "/api/search?"+url.Values{"q": {q}}.Encode(), "")
	if rec.Code != 200 {
		return rec.Code, nil, rec.Body.String()
	}
	var out grafanaSearch
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		f.t.Fatalf("search %s: %v", q, err)
	}
	return rec.Code, matchedSpans(out), ""
}

// TestNilComparisons: Tempo's grammar reads `x = nil` as
// OpNotExists and `x != nil` as OpExists (pkg/traceql/expr.y, "NIL
// handling"); validation refuses `= nil` only for intrinsics and
// resource.service.name (ast_validate.go UnaryOperation.validate), and
// pkg/traceql/test_examples.yaml lists `{ name != nil }` as valid. So
// `{ span.db.system = nil }` answers the spans without db.system, and
// `{ name != nil }` every span.
func TestNilComparisons(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{`{ span.db.system = nil }`, []string{checkoutID + ": GET /api (1)", payID + ": POST /pay (1)"}},
		{`{ name != nil }`, []string{checkoutID + ": GET /api,db query,sql parse (3)", payID + ": POST /pay,db query (2)"}},
		{`{ status != nil && kind = server }`, []string{checkoutID + ": GET /api (1)", payID + ": POST /pay (1)"}},
	} {
		code, got, body := f.searchStatus(c.q)
		if code != 200 || !slices.Equal(got, slices.Sorted(slices.Values(c.want))) {
			t.Errorf("%s: %d %s %q, want 200 %q", c.q, code, body, got, c.want)
		}
	}
	for _, q := range []string{`{ name = nil }`, `{ resource.service.name = nil }`} {
		if code, _, _ := f.searchStatus(q); code != 400 {
			t.Errorf("%s: %d, want 400 (cannot be nil)", q, code)
		}
	}
}

// TestDurationComparedWithNumber: int, float and duration are
// matching operands (pkg/traceql/enum_statics.go isMatchingOperand:
// "t.isNumeric() && otherT.isNumeric()", isNumeric includes
// TypeDuration), and the fetch layer compares span duration nanoseconds
// with an int operand (tempodb/encoding/vparquet4/block_traceql.go
// createDurationPredicate / createIntPredicate, case traceql.TypeInt).
// `{ duration > 1000000000 }` is the spans over 1s.
func TestDurationComparedWithNumber(t *testing.T) {
	f := newFixture(t)
	code, got, body := f.searchStatus(`{ duration > 1000000000 }`)
	want := []string{checkoutID + ": GET /api (1)", payID + ": POST /pay (1)"}
	if code != 200 || !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("{ duration > 1000000000 }: %d %s %q, want 200 %q", code, body, got, want)
	}
}

// TestIntLiteralMatchesFloatAttribute: ints and floats compare as
// numbers, `{ span.weight > 1 }` matching weight = 1.5 (a double) and
// `{ span.http.status_code = 200.0 }` an int 200. Tempo differs on
// purpose here: its fetch layer reads an int operand's predicate from
// the int value column alone (tempodb/encoding/vparquet4/
// block_traceql.go createAttributeIterator), so neither matches there,
// grafana/tempo issue #4332 "Ints can't be compared to floats", open. A
// numeric comparison is what the user means (README, Tempo section).
func TestIntLiteralMatchesFloatAttribute(t *testing.T) {
	f := newFixture(t)
	code, got, body := f.searchStatus(`{ span.weight > 1 }`)
	if want := []string{checkoutID + ": db query (1)"}; code != 200 || !slices.Equal(got, want) {
		t.Errorf("{ span.weight > 1 } over weight=1.5: %d %s %q, want 200 %q", code, body, got, want)
	}
	code, got, body = f.searchStatus(`{ span.http.status_code = 200.0 }`)
	if want := []string{checkoutID + ": GET /api (1)"}; code != 200 || !slices.Equal(got, want) {
		t.Errorf("{ span.http.status_code = 200.0 } over an int 200: %d %s %q, want 200 %q", code, body, got, want)
	}
}

// v2Values requests /api/v2/search/tag/{tag}/values with q for tenant a:
// the status and the values as "type:value", sorted.
func (f *fixture) v2Values(tag, q string) (int, []string) {
	f.t.Helper()
	var out struct {
		TagValues []struct{ Type, Value string } `json:"tagValues"`
	}
	code := f.json("a", "/api/v2/search/tag/"+url.PathEscape(tag)+"/values?q="+url.QueryEscape(q), &out)
	var vs []string
	for _, v := range out.TagValues {
		vs = append(vs, v.Type+":"+v.Value)
	}
	slices.Sort(vs)
	return code, vs
}

// TestTagQueryLenient: the q of the tag APIs is read by
// traceql.ExtractConditionGroups (pkg/traceql/lenient_extract.go; called
// by modules/querier/querier.go SearchTagValuesBlocksV2 and the frontend's
// tag_handlers.go, whose only error is too many condition groups): a q
// that does not parse (Grafana's autocomplete sends the query being
// typed), or whose pipeline does not start with a spanset filter
// (findSpansetFilter: "SpansetOperation ... not a simple spanset
// filter"), gives no conditions and the values of every span: 200, not
// 400, and not narrowed by a structural operator.
func TestTagQueryLenient(t *testing.T) {
	f := newFixture(t)
	all := []string{"string:db", "string:frontend", "string:payments"}
	for _, q := range []string{`{ span.http.method = }`, `{ span.http.method = "POST" } >> { }`} {
		if code, got := f.v2Values("resource.service.name", q); code != 200 || !slices.Equal(got, all) {
			t.Errorf("values of resource.service.name, q=%s: %d %q, want 200 %q", q, code, got, all)
		}
	}
	if rec := f.get("a", "/api/v2/search/tags?q="+url.QueryEscape("{ x"), ""); rec.Code != 200 {
		t.Errorf("v2 tags, q={ x: %d %s, want 200 (all tags)", rec.Code, rec.Body)
	}
}

// TestTagValuesOfOwnCondition: when a condition group of q compares
// the tag itself with = a value, Tempo answers that value without reading
// the data (pkg/traceql/engine.go ExecuteTagValues: "if c.Attribute ==
// tag && c.Op == OpEqual { cb(c.Operands[0]) ... skip = true }").
func TestTagValuesOfOwnCondition(t *testing.T) {
	f := newFixture(t)
	want := []string{"string:PUT"}
	if code, got := f.v2Values("span.http.method", `{ span.http.method = "PUT" }`); code != 200 || !slices.Equal(got, want) {
		t.Errorf(`values of span.http.method, q={ span.http.method = "PUT" }: %d %q, want 200 %q`, code, got, want)
	}
}

// TestFloatExponent: Tempo lexes numbers with Go's text/scanner
// (pkg/traceql/lexer.go Lex: case scanner.Float → strconv.ParseFloat),
// which reads 1e1 as a float: `{ span.weight < 1e1 }` matches weight 1.5.
func TestFloatExponent(t *testing.T) {
	f := newFixture(t)
	code, got, body := f.searchStatus(`{ span.weight < 1e1 }`)
	want := []string{checkoutID + ": db query (1)"}
	if code != 200 || !slices.Equal(got, want) {
		t.Errorf("{ span.weight < 1e1 }: %d %s %q, want 200 %q", code, body, got, want)
	}
}

// TestTagRequestLimitZeroAndEmptyRange: Tempo's tag requests read limit with
// strconv.ParseUint, 0 accepted (MaxTagValues 0: the configured default),
// and start and end with no check that end is after start
// (pkg/api/search_tags.go parseSearchTagValuesRequest,
// ParseSearchTagsRequest: unlike ParseSearchRequest, no "start must be
// before end"; modules/frontend/tag_sharder.go RoundTrip checks only the
// range's maximum duration). start = end is 200.
func TestTagRequestLimitZeroAndEmptyRange(t *testing.T) {
	f := newFixture(t)
	s := fmt.Sprint(base.Unix())
	for _, p := range []string{
		"/api/v2/search/tag/resource.service.name/values?limit=0",
		"/api/search/tag/service.name/values?start=" + s + "&end=" + s,
		"/api/v2/search/tags?start=" + s + "&end=" + s,
	} {
		if rec := f.get("a", p, ""); rec.Code != 200 {
			t.Errorf("%s: %d %s, want 200", p, rec.Code, rec.Body)
		}
	}
}

// TestMetricsRangeLimitsAndSince: Tempo's frontend refuses a range query of more
// than max_intervals (default 10,000, modules/frontend/config.go
// cfg.Metrics.MaxIntervals) with 400 "step of 1s is too small, minimum
// step for given range is …", and a range over the metrics max_duration
// (default 24h, cfg.Metrics.Sharder.MaxDuration) with 400 "metrics query
// time range exceeds the maximum allowed duration of 24h0m0s"
// (modules/frontend/metrics_query_validation.go validateQueryRangeReq).
// It reads since as a Prometheus duration (pkg/api/http.go
// determineBounds: model.ParseDuration), so since=1d is a day.
func TestMetricsRangeLimitsAndSince(t *testing.T) {
	f := newFixture(t)
	start := base.Truncate(time.Hour)
	for _, c := range []struct {
		params url.Values
		code   int
	}{
		{url.Values{"start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(start.Add(10_001 * time.Second).Unix())}, "step": {"1"}}, 400},
		{url.Values{"start": {fmt.Sprint(start.Unix())}, "end": {fmt.Sprint(start.Add(25 * time.Hour).Unix())}, "step": {"3600"}}, 400},
		{url.Values{"since": {"1d"}, "step": {"3600"}}, 200},
	} {
		c.params.Set("q", "{} | count_over_time()")
		if rec := f.get("a", "/api/metrics/query_range?"+c.params.Encode(), ""); rec.Code != c.code {
			t.Errorf("%v: %d %.120s, want %d", c.params, rec.Code, rec.Body, c.code)
		}
	}
}

// TestSearchLimitAndRangeMaximums: Tempo's search frontend refuses a limit over
// max_limit (default 256Ki, modules/frontend/config.go) with 400 "limit
// 262145 exceeds max limit 262144" (modules/frontend/search_handlers.go
// adjustLimit), and a window over max_duration (default 168h) with 400
// "range specified by start and end exceeds 168h0m0s"
// (modules/frontend/search_sharder.go RoundTrip).
func TestSearchLimitAndRangeMaximums(t *testing.T) {
	f := newFixture(t)
	s := base.Unix()
	for _, p := range []url.Values{
		{"q": {"{}"}, "limit": {"262145"}},
		{"q": {"{}"}, "start": {fmt.Sprint(s)}, "end": {fmt.Sprint(s + 169*3600)}},
	} {
		if rec := f.get("a", "/api/search?"+p.Encode(), ""); rec.Code != 400 {
			t.Errorf("%v: %d %.120s, want 400", p, rec.Code, rec.Body)
		}
	}
}

// TestArrayAttributesCompareElements: an array attribute's elements are compared
// one by one: `=` matches when an element does, `!=` when none does
// (pkg/traceql/ast_execute.go BinaryOperation.execute, case
// lhsT.isMatchingArrayElement(rhsT): "operators like OpNotEqual ... must
// check all elements"; enum_statics.go isMatchingArrayElement); vparquet4
// keeps the elements in the typed value columns the predicates read
// (block_traceql.go createAttributeIterator, TypeStringArray with
// TypeString). Tag values list the elements
// (tempodb/encoding/vparquet4/block_autocomplete.go).
func TestArrayAttributesCompareElements(t *testing.T) {
	f := newFixtureSpans(t, []span{
		{traceCheckout, spanRoot, "", "frontend", "GET /api", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second,
			map[string]any{"tags": []any{"blue", "green"}, "codes": []any{int64(7), int64(9)}}},
	})
	want := []string{checkoutID + ": GET /api (1)"}
	for _, q := range []string{`{ span.tags = "green" }`, `{ span.tags =~ "gr.*" }`, `{ span.tags != "red" }`, `{ span.codes > 8 }`} {
		if code, got, body := f.searchStatus(q); code != 200 || !slices.Equal(got, want) {
			t.Errorf("%s over tags [blue green], codes [7 9]: %d %s %q, want %q", q, code, body, got, want)
		}
	}
	wantVals := []string{"string:blue", "string:green"}
	if code, got := f.v2Values("span.tags", ""); code != 200 || !slices.Equal(got, wantVals) {
		t.Errorf("values of span.tags: %d %q, want %q", code, got, wantVals)
	}
}

// TestMetricsByRootServiceName: by() takes any attribute, the trace
// intrinsics among them (pkg/traceql/expr.y: by(attributeList);
// engine_metrics.go GroupingAggregator reads each span's value with
// AttributeFor, labelled by Attribute.String(), "rootServiceName").
func TestMetricsByRootServiceName(t *testing.T) {
	f := newFixture(t)
	want := []string{`rootServiceName=stringValue:"frontend": 3@2`, `rootServiceName=stringValue:"payments": 2@3`}
	if got := f.rangeOf("a", `{} | count_over_time() by (rootServiceName)`); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
