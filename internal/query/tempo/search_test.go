package tempo

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// grafanaSearch is the search answer as Grafana's datasource reads it
// (public/app/plugins/datasource/tempo: traces with their spanSets).
type grafanaSearch struct {
	Traces []struct {
		TraceID           string `json:"traceID"`
		RootServiceName   string `json:"rootServiceName"`
		RootTraceName     string `json:"rootTraceName"`
		StartTimeUnixNano string `json:"startTimeUnixNano"`
		DurationMs        int    `json:"durationMs"`
		SpanSets          []struct {
			Matched int `json:"matched"`
			Spans   []struct {
				SpanID            string `json:"spanID"`
				Name              string `json:"name"`
				StartTimeUnixNano string `json:"startTimeUnixNano"`
				DurationNanos     string `json:"durationNanos"`
				Attributes        []struct {
					Key   string                     `json:"key"`
					Value map[string]json.RawMessage `json:"value"`
				} `json:"attributes"`
			} `json:"spans"`
		} `json:"spanSets"`
	} `json:"traces"`
}

func (f *fixture) search(tenant string, params url.Values) grafanaSearch {
	f.t.Helper()
	rec := f.get(tenant, "/api/search?"+params.Encode(), "")
	if rec.Code != 200 {
		f.t.Fatalf("search %v: %d %s", params, rec.Code, rec.Body)
	}
	var out grafanaSearch
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		f.t.Fatalf("search %v: %v", params, err)
	}
	return out
}

// matchedSpans lists a search's answer as "trace: span names (matched)".
func matchedSpans(s grafanaSearch) []string {
	var out []string
	for _, tr := range s.Traces {
		var names []string
		n := 0
		for _, ss := range tr.SpanSets {
			n += ss.Matched
			for _, sp := range ss.Spans {
				names = append(names, sp.Name)
			}
		}
		slices.Sort(names)
		out = append(out, fmt.Sprintf("%s: %s (%d)", tr.TraceID, strings.Join(names, ","), n))
	}
	slices.Sort(out)
	return out
}

// The trace ids as Tempo's search writes them, without leading zeros.
const (
	checkoutID = "af7651916cd43dd8448eb211c80319c"
	payID      = "4bf92f3577b34da6"
)

// TestSearchTraceQL: spanset filters over intrinsics and attributes,
// spanset && and ||, the structural operators; each answered trace with
// its matched spans, counted once though the pay trace was loaded twice.
func TestSearchTraceQL(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{`{}`, []string{checkoutID + ": GET /api,db query,sql parse (3)", payID + ": POST /pay,db query (2)"}},
		{`{ resource.service.name = "db" }`, []string{checkoutID + ": db query,sql parse (2)", payID + ": db query (1)"}},
		{`{ .service.name = "db" && duration > 15ms }`, []string{checkoutID + ": db query (1)", payID + ": db query (1)"}},
		{`{ span.http.status_code >= 500 }`, []string{payID + ": POST /pay (1)"}},
		{`{ span.http.status_code = 200 || status = error }`, []string{checkoutID + ": GET /api,db query (2)", payID + ": POST /pay (1)"}},
		{`{ .http.status_code = "200" }`, nil}, // an int attribute is not the string "200"
		{`{ name =~ "db.*" && kind = client }`, []string{checkoutID + ": db query (1)", payID + ": db query (1)"}},
		{`{ name =~ "query" }`, nil}, // regular expressions match whole values
		{`{ name !~ ".*query.*" && span:kind = server }`, []string{checkoutID + ": GET /api (1)", payID + ": POST /pay (1)"}},
		{`{ status != ok && status != error }`, []string{checkoutID + ": sql parse (1)"}},
		{`{ span.weight > 1 }`, []string{checkoutID + ": db query (1)"}},
		{`{ .sampled = true }`, []string{checkoutID + ": GET /api (1)"}},
		{`{ .sampled }`, []string{checkoutID + ": GET /api (1)"}},
		{`{ span.db.system != nil && !(span.db.system = "postgres") }`, []string{payID + ": db query (1)"}},
		{`{ resource.host = "h-payments" }`, []string{payID + ": POST /pay (1)"}},
		{`{ rootServiceName = "frontend" && kind = internal }`, []string{checkoutID + ": sql parse (1)"}},
		{`{ rootName = "POST /pay" }`, []string{payID + ": POST /pay,db query (2)"}},
		{`{ traceDuration > 1600ms }`, []string{checkoutID + ": GET /api,db query,sql parse (3)"}},
		{`{ trace:duration < 1600ms && span:name = "db query" }`, []string{payID + ": db query (1)"}},
		{`{ statusMessage = "failed" }`, []string{checkoutID + ": db query (1)", payID + ": POST /pay (1)"}},
		{`{ span.http.method = "GET" } && { span.db.system = "postgres" }`, []string{checkoutID + ": GET /api,db query,sql parse (3)"}},
		{`{ span.http.method = "POST" } || { name = "sql parse" }`, []string{checkoutID + ": sql parse (1)", payID + ": POST /pay (1)"}},
		{`{ kind = server } > { kind = client }`, []string{checkoutID + ": db query (1)", payID + ": db query (1)"}},
		{`{ kind = server } >> { kind = internal }`, []string{checkoutID + ": sql parse (1)"}},
		{`{ kind = server } > { kind = internal }`, nil},
		{`{ kind = internal } < { kind = client }`, []string{checkoutID + ": db query (1)"}},
		{`{ kind = internal } << { kind = server }`, []string{checkoutID + ": GET /api (1)"}},
		{`{ kind = client } ~ { }`, nil}, // no span has a sibling
		{`({ kind = server } >> { kind = internal }) || { name = "POST /pay" }`, []string{checkoutID + ": sql parse (1)", payID + ": POST /pay (1)"}},
	} {
		got := matchedSpans(f.search("a", url.Values{"q": {c.q}}))
		if !slices.Equal(got, slices.Sorted(slices.Values(c.want))) {
			t.Errorf("%s:\n got %q\nwant %q", c.q, got, c.want)
		}
	}
}

