package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestScopedDecidesTheTenantBeforeTheHandler: every refusal of the
// Resolver is answered by its kind and never reaches the handler; a token
// comes as Bearer or as Basic authentication's password.
func TestScopedDecidesTheTenantBeforeTheHandler(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("one read=team-a\nops read=*\nnone write=team-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := tenancy.LoadTokens(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	rt := Routes{Mux: mux, Tenants: tenancy.Resolver{Tokens: tokens}}
	rt.Scoped("GET /q", func(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
		_, _ = w.Write([]byte(s.String()))
	})
	rt.Public("GET /ready", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ready")) })

	for _, c := range []struct {
		name, org, auth string
		basic           [2]string
		status          int
		body            string
	}{
		{name: "no token", status: 401},
		{name: "unknown token", auth: "Bearer nope", status: 401},
		{name: "bearer token of one tenant", auth: "Bearer one", status: 200, body: "tenant team-a"},
		{name: "basic password as token", basic: [2]string{"team-a", "one"}, status: 200, body: "tenant team-a"},
		{name: "tenant the token lacks", auth: "Bearer one", org: "team-b", status: 403},
		{name: "token that only writes", auth: "Bearer none", status: 403},
		{name: "malformed tenant", auth: "Bearer ops", org: "a b", status: 400},
		{name: "several tenants", auth: "Bearer ops", org: "a|b", status: 400},
		{name: "operator token naming none", auth: "Bearer ops", status: 200, body: "all tenants"},
		{name: "operator token naming one", auth: "Bearer ops", org: "team-b", status: 200, body: "tenant team-b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/q", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			if c.basic[1] != "" {
				req.SetBasicAuth(c.basic[0], c.basic[1])
			}
			if c.org != "" {
				req.Header.Set("X-Scope-OrgID", c.org)
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, c.status, rec.Body)
			}
			if c.body != "" && rec.Body.String() != c.body {
				t.Fatalf("body %q, want %q", rec.Body, c.body)
			}
		})
	}
	// X-Scope-OrgID twice, or sent empty, is refused 400, even with a
	// token that reads every tenant: never read as the first value, nor as
	// naming none (which would read every tenant).
	for _, values := range [][]string{{"team-a", "team-b"}, {"team-a", "team-a"}, {""}, {"", "team-a"}} {
		req := httptest.NewRequest("GET", "/q", nil)
		req.Header.Set("Authorization", "Bearer ops")
		req.Header["X-Scope-Orgid"] = values
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("X-Scope-OrgID %q: %d %q, want 400", values, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/ready", nil))
	if rec.Code != 200 {
		t.Fatalf("public route answered %d without a token", rec.Code)
	}
}

// TestErrorHidesTheServersFilePaths: a server-side failure is answered
// with its message, the file paths it names taken out (the Iceberg
// warehouse's data files, the DuckDB database), as Flight SQL answers
// it; a refused query keeps its message whole.
func TestErrorHidesTheServersFilePaths(t *testing.T) {
	rt := Routes{}
	for _, c := range []struct {
		err    error
		status int
		body   string
	}{
		{errors.New("the query's scan failed: read otel_spans: open /srv/lake/warehouse/tracelake.db/otel_spans/data/x.parquet: no such file or directory"),
			500, "the query's scan failed: read otel_spans: open <path>: no such file or directory\n"},
		{errors.New("read file:///srv/lake/x.duckdb: gone"), 500, "read <path>: gone\n"},
		{&query.RefusedError{Reason: "no table a/b/c among those this caller may read"}, 400,
			"query refused: no table a/b/c among those this caller may read\n"},
	} {
		rec := httptest.NewRecorder()
		rt.Error(rec, c.err)
		if rec.Code != c.status || rec.Body.String() != c.body {
			t.Errorf("%v: answered %d %q, want %d %q", c.err, rec.Code, rec.Body, c.status, c.body)
		}
	}
}
