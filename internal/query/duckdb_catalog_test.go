package query

import (
	"context"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestCatalogChangesAreSeen: the reader keeps its listing of the tables
// between queries (catalogCache) and lists them again when the catalog
// changed, whether a table was made, dropped, renamed or altered (an
// ALTER keeps the table's oid). A listing kept past an ALTER would let a
// tenant read whole a shared table that has since become tenant-scoped.
func TestCatalogChangesAreSeen(t *testing.T) {
	l := newLake(t)
	steps := []struct {
		ddl   []string
		scope tenancy.Scope
		q     string
		want  []string // nil: refused
	}{
		// The first query lists the tables and caches them.
		{nil, tenantA, `SELECT count(*) FROM genai_prices`, []string{"1"}},
		{[]string{
			`CREATE TABLE otel_logs (tenant_id VARCHAR, body VARCHAR)`,
			`INSERT INTO otel_logs VALUES ('a', 'mine'), ('b', 'secret-b')`,
		}, tenantA, `SELECT body FROM otel_logs`, []string{"mine"}},
		// A shared table that gains tenant_id is read through its view.
		{[]string{
			`ALTER TABLE genai_prices ADD COLUMN tenant_id VARCHAR`,
			`UPDATE genai_prices SET tenant_id = 'b'`,
		}, tenantA, `SELECT count(*) FROM genai_prices`, []string{"0"}},
		// The operator's raw table that gains tenant_id is the tenant's to
		// read, its rows only.
		{[]string{
			`ALTER TABLE events ADD COLUMN tenant_id VARCHAR`,
			`INSERT INTO events VALUES ('{}', '{"mine":true}', 'a')`,
		}, tenantA, `SELECT record_content::VARCHAR FROM events`, []string{`{"mine":true}`}},
		{[]string{`ALTER TABLE otel_logs RENAME TO logs`}, tenantA, `SELECT body FROM logs`, []string{"mine"}},
		{nil, tenantA, `SELECT body FROM otel_logs`, nil},
		// Dropped and made again, without tenant_id: the operator's alone.
		{[]string{
			`DROP TABLE genai_operations`,
			`CREATE TABLE genai_operations (trace_id VARCHAR, input_tokens BIGINT)`,
			`INSERT INTO genai_operations VALUES ('t2', 7777)`,
		}, tenantA, `SELECT count(*) FROM genai_operations`, nil},
		{nil, tenancy.Operator, `SELECT count(*) FROM genai_operations`, []string{"1"}},
	}
	for i, s := range steps {
		for _, q := range s.ddl {
			if _, err := l.db.Exec(q); err != nil {
				t.Fatalf("step %d: %s: %v", i, q, err)
			}
		}
		got, err := l.rows(t, s.scope, s.q)
		switch {
		case s.want == nil && err == nil:
			t.Fatalf("step %d: %s read %v, want it refused", i, s.q, got)
		case s.want != nil && err != nil:
			t.Fatalf("step %d: %s: %v", i, s.q, err)
		case !slices.Equal(got, s.want):
			t.Fatalf("step %d: %s read %v, want %v", i, s.q, got, s.want)
		}
	}
}

// TestEveryNamedTableIsScoped: a query's connection has views only of the
// tables the query names; wherever a tenant-scoped table is named (a
// subquery, a CTE's body, a recursive CTE's parts, a CTE of a table's
// name), it is read through its view.
func TestEveryNamedTableIsScoped(t *testing.T) {
	l := newLake(t)
	for _, c := range []struct {
		q    string
		want string
	}{
		{`SELECT (SELECT sum(input_tokens) FROM genai_operations)`, "100"},
		{`SELECT 1 WHERE EXISTS (SELECT 1 FROM genai_operations WHERE input_tokens = 7777)`, ""},
		{`WITH o AS (SELECT * FROM genai_operations) SELECT sum(input_tokens) FROM o`, "100"},
		{`WITH genai_prices AS (SELECT * FROM genai_operations) SELECT sum(input_tokens) FROM genai_prices`, "100"},
		{`WITH genai_operations AS (SELECT * FROM genai_operations) SELECT sum(input_tokens) FROM genai_operations`, "100"},
		{`WITH RECURSIVE otel_spans AS (SELECT input_tokens AS n FROM genai_operations
			UNION ALL SELECT n + 1 FROM otel_spans WHERE n < 101) SELECT sum(n) FROM otel_spans`, "201"},
		{`WITH RECURSIVE r AS (SELECT 0 AS n UNION ALL SELECT n + 1 FROM r WHERE n < (SELECT count(*) FROM otel_spans))
			SELECT max(n) FROM r`, "2"},
		{`SELECT (SELECT max(duration_ms) FROM otel_spans) + (SELECT max(input_tokens) FROM genai_operations)`, "110"},
	} {
		got, err := l.rows(t, tenantA, c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		want := []string{c.want}
		if c.want == "" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s read %v, want %v", c.q, got, want)
		}
	}
	// The operator's tables are still refused by name, viewed or not.
	if got, err := l.rows(t, tenantA, `SELECT count(*) FROM events_ledger`); err == nil {
		t.Fatalf("tenant a read the ledger: %v", got)
	}
	tables, err := l.reader.Tables(context.Background(), tenantA)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 3 {
		t.Fatalf("tenant a has %d tables, want 3", len(tables))
	}
}