// TestSearchAnswer: one answer in detail: the trace's root, start in
// nanoseconds, duration; its spans' exact times and the attributes the
// query names and select()s, typed.
func TestSearchAnswer(t *testing.T) {
	f := newFixture(t)
	s := f.search("a", url.Values{"q": {`{ span.db.system = "postgres" && status = error } | select(span.weight, resource.host, resource.service.name, .nope)`}})
	if len(s.Traces) != 1 {
		t.Fatalf("%d traces", len(s.Traces))
	}
	tr := s.Traces[0]
	if tr.TraceID != checkoutID || tr.RootServiceName != "frontend" || tr.RootTraceName != "GET /api" ||
		tr.StartTimeUnixNano != fmt.Sprint(base.UnixNano()) || tr.DurationMs != 2000 {
		t.Fatalf("trace %+v", tr)
	}
	sp := tr.SpanSets[0].Spans[0]
	if sp.SpanID != spanDB || sp.StartTimeUnixNano != fmt.Sprint(base.Add(100*time.Millisecond).UnixNano()) || sp.DurationNanos != "500000000" {
		t.Fatalf("span %+v", sp)
	}
	var attrs []string
	for _, a := range sp.Attributes {
		for k, v := range a.Value {
			attrs = append(attrs, a.Key+"="+k+":"+string(v))
		}
	}
	slices.Sort(attrs)
	want := []string{`db.system=stringValue:"postgres"`, `host=stringValue:"h-db"`, `service.name=stringValue:"db"`, `status=stringValue:"error"`, `weight=doubleValue:1.5`}
	if !slices.Equal(attrs, want) {
		t.Fatalf("attributes %q, want %q", attrs, want)
	}
	// An int attribute is an int (a string in protobuf's JSON).
	s = f.search("a", url.Values{"q": {`{ span.http.status_code = 500 }`}})
	if a := s.Traces[0].SpanSets[0].Spans[0].Attributes; len(a) != 1 || string(a[0].Value["intValue"]) != `"500"` {
		t.Fatalf("attributes %+v", a)
	}
}

