package tempo

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
