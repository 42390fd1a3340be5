package query

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// refusedFor fails t unless each query is refused (a *RefusedError) for
// tenant a by Query, Schema and Parameters alike.
func refusedFor(t *testing.T, l *lake, queries []string, params ...any) {
	t.Helper()
	ctx := context.Background()
	for _, q := range queries {
		var re *RefusedError
		if got, err := l.rows(t, tenantA, q, params...); !errors.As(err, &re) {
			t.Errorf("Query %s\n  not refused: %v, %v", q, got, err)
		}
		if s, err := l.reader.Schema(ctx, tenantA, q); !errors.As(err, &re) {
			t.Errorf("Schema %s\n  not refused: %v, %v", q, s, err)
		}
		if s, err := l.reader.Parameters(ctx, tenantA, q); !errors.As(err, &re) {
			t.Errorf("Parameters %s\n  not refused: %v, %v", q, s, err)
		}
	}
}

// TestEscapeThroughParameterName: DuckDB prints a named parameter back
// with its name unquoted, so a name holding SQL became SQL of its own in
// the text that ran: another table, files, several statements (a DELETE).
func TestEscapeThroughParameterName(t *testing.T) {
	l := newLake(t)
	refusedFor(t, l, []string{
		`SELECT $"1, (SELECT max(record_content::VARCHAR) FROM events) AS leak"`,
		`SELECT $"1, (SELECT string_agg(name) FROM lake.main.otel_spans) AS leak"`,
		`SELECT $"1 AS x FROM read_text('` + l.dir + `/secret.csv')"`,
	}, 7)
	refusedFor(t, l, []string{`SELECT $"$ a $$ AS s; DELETE FROM lake.main.otel_spans; SELECT 1 AS z"`})
	var n int
	if err := l.db.QueryRow(`SELECT count(*) FROM otel_spans`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("%d spans left, want 3: a tenant's read deleted rows", n)
	}
	// A named parameter is still a parameter.
	got, err := l.rows(t, tenantA, `SELECT name FROM otel_spans WHERE duration_ms = $d`, 10)
	if err != nil || len(got) != 1 || got[0] != "chat" {
		t.Fatalf("a named parameter: %v, %v; want [chat]", got, err)
	}
}

