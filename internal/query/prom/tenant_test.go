package prom

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestTenancyOnEveryEndpoint: every endpoint but buildinfo decides the
// tenant first (no token 401, a tenant the token lacks 403, a malformed
// tenant 400, each in Prometheus's error envelope), and a tenant's
// answers, metadata included, never hold another tenant's names or
// values.
func TestTenancyOnEveryEndpoint(t *testing.T) {
	f := newFixture(t)
	at := rfc3339(end)
	endpoints := []struct {
		method, path string
		form         url.Values
	}{
		{"GET", "/api/v1/query", url.Values{"query": {`{__name__=~".+"}`}, "time": {at}}},
		{"POST", "/api/v1/query", url.Values{"query": {`{__name__=~".+"}`}, "time": {at}}},
		{"GET", "/api/v1/query_range", url.Values{"query": {`{__name__=~".+"}`}, "start": {rfc3339(t0)}, "end": {at}, "step": {"60"}}},
		{"POST", "/api/v1/query_range", url.Values{"query": {`{__name__=~".+"}`}, "start": {rfc3339(t0)}, "end": {at}, "step": {"60"}}},
		{"GET", "/api/v1/query_exemplars", url.Values{"query": {"http_server_requests_total"}}},
		{"GET", "/api/v1/labels", nil},
		{"POST", "/api/v1/labels", url.Values{"match[]": {`{__name__=~".+"}`}}},
		{"GET", "/api/v1/label/__name__/values", nil},
		{"GET", "/api/v1/label/http_route/values", nil},
		{"GET", "/api/v1/label/service_name/values", url.Values{"match[]": {"http_server_requests_total"}}},
		{"GET", "/api/v1/series", url.Values{"match[]": {`{__name__=~".+"}`}}},
		{"POST", "/api/v1/series", url.Values{"match[]": {`{__name__=~".+"}`}}},
		{"GET", "/api/v1/metadata", nil},
	}
	// What only the other tenant's rows hold.
	foreign := map[string][]string{
		"team-a": {"secret-b", "admin-b"},
		"team-b": {"checkout", "/cart", "process_memory", "http_server_duration", "rpc_latency", "quantile"},
	}
	// What each tenant's own answers hold something of.
	own := map[string][]string{
		"team-a": {"checkout", "/cart", "http_server", "http_route"},
		"team-b": {"secret-b", "admin-b", "http_server_requests", "http_route"},
	}
	for _, e := range endpoints {
		t.Run(e.method+strings.ReplaceAll(e.path, "/", "_"), func(t *testing.T) {
			for _, c := range []struct {
				name, token, org string
				status           int
				errorType        string
			}{
				{"no token", "", "", 401, "unauthorized"},
				{"unknown token", "nope", "", 401, "unauthorized"},
				{"tenant the token lacks", "tb", "team-a", 403, "forbidden"},
				{"malformed tenant", "ops", "team a", 400, "bad_data"},
				{"several tenants", "ops", "team-a|team-b", 400, "bad_data"},
			} {
				status, body := f.do(t, e.method, e.path, e.form, c.token, c.org)
				var r response
				if err := json.Unmarshal([]byte(body), &r); err != nil || status != c.status || r.Status != "error" || r.ErrorType != c.errorType {
					t.Errorf("%s: %d %s (%v), want %d %s", c.name, status, body, err, c.status, c.errorType)
				}
			}
			for tenant, token := range map[string]string{"team-a": "ta", "team-b": "tb"} {
				for _, org := range []string{"", tenant} { // the token's one tenant, or named
					status, body := f.do(t, e.method, e.path, e.form, token, org)
					if status != 200 {
						t.Fatalf("%s: %d %s", tenant, status, body)
					}
					if e.path != "/api/v1/query_exemplars" && !slices.ContainsFunc(own[tenant], func(s string) bool { return strings.Contains(body, s) }) {
						t.Errorf("%s reads nothing of its own: %s", tenant, body)
					}
					for _, s := range foreign[tenant] {
						if strings.Contains(body, s) {
							t.Errorf("%s learns %q: %s", tenant, s, body)
						}
					}
				}
				// The operator naming the tenant reads what the tenant does.
				if e.path != "/api/v1/query_exemplars" {
					_, own := f.do(t, e.method, e.path, e.form, token, "")
					_, ops := f.do(t, e.method, e.path, e.form, "ops", tenant)
					if own != ops {
						t.Errorf("the operator naming %s reads\n%s\nthe tenant\n%s", tenant, ops, own)
					}
				}
			}
		})
	}
	// Build information says nothing of any tenant: no token needed.
	if status, body := f.do(t, "GET", "/api/v1/status/buildinfo", nil, "", ""); status != 200 || !strings.Contains(body, `"version":"test"`) {
		t.Errorf("buildinfo: %d %s", status, body)
	}
}

// TestTenantsOwnSeriesCarryNoTenantLabel: __tenant_id__ is the label an
// operator reading every tenant tells tenants apart by; a tenant's own
// series have none, so a tenant's matcher on it, naming the other tenant
// or any tenant, selects nothing, and its values list none: it is never
// a way to another tenant's series.
func TestTenantsOwnSeriesCarryNoTenantLabel(t *testing.T) {
	f := newFixture(t)
	at := rfc3339(end)
	for _, e := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/api/v1/label/__tenant_id__/values", nil, `{"status":"success","data":[]}`},
		{"/api/v1/query", url.Values{"query": {`{__tenant_id__="team-b"}`}, "time": {at}}, `"result":[]`},
		{"/api/v1/query", url.Values{"query": {`{__tenant_id__=~".+"}`}, "time": {at}}, `"result":[]`},
		{"/api/v1/query", url.Values{"query": {`count by (__tenant_id__) ({__name__=~".+"})`}, "time": {at}}, `"result":[{"metric":{},`},
		{"/api/v1/series", url.Values{"match[]": {`{__tenant_id__=~"team-.*"}`}}, `{"status":"success","data":[]}`},
		{"/api/v1/labels", url.Values{"match[]": {`{__tenant_id__="team-b"}`}}, `{"status":"success","data":[]}`},
	} {
		status, body := f.do(t, "GET", e.path, e.form, "ta", "")
		if status != 200 || !strings.Contains(body, e.want) {
			t.Errorf("team-a %s %v: %d %s, want %s", e.path, e.form, status, body, e.want)
		}
		for _, s := range []string{"team-b", "secret-b", "admin-b"} {
			if strings.Contains(body, s) {
				t.Errorf("team-a %s %v learns %q: %s", e.path, e.form, s, body)
			}
		}
	}
}
