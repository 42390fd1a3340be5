package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A tenant given empty (--tenant "" or --tenant=, a script's unset
// variable; /report?tenant=) was read as no tenant given, and answered
// with every tenant's rows where one tenant's were asked for. It is a
// malformed tenant, refused, as an empty X-Scope-OrgID is.
func TestEmptyTenantIsRefusedNotEveryTenant(t *testing.T) {
	cfg, _ := servedSink(t, t.TempDir())
	for _, args := range [][]string{
		{"sql", "--tenant", "", "SELECT count(*) AS n FROM spans"},
		{"sql", "--tenant=", "SELECT count(*) AS n FROM spans"},
	} {
		out, code := ask(t, cfg, args...)
		if code != exitUsage || !strings.Contains(out, "--tenant: empty tenant id") {
			t.Errorf("%q: exit %d, output:\n%s\nwant a usage error for the empty tenant", args, code, out)
		}
	}

	h := twoTenantReport(t)
	for _, target := range []string{"/report?tenant=", "/report?tenant=&since=all"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "tenant: empty tenant id") {
			t.Errorf("%s: %d\n%.400s\nwant 400 for the empty tenant", target, rec.Code, rec.Body.String())
		}
	}
}

// twoTenantReport is the status page's report handler over a database
// whose GenAI table holds one operation of tenant a and one of b.
func twoTenantReport(t *testing.T) http.Handler {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cols := duckdbsink.TypedColumns(&genai.Table)
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = fmt.Sprintf("%q %s", c.Name, c.Type)
	}
	rcfg := config.Default()
	if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE %s (%s)`, rcfg.GenAI.Table, strings.Join(defs, ", "))); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`INSERT INTO %s (tenant_id, trace_id, span_id, start_time) VALUES ('a', 't1', 's1', now()), ('b', 't2', 's2', now())`, rcfg.GenAI.Table)); err != nil {
		t.Fatal(err)
	}
	return reportHandler(db, rcfg)
}

// A query parameter given twice (/report?tenant=a&tenant=b) was read as
// its first value: the page answered for a where b may have been meant.
// Either is a question with two answers, refused.
func TestReportRefusesAParameterGivenTwice(t *testing.T) {
	h := twoTenantReport(t)
	for _, target := range []string{"/report?tenant=a&tenant=b", "/report?tenant=a&tenant=a", "/report?since=1d&since=7d"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, nil))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "given twice") {
			t.Errorf("%s: %d\n%.400s\nwant 400 naming the parameter given twice", target, rec.Code, rec.Body.String())
		}
	}
}

// A query string that does not parse (/report?tenant=a&tenant=%zz) was
// read without its bad part (Go's URL.Query drops it): the page answered
// for a where the caller gave a second, unreadable tenant.
func TestReportRefusesAQueryStringThatDoesNotParse(t *testing.T) {
	h := twoTenantReport(t)
	for _, target := range []string{"/report?tenant=a&tenant=%zz", "/report?tenant=%zz", "/report?since=7d&x=%"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(context.Background(), http.MethodGet, target, nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d\n%.400s\nwant 400", target, rec.Code, rec.Body.String())
		}
	}
}

// A query beginning with a SQL comment ("-- why\nSELECT …", as a script
// keeps its queries) was taken for a flag ("bad flag syntax"): no flag
// holds whitespace after its dashes, so such an argument is the query.
func TestSQLQueryBeginningWithACommentIsTheQuery(t *testing.T) {
	cfg, _ := servedSink(t, t.TempDir())
	for _, args := range [][]string{
		{"sql", "-- spans of a\nSELECT count(*) AS n FROM spans WHERE tenant_id = 'a'"},
		{"sql", "--tenant", "a", "-- spans of a\nSELECT count(*) AS n FROM spans"},
		// A comment without a space after its dashes, and a rule of
		// dashes, are comments too: no flag's name holds a line break.
		{"sql", "--spans of a\nSELECT count(*) AS n FROM spans WHERE tenant_id = 'a'"},
		{"sql", "--tenant", "a", "----------\nSELECT count(*) AS n FROM spans"},
	} {
		out, code := ask(t, cfg, args...)
		if code != 0 || !strings.Contains(out, "\n2\n") {
			t.Errorf("%q: exit %d, output:\n%s\nwant the count 2", args, code, out)
		}
	}
}