// TestEscapeThroughRecursiveCTEAnchor: in a recursive CTE, the CTE's own
// name is the CTE only in the recursive part; in the anchor (the left of
// the UNION) DuckDB binds it to the table of that name, which the checker
// took for the CTE.
func TestEscapeThroughRecursiveCTEAnchor(t *testing.T) {
	l := newLake(t)
	refusedFor(t, l, []string{
		`WITH RECURSIVE events AS (SELECT record_content::VARCHAR AS x FROM events UNION ALL SELECT x FROM events WHERE false) SELECT * FROM events`,
		`WITH RECURSIVE events(x) USING KEY (x) AS (SELECT (SELECT max(record_content::VARCHAR) FROM events) UNION SELECT x FROM events WHERE false) SELECT * FROM events`,
		`WITH RECURSIVE events AS MATERIALIZED (SELECT (SELECT max(record_content::VARCHAR) FROM events) AS x UNION ALL SELECT x FROM events WHERE false) SELECT * FROM events`,
		`SELECT * FROM (WITH RECURSIVE events_ledger AS (FROM events_ledger UNION ALL FROM events_ledger WHERE false) FROM events_ledger)`,
	})
	// The recursive part still reads the CTE, and the anchor a table of
	// the tenant's named like it reads the tenant's rows.
	got, err := l.rows(t, tenantA, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT sum(i) FROM n`)
	if err != nil || len(got) != 1 || got[0] != "6" {
		t.Fatalf("a recursive CTE: %v, %v; want [6]", got, err)
	}
	got, err = l.rows(t, tenantA, `WITH RECURSIVE otel_spans AS (SELECT name FROM otel_spans UNION SELECT name FROM otel_spans WHERE false) SELECT name FROM otel_spans ORDER BY name`)
	if err != nil || len(got) != 2 || got[0] != "chat" || got[1] != "tool" {
		t.Fatalf("an anchor over the tenant's table: %v, %v; want [chat tool]", got, err)
	}
}

// TestEscapeThroughSerializePlan: json_serialize_plan binds the SQL it is
// given against the catalog, without the checker: the columns of any
// table, the names of those a misspelt one suggests, a file's schema.
func TestEscapeThroughSerializePlan(t *testing.T) {
	l := newLake(t)
	refusedFor(t, l, []string{
		`SELECT json_serialize_plan('SELECT * FROM lake.main.events')`,
		`SELECT json_serialize_plan('SELECT * FROM evnts')`,
		`SELECT json_serialize_plan('SELECT * FROM read_json(''` + l.dir + `/stage/batch.json'')')`,
		`SELECT name FROM otel_spans WHERE json_serialize_plan('SELECT 1') IS NOT NULL`,
	})
}

// TestEscapeThroughActivityCounters: the ids DuckDB numbers queries,
// transactions and connections with are the process's, so a tenant
// polling them counts the loads and the other tenants' reads.
func TestEscapeThroughActivityCounters(t *testing.T) {
	l := newLake(t)
	refusedFor(t, l, []string{
		`SELECT current_query_id()`,
		`SELECT current_transaction_id()`,
		`SELECT txid_current()`,
		`SELECT current_connection_id()`,
	})
}

// TestEscapeThroughMacroOverload: functions were allowed by name when one
// of their overloads was, but a call binds to whichever overload its
// arguments fit. pg_get_constraintdef(oid, pretty) calls
// pg_get_constraintdef(oid), which reads duckdb_constraints(): the text of
// any table's constraints. A macro's body is checked as a query is.
func TestEscapeThroughMacroOverload(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE TABLE ops_secrets (k VARCHAR CHECK (k <> 'hunter2'))`); err != nil {
		t.Fatal(err)
	}
	var oid int64
	if err := l.db.QueryRow(`SELECT table_oid FROM duckdb_tables() WHERE table_name = 'ops_secrets'`).Scan(&oid); err != nil {
		t.Fatal(err)
	}
	refusedFor(t, l, []string{
		fmt.Sprintf(`SELECT pg_get_constraintdef(%d)`, oid*1000000),
		fmt.Sprintf(`SELECT pg_get_constraintdef(%d, true)`, oid*1000000),
		`SELECT pg_catalog.pg_get_constraintdef(0)`,
		`SELECT main.sleep_ms(1)`,
		`SELECT system.main.getvariable('x')`,
		`SELECT lake.main.upper('x')`,
	})
	// Macros whose bodies read nothing outside the query still work, and
	// so do the list and struct literals DuckDB parses as calls of
	// main.list_value and main.struct_pack.
	for q, want := range map[string]string{
		`SELECT list_sum([1, 2]), roundbankers(2.5, 0), {'a': 1}.a, array_to_string(['x', 'y'], '-')`: "3|2|1|x-y",
		`SELECT pg_typeof(1), current_catalog() IS NOT NULL`:                                          "integer|true",
	} {
		got, err := l.rows(t, tenantA, q)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("%s: %v, %v; want [%s]", q, got, err, want)
		}
	}
}

