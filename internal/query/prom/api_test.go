package prom

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	promapi "github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/query/httpapi"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// The answers are decoded by Prometheus's own Go client
// (client_golang api/prometheus/v1), which Grafana's and promtool's reads
// follow: it POSTs queries form-encoded and GETs label values.

// auth sends a bearer token and a tenant.
type auth struct{ token, org string }

func (a auth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.token != "" {
		r.Header.Set("Authorization", "Bearer "+a.token)
	}
	if a.org != "" {
		r.Header.Set("X-Scope-OrgID", a.org)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (f *fixture) client(t *testing.T, token, org string) v1.API {
	t.Helper()
	c, err := promapi.NewClient(promapi.Config{Address: f.srv.URL, RoundTripper: auth{token, org}})
	if err != nil {
		t.Fatal(err)
	}
	return v1.NewAPI(c)
}

var end = t0.Add(10 * time.Minute)

// teamA are the labels of team-a's counter but its name.
const teamA = `http_route="/cart", http_status_code="200", instance="i-1", job="shop/checkout", ` +
	`host_name="h1", otel_scope_name="meter", otel_scope_version="1.0", ` +
	`service_instance_id="i-1", service_name="checkout", service_namespace="shop"`

func labelSet(t *testing.T, s string) model.LabelSet {
	t.Helper()
	ls := model.LabelSet{}
	for _, kv := range strings.Split(s, ", ") {
		k, v, _ := strings.Cut(kv, "=")
		ls[model.LabelName(k)] = model.LabelValue(strings.Trim(v, `"`))
	}
	return ls
}

func TestInstantQueries(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, "ta", "")
	ctx := context.Background()
	want := labelSet(t, teamA)
	want[model.MetricNameLabel] = "http_server_requests_total"
	scalar := func(q string) float64 {
		t.Helper()
		v, _, _, err := c.Query(ctx, q, end)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		vec, ok := v.(model.Vector)
		if !ok || len(vec) != 1 {
			t.Fatalf("%s: %v, want one sample", q, v)
		}
		return float64(vec[0].Value)
	}

	v, _, _, err := c.Query(ctx, "http_server_requests_total", end)
	if err != nil {
		t.Fatal(err)
	}
	vec := v.(model.Vector)
	if len(vec) != 1 || !vec[0].Metric.Equal(model.Metric(want)) || vec[0].Value != 400 || !vec[0].Timestamp.Time().Equal(end) {
		t.Fatalf("counter: %v\nwant %v => 400 @ %v", vec, want, end)
	}
	// The batch loaded twice (a client's retry) counts once.
	if n := scalar("count_over_time(http_server_requests_total[1m])"); n != 4 {
		t.Errorf("count_over_time: %v points in a minute, want 4", n)
	}
	if r := scalar("rate(http_server_requests_total[1m])"); math.Abs(r-10.0/15) > 1e-9 {
		t.Errorf("rate: %v, want %v", r, 10.0/15)
	}
	if g := scalar("process_memory_usage_bytes"); g != 1040 {
		t.Errorf("gauge: %v, want 1040", g)
	}
	// Each step puts 1 of 5 observations at or under 0.1, 3 under 0.5: the
	// median is 3/4 of the way through (0.1, 0.5].
	if q := scalar(`histogram_quantile(0.5, sum by (le) (rate(http_server_duration_seconds_bucket[1m])))`); math.Abs(q-0.4) > 1e-9 {
		t.Errorf("histogram_quantile: %v, want 0.4", q)
	}
	if n := scalar(`http_server_duration_seconds_count / http_server_duration_seconds_sum`); math.Abs(n-5.0/3) > 1e-9 {
		t.Errorf("count/sum: %v, want 5/3", n)
	}
	if q := scalar(`rpc_latency_milliseconds{quantile="0.99"}`); q != 99 {
		t.Errorf("summary quantile: %v, want 99", q)
	}
	if n := scalar(`rpc_latency_milliseconds_sum / rpc_latency_milliseconds_count`); n != 20 {
		t.Errorf("summary mean: %v, want 20", n)
	}
	if n := scalar(`count(http_server_duration_seconds_bucket)`); n != 4 {
		t.Errorf("%v buckets, want 4 (0.1, 0.5, 1, +Inf)", n)
	}
	// A delta sum is not served; nor is another tenant's series.
	for _, q := range []string{`{__name__=~"delta.*"}`, `{http_route="/admin-b"}`, `{service_name="secret-b"}`} {
		v, _, _, err := c.Query(ctx, q, end)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.(model.Vector)) != 0 {
			t.Errorf("%s: %v, want nothing", q, v)
		}
	}
	// A limit cuts the result with Prometheus's warning.
	v, warnings, _, err := c.Query(ctx, "http_server_duration_seconds_bucket", end, v1.WithLimit(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.(model.Vector)) != 2 || !slices.Equal(warnings, []string{"results truncated due to limit"}) {
		t.Errorf("limit 2: %v, warnings %q", v, warnings)
	}
	v, _, _, err = c.Query(ctx, "1+1", end)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := v.(*model.Scalar); !ok || s.Value != 2 {
		t.Fatalf("1+1: %v", v)
	}
}

func TestRangeQuery(t *testing.T) {
	f := newFixture(t)
	v, _, _, err := f.client(t, "ta", "").QueryRange(context.Background(), `process_memory_usage_bytes{service_name="checkout"}`,
		v1.Range{Start: t0, End: t0.Add(time.Minute), Step: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := v.(model.Matrix)
	if len(m) != 1 || len(m[0].Values) != 3 {
		t.Fatalf("matrix %v", m)
	}
	for i, p := range m[0].Values {
		if want := model.SampleValue(1000 + 2*i); p.Value != want || !p.Timestamp.Time().Equal(t0.Add(time.Duration(i)*30*time.Second)) {
			t.Errorf("point %d: %v, want %v", i, p, want)
		}
	}
}

// TestOperatorSeesEachTenantApart: a token reading every tenant sees both
// tenants' series of the same name, told apart by __tenant_id__.
func TestOperatorSeesEachTenantApart(t *testing.T) {
	f := newFixture(t)
	v, _, _, err := f.client(t, "ops", "").Query(context.Background(), "sum by (__tenant_id__) (http_server_requests_total)", end)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range v.(model.Vector) {
		got[string(s.Metric[tenantLabel])] = float64(s.Value)
	}
	if got["team-a"] != 400 || got["team-b"] != 280 || len(got) != 2 {
		t.Fatalf("per tenant: %v", got)
	}
}

func TestLabelsSeriesMetadata(t *testing.T) {
	f := newFixture(t)
	c := f.client(t, "ta", "")
	ctx := context.Background()
	names, _, _, err := c.LabelValues(ctx, "__name__", nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http_server_duration_seconds_bucket", "http_server_duration_seconds_count", "http_server_duration_seconds_sum",
		"http_server_requests_total", "process_memory_usage_bytes", "rpc_latency_milliseconds", "rpc_latency_milliseconds_count", "rpc_latency_milliseconds_sum", "target_info"}
	if got := strs(names); !slices.Equal(got, want) {
		t.Errorf("metric names %v, want %v", got, want)
	}
	routes, _, _, err := c.LabelValues(ctx, "http_route", []string{"http_server_requests_total"}, t0, end)
	if err != nil {
		t.Fatal(err)
	}
	if got := strs(routes); !slices.Equal(got, []string{"/cart"}) {
		t.Errorf("routes %v", got)
	}
	les, _, _, err := c.LabelValues(ctx, "le", nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strs(les); !slices.Equal(got, []string{"+Inf", "0.1", "0.5", "1"}) {
		t.Errorf("le values %v", got)
	}
	lnames, _, _, err := c.LabelNames(ctx, []string{"process_memory_usage_bytes"}, t0, end)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(strs(lnames), " "); got != "__name__ host_name instance job otel_scope_name otel_scope_version service_instance_id service_name service_namespace" {
		t.Errorf("label names %s", got)
	}
	series, _, _, err := c.Series(ctx, []string{"http_server_duration_seconds_bucket", `{__name__="http_server_requests_total"}`}, t0, end)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range series {
		got = append(got, string(s["__name__"])+"/"+string(s["le"]))
	}
	if want := []string{"http_server_duration_seconds_bucket/+Inf", "http_server_duration_seconds_bucket/0.1", "http_server_duration_seconds_bucket/0.5",
		"http_server_duration_seconds_bucket/1", "http_server_requests_total/"}; !slices.Equal(got, want) {
		t.Errorf("series %v, want %v", got, want)
	}
	md, err := c.Metadata(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if m := md["http_server_requests_total"]; len(m) != 1 || m[0].Type != v1.MetricTypeCounter || m[0].Help != "Requests served." {
		t.Errorf("counter metadata %v", m)
	}
	if m := md["process_memory_usage_bytes"]; len(m) != 1 || m[0].Type != v1.MetricTypeGauge || m[0].Unit != "bytes" {
		t.Errorf("gauge metadata %v", m)
	}
	if m := md["http_server_duration_seconds"]; len(m) != 1 || m[0].Type != v1.MetricTypeHistogram || m[0].Unit != "seconds" {
		t.Errorf("histogram metadata %v", m)
	}
	if m := md["rpc_latency_milliseconds"]; len(m) != 1 || m[0].Type != v1.MetricTypeSummary || m[0].Unit != "milliseconds" {
		t.Errorf("summary metadata %v", m)
	}
	bi, err := c.Buildinfo(ctx)
	if err != nil || bi.Version != "test" {
		t.Errorf("buildinfo %v, %v", bi, err)
	}
}

func strs[T ~string](vs []T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// TestErrorsAnswerAsPrometheus: a query Prometheus cannot parse is 400
// bad_data, a range too fine too, one failing as it runs 422 execution,
// one past its timeout 503 timeout; each in Prometheus's envelope, by GET
// and by POST alike.
func TestErrorsAnswerAsPrometheus(t *testing.T) {
	f := newFixture(t)
	_, _, _, err := f.client(t, "ta", "").Query(context.Background(), "sum(", end)
	var pe *v1.Error
	if !errors.As(err, &pe) || pe.Type != v1.ErrBadData || !strings.Contains(pe.Msg, `invalid parameter "query"`) {
		t.Fatalf("bad query: %v", err)
	}
	for _, c := range []struct {
		method, path string
		form         url.Values
		status       int
		errorType    string
	}{
		{"GET", "/api/v1/query_range", url.Values{"query": {"up"}, "start": {"0"}, "end": {"100000"}, "step": {"1"}}, 400, "bad_data"},
		{"POST", "/api/v1/query_range", url.Values{"query": {"up"}, "start": {"10"}, "end": {"1"}, "step": {"1"}}, 400, "bad_data"},
		{"GET", "/api/v1/query", url.Values{"query": {"up"}, "time": {"yesterday"}}, 400, "bad_data"},
		{"POST", "/api/v1/series", url.Values{}, 400, "bad_data"},
		{"GET", "/api/v1/labels", url.Values{"match[]": {`{job=""}`}}, 400, "bad_data"},
		{"GET", "/api/v1/query", url.Values{"query": {`label_replace(vector(1), "x", "$1", "y", "(")`}, "time": {"1"}}, 422, "execution"},
		{"GET", "/api/v1/query", url.Values{"query": {"http_server_requests_total"}, "timeout": {"0.000001"}}, 503, "timeout"},
		{"GET", "/api/v1/query", url.Values{"query": {"up"}, "timeout": {"-1s"}}, 400, "bad_data"},
		{"GET", "/api/v1/query", url.Values{"query": {"http_server_requests_total"}, "time": {rfc3339(end)}}, 200, ""},
		{"POST", "/api/v1/query", url.Values{"query": {"http_server_requests_total"}, "time": {rfc3339(end)}}, 200, ""},
	} {
		status, body := f.do(t, c.method, c.path, c.form, "ta", "")
		var r response
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s %s: %v: %s", c.method, c.path, err, body)
		}
		if status != c.status || r.ErrorType != c.errorType || (c.status == 200) != (r.Status == "success") {
			t.Errorf("%s %s %v: %d %s", c.method, c.path, c.form, status, body)
		}
	}
}

// rfc3339 is t to the second, as clients send times.
func rfc3339(t time.Time) string { return time.Unix(t.Unix(), 0).UTC().Format(time.RFC3339) }

// do sends form by method (in the URL for GET, form-encoded for POST)
// with a token and a tenant, and returns the status and body.
func (f *fixture) do(t testing.TB, method, path string, form url.Values, token, org string) (int, string) {
	t.Helper()
	var req *http.Request
	var err error
	if method == "GET" {
		req, err = http.NewRequest(method, f.srv.URL+path+"?"+form.Encode(), nil)
	} else {
		req, err = http.NewRequest(method, f.srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := auth{token, org}.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestExecutionErrorKeepsTheQuerysOwnText: a query failing as it runs
// (422 execution: here label_replace's regular expression, which
// Prometheus compiles at evaluation) is answered with Prometheus's message
// whole, the query's own text in it. Only the read path's failures name
// the server's files; a URL path the user wrote (a route, a regular
// expression over routes) is not one to take out.
func TestExecutionErrorKeepsTheQuerysOwnText(t *testing.T) {
	f := newFixture(t)
	status, body := f.do(t, "GET", "/api/v1/query", url.Values{"query": {`label_replace(vector(1), "x", "$1", "y", "/api/v1/users/(")`}, "time": {"1"}}, "ta", "")
	var r response
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if status != 422 || r.ErrorType != "execution" {
		t.Fatalf("answered %d %s, want 422 execution", status, body)
	}
	if !strings.Contains(r.Error, `/api/v1/users/(`) {
		t.Errorf("error %q does not hold the query's own regular expression /api/v1/users/(", r.Error)
	}
}

// failingReader fails every query with an error naming a file, as a
// scan of a data file gone from the warehouse does.
type failingReader struct{ query.Reader }

func (failingReader) Query(context.Context, tenancy.Scope, string, ...any) (array.RecordReader, error) {
	return nil, errors.New("the query's scan failed: read otel_metrics: open /srv/lake/warehouse/m/data/x.parquet: no such file or directory")
}

// TestReadFailureHidesTheServersFilePaths: the read path's failure under
// a PromQL query and under a lookup is answered without the paths of the
// server's files, though PromQL answers it as an execution error.
func TestReadFailureHidesTheServersFilePaths(t *testing.T) {
	f := newFixture(t)
	mux := http.NewServeMux()
	tokens, err := tenancy.LoadTokens(f.tokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeFn, err := Register(mux, Options{Options: httpapi.Options{Reader: failingReader{f.reader}, Tenants: tenancy.Resolver{Tokens: tokens}, Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); closeFn() })
	failing := &fixture{srv: srv}
	for _, c := range []struct{ path, query string }{
		{"/api/v1/query", "http_server_requests_total"},
		{"/api/v1/series", `{job="shop/checkout"}`},
	} {
		form := url.Values{"query": {c.query}, "match[]": {c.query}, "time": {rfc3339(end)}}
		status, body := failing.do(t, "GET", c.path, form, "ta", "")
		var r response
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%s: %v: %s", c.path, err, body)
		}
		if status < 400 || !strings.Contains(r.Error, "open <path>: no such file") || strings.Contains(r.Error, "/srv/lake") {
			t.Errorf("%s: answered %d %q, want the failure without the file's path", c.path, status, r.Error)
		}
	}
}
