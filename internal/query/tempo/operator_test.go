package tempo

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// An operator reading every tenant (a token reading *, no X-Scope-OrgID)
// got one span of two tenants' spans of the same trace and span ids: a
// span was answered once by its ids, as a client's retry copies it,
// whatever its tenant, so tenant b's span (the later start) hid tenant
// a's from the trace, and the two counted once in a search. Each
// tenant's span is its own, as the operator's Loki and Prometheus reads
// keep two tenants' identical entries and series two.
func TestOperatorKeepsEachTenantsSpanOfTheSameIDs(t *testing.T) {
	none := map[string]any{}
	a := traces([]span{{traceCheckout, spanRoot, "", "frontend", "a-span", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second, none}})
	b := traces([]span{{traceCheckout, spanRoot, "", "intruder", "b-span", ptrace.SpanKindServer, ptrace.StatusCodeOk, time.Millisecond, time.Second, none}})
	f := newFixtureFor(t, map[string][]ptrace.Traces{"a": {a}, "b": {b}}, maxTraceSpans, func(dir string) tenancy.Resolver {
		file := filepath.Join(dir, "tokens")
		if err := os.WriteFile(file, []byte("admin read=*\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		tokens, err := tenancy.LoadTokens(file, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		return tenancy.Resolver{Tokens: tokens}
	})
	get := func(path string) []byte {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer admin")
		req.Header.Set("Accept", "application/protobuf")
		rec := httptest.NewRecorder()
		f.mux.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	td := decodeTraceV1(t, get("/api/traces/"+traceCheckout))
	var names []string
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				names = append(names, sp.Name())
			}
		}
	}
	slices.Sort(names)
	if want := []string{"a-span", "b-span"}; !slices.Equal(names, want) {
		t.Errorf("the operator's trace holds %v, want %v", names, want)
	}
	var found grafanaSearch
	if err := json.Unmarshal(get("/api/search?"+url.Values{"q": {"{}"}, "spss": {"10"}}.Encode()), &found); err != nil {
		t.Fatal(err)
	}
	if len(found.Traces) != 1 || len(found.Traces[0].SpanSets) != 1 || found.Traces[0].SpanSets[0].Matched != 2 {
		t.Errorf("the operator's search found %+v, want the trace with 2 spans matched", found.Traces)
	}
}

// TestTenantReadsItsOwnSpansOfASharedTraceID: two tenants may send spans
// of the same trace and span ids (ids are the clients', not ours). A
// tenant's trace by id, search, TraceQL matchers and tag values answer
// its own span alone, never the other tenant's of the same ids: the
// other's name, service and attribute values stay unseen, whether asked
// for by the id or matched by a TraceQL condition that names them.
func TestTenantReadsItsOwnSpansOfASharedTraceID(t *testing.T) {
	a := traces([]span{{traceCheckout, spanRoot, "", "frontend", "a-span", ptrace.SpanKindServer, ptrace.StatusCodeOk, 0, time.Second, map[string]any{"team": "a-team"}}})
	b := traces([]span{{traceCheckout, spanRoot, "", "intruder", "b-span", ptrace.SpanKindServer, ptrace.StatusCodeOk, time.Millisecond, time.Second, map[string]any{"team": "b-secret"}}})
	f := newFixtureOf(t, map[string][]ptrace.Traces{"a": {a}, "b": {b}}, maxTraceSpans)
	for _, path := range []string{"/api/traces/" + traceCheckout, "/api/v2/traces/" + traceCheckout} {
		rec := f.get("a", path, "application/protobuf")
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		td := decodeTraceV1
		if strings.HasPrefix(path, "/api/v2/") {
			td = func(t *testing.T, body []byte) ptrace.Traces { return decodeTraceV2(t, body).trace }
		}
		var names []string
		for _, rs := range td(t, rec.Body.Bytes()).ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					names = append(names, sp.Name())
				}
			}
		}
		if want := []string{"a-span"}; !slices.Equal(names, want) {
			t.Errorf("%s for tenant a holds %v, want %v", path, names, want)
		}
	}
	search := func(q string) grafanaSearch {
		t.Helper()
		var found grafanaSearch
		path := "/api/search?" + url.Values{"q": {q}, "spss": {"10"}}.Encode()
		if code := f.json("a", path, &found); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		return found
	}
	if found := search("{}"); len(found.Traces) != 1 || found.Traces[0].RootServiceName != "frontend" ||
		len(found.Traces[0].SpanSets) != 1 || found.Traces[0].SpanSets[0].Matched != 1 {
		t.Errorf("tenant a's search found %+v, want its trace with its one span", found.Traces)
	}
	for _, q := range []string{`{ span.team = "b-secret" }`, `{ span.team =~ ".*secret.*" }`, `{ resource.service.name = "intruder" }`, `{ name = "b-span" }`} {
		if found := search(q); len(found.Traces) != 0 {
			t.Errorf("tenant a's search %s found %+v: tenant b's span", q, found.Traces)
		}
	}
	for tag, want := range map[string]string{"span.team": "a-team", "resource.service.name": "frontend", "name": "a-span"} {
		var out struct {
			TagValues []struct{ Value string } `json:"tagValues"`
		}
		path := "/api/v2/search/tag/" + url.PathEscape(tag) + "/values"
		if code := f.json("a", path, &out); code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		if len(out.TagValues) != 1 || out.TagValues[0].Value != want {
			t.Errorf("tenant a's values of %s: %+v, want [%s]", tag, out.TagValues, want)
		}
	}
}