// TestSearchParameters: limit, spss, the window, minDuration and
// maxDuration, tags (logfmt) and their refusals.
func TestSearchParameters(t *testing.T) {
	f := newFixture(t)
	// Most recent first; limit keeps the first.
	s := f.search("a", url.Values{"q": {"{}"}, "limit": {"1"}})
	if len(s.Traces) != 1 || s.Traces[0].TraceID != payID {
		t.Fatalf("limit 1: %q", matchedSpans(s))
	}
	s = f.search("a", url.Values{"q": {"{}"}, "spss": {"1"}})
	if got := matchedSpans(s); !slices.Equal(got, []string{payID + ": POST /pay (2)", checkoutID + ": GET /api (3)"}) {
		t.Fatalf("spss 1: %q", got)
	}
	st := base.Unix()
	s = f.search("a", url.Values{"q": {"{}"}, "start": {fmt.Sprint(st + 30)}, "end": {fmt.Sprint(st + 90)}})
	if got := matchedSpans(s); !slices.Equal(got, []string{payID + ": POST /pay,db query (2)"}) {
		t.Fatalf("window: %q", got)
	}
	for _, c := range []struct {
		params url.Values
		want   []string
	}{
		{url.Values{"minDuration": {"1800ms"}}, []string{checkoutID}},
		{url.Values{"maxDuration": {"1800ms"}}, []string{payID}},
		{url.Values{"tags": {`service.name="pay"`}}, []string{payID}},
		{url.Values{"tags": {`name="db" db.system=postgres`}}, []string{checkoutID}},
		{url.Values{"tags": {`http.status_code=500`}}, []string{payID}},
		{url.Values{"tags": {`status.code=error root.service.name=front`}}, []string{checkoutID}},
		{url.Values{"tags": {`db.system=postgre`}}, nil}, // other tags match whole values
	} {
		var got []string
		for _, tr := range f.search("a", c.params).Traces {
			got = append(got, tr.TraceID)
			if len(tr.SpanSets) != 0 {
				t.Errorf("%v: a tags search answered spansets", c.params)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: got %q, want %q", c.params, got, c.want)
		}
	}
	for _, p := range []string{"q={}&tags=a=b", "limit=0", "limit=x", "spss=-1", "start=10&end=5", "minDuration=2s&maxDuration=1s",
		"q=" + url.QueryEscape("{ .a = }"), "q=" + url.QueryEscape(`{ name =~ "(" }`), "tags=" + url.QueryEscape(`a="b`), "q=" + url.QueryEscape("{} | rate()")} {
		if rec := f.get("a", "/api/search?"+p, ""); rec.Code != 400 {
			t.Errorf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
}

// TestSearchTenancy: each tenant finds its own traces alone, by TraceQL
// and tags; a trace id both hold is answered with the asking tenant's
// spans.
func TestSearchTenancy(t *testing.T) {
	f := newFixture(t)
	if got := matchedSpans(f.search("b", url.Values{"q": {"{}"}})); !slices.Equal(got, []string{traceSecret + ": secret-op (1)", checkoutID + ": b-span (1)"}) {
		t.Fatalf("tenant b: %q", got)
	}
	for _, p := range []url.Values{{"q": {`{ .secret.key != nil }`}}, {"q": {`{ resource.service.name = "secret-svc" }`}}, {"tags": {"secret.key=b-value"}}} {
		if s := f.search("a", p); len(s.Traces) != 0 {
			t.Fatalf("tenant a found tenant b's traces with %v", p)
		}
	}
	s := f.search("b", url.Values{"q": {`{ name = "b-span" }`}})
	if len(s.Traces) != 1 || s.Traces[0].RootTraceName != "b-span" || s.Traces[0].DurationMs != 1000 {
		t.Fatalf("tenant b's part of the shared trace id: %+v", s.Traces)
	}
	if rec := f.get("", "/api/search?q={}", ""); rec.Code != 401 {
		t.Fatalf("no tenant: %d", rec.Code)
	}
}

// TestSearchWindowOverlappingTheTrace: a search whose window (start,
// end) begins while a trace is still running finds the trace, with its
// root and its whole duration, as Tempo does: its block search keeps the
// traces whose start and end overlap the window
// (tempodb/encoding/vparquet4/block_traceql.go createAllIterator: trace
// StartTimeUnixNano <= end and EndTimeUnixNano >= start) and evaluates
// every span of them. Bounding each span's start by the window loses the
// checkout trace, whose root (base to base+2s) started before base+1s.
func TestSearchWindowOverlappingTheTrace(t *testing.T) {
	f := newFixture(t)
	st := base.Unix()
	s := f.search("a", url.Values{"q": {`{ name = "GET /api" }`}, "start": {fmt.Sprint(st + 1)}, "end": {fmt.Sprint(st + 30)}})
	if got := matchedSpans(s); !slices.Equal(got, []string{checkoutID + ": GET /api (1)"}) {
		t.Fatalf("window from base+1s (the root runs to base+2s): %q", got)
	}
	tr := s.Traces[0]
	if tr.RootServiceName != "frontend" || tr.RootTraceName != "GET /api" || tr.StartTimeUnixNano != fmt.Sprint(base.UnixNano()) || tr.DurationMs != 2000 {
		t.Fatalf("trace %+v", tr)
	}
	// A span of the trace matched inside the window answers the whole
	// trace's root and duration too.
	s = f.search("a", url.Values{"q": {`{ name = "db query" }`}, "start": {fmt.Sprint(st + 1)}, "end": {fmt.Sprint(st + 30)}})
	if got := matchedSpans(s); !slices.Equal(got, []string{checkoutID + ": db query (1)"}) {
		t.Fatalf("db query: %q", got)
	}
	// A trace running during the window though none of its spans does
	// (a gap between them) is found too: the trace's time range is from
	// its first start to its last end.
	gap := "22222222222222222222222222222222"
	loadSpans(t, f.db, t.TempDir(), map[string][]ptrace.Traces{"a": {traces([]span{
		{gap, "40f067aa0ba902b7", "", "batch", "job", ptrace.SpanKindServer, ptrace.StatusCodeOk, 10 * time.Minute, time.Second, nil},
		{gap, "40f067aa0ba902b8", "40f067aa0ba902b7", "batch", "later step", ptrace.SpanKindInternal, ptrace.StatusCodeOk, 15 * time.Minute, time.Second, nil},
	})}})
	s = f.search("a", url.Values{"q": {`{ name = "job" }`}, "start": {fmt.Sprint(st + 12*60)}, "end": {fmt.Sprint(st + 13*60)}})
	if got := matchedSpans(s); !slices.Equal(got, []string{strings.TrimLeft(gap, "0") + ": job (1)"}) {
		t.Fatalf("a trace with a gap over the window: %q", got)
	}
}