// TestEscapeThroughTypeNames: a cast to a type DuckDB does not have
// loaded made it install and load the extension that has it (INET: a
// download from extensions.duckdb.org, a native library loaded into the
// process the loads run in), and a type it did not know made it suggest
// the names of the types it has, the database's own among them. A type
// named by a query must be one of DuckDB's own.
func TestEscapeThroughTypeNames(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE TYPE ops_mood AS ENUM ('calm', 'paged')`); err != nil {
		t.Fatal(err)
	}
	refusedFor(t, l, []string{
		`SELECT '127.0.0.1'::INET`,
		`SELECT CAST(NULL AS MAP(VARCHAR, INET))`,
		`SELECT 'calm'::ops_mood`,
		`SELECT 'calm'::lake.main.ops_mood`,
		`SELECT CAST(1 AS ops_mod)`,
	})
	if _, err := l.rows(t, tenantA, `SELECT CAST(1 AS ops_mod)`); err == nil || strings.Contains(err.Error(), "ops_mood") {
		t.Errorf("a misspelt type: %v, want a refusal naming no other type", err)
	}
	for q, want := range map[string]string{
		`SELECT '{"a": 7}'::JSON->>'a', 'b'::ENUM('a', 'b'), [1]::INT[]`: "7|b|[1]",
		`SELECT json_group_array(name) FROM otel_spans`:                  `["chat","tool"]`,
	} {
		got, err := l.rows(t, tenantA, q)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("%s: %v, %v; want [%s]", q, got, err, want)
		}
	}
}

// TestEscapeThroughVectorType: how DuckDB holds a column's values in
// memory depends on how the table's storage compressed them, which it
// chose over every tenant's rows: vector_type of a tenant's own column
// told whether the other tenants' rows beside them hold the same value.
func TestEscapeThroughVectorType(t *testing.T) {
	l := newLake(t)
	refusedFor(t, l, []string{
		`SELECT vector_type(name) FROM otel_spans`,
		`SELECT count(*) FILTER (WHERE vector_type(name) = 'FLAT_VECTOR') FROM otel_spans`,
	})
}

// TestTenantFilterRunsBeforeTheQuerysFailures: an error DuckDB raises
// for a value quotes it ("Could not convert string '…' to INT32"), so a
// query whose own predicate, join condition or expression fails on
// another tenant's values would read them in its error, had DuckDB
// evaluated it before the view's tenant filter (it orders a filter's
// conjuncts by cost, and pushes some into the scan). A tenant's query
// that holds for its own rows answers them, never failing on another
// tenant's: with tenant_id VARCHAR (the filter pushed into the scan)
// and BIGINT (a cast to text, a filter above it).
func TestTenantFilterRunsBeforeTheQuerysFailures(t *testing.T) {
	queries := map[string]string{
		`SELECT count(*) FROM otel_spans WHERE CAST(name AS INT) > 0`:                                                          "10000",
		`SELECT count(*) FROM otel_spans WHERE duration_ms >= 0 AND name::INT > 0`:                                             "10000",
		`SELECT count(*) FROM otel_spans WHERE CASE WHEN name LIKE '%SECRET%' THEN error('found ' || name) ELSE true END`:      "10000",
		`SELECT count(*) FROM otel_spans WHERE regexp_matches('x', name) OR true`:                                              "10000",
		`SELECT count(*) FROM otel_spans s JOIN (SELECT 1 AS one) o ON CAST(s.name AS INT) >= o.one`:                           "10000",
		`SELECT count(*) FROM otel_spans WHERE name IN (SELECT CAST(CAST(name AS INT) AS VARCHAR) FROM otel_spans)`:            "10000",
		`SELECT max(CAST(name AS INT)), min(max(CAST(name AS INT))) OVER () FROM otel_spans`:                                   "9|9",
		`SELECT CAST(name AS INT) AS n FROM otel_spans GROUP BY n ORDER BY CAST(name AS INT) DESC LIMIT 1`:                     "9",
		`SELECT count(*) FROM otel_spans WHERE CAST(name AS INT) > 0 USING SAMPLE 100 PERCENT (bernoulli)`:                     "10000",
		`SELECT count(*) FROM (SELECT name FROM otel_spans UNION ALL SELECT name FROM otel_spans) WHERE CAST(name AS INT) > 0`: "20000",
	}
	for _, typ := range []string{"VARCHAR", "BIGINT"} {
		t.Run(typ, func(t *testing.T) {
			// Tenant 1's names are digits; tenant 2's, interleaved with
			// them, fail every predicate above and carry SECRET.
			db := dbWith(t,
				`CREATE TABLE otel_spans (name VARCHAR, duration_ms BIGINT, tenant_id `+typ+`)`,
				`INSERT INTO otel_spans SELECT CASE WHEN i % 2 = 0 THEN '(SECRET-' || i ELSE CAST(i % 9 + 1 AS VARCHAR) END,
					i, CASE WHEN i % 2 = 0 THEN '2' ELSE '1' END FROM range(20000) r(i)`,
			)
			r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for q, want := range queries {
				got, err := readRows(r, tenancy.One("1"), q)
				if err != nil || len(got) != 1 || got[0] != want {
					t.Errorf("%s\n  read %v, %v; want [%s]", q, got, err, want)
				}
			}
		})
	}
}
