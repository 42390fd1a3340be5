package query

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Found by a review, with the three tests after it.
//
// TestEscapeThroughTypeStrings: the checker admits only DuckDB's own
// loaded types where the parser leaves a type for the binder to find
// (TestEscapeThroughTypeNames), but several allowed functions take a type
// as a string and find it in the catalog at bind time themselves:
// make_type('INET') and the structure of json_transform/from_json make
// DuckDB install and load the extension that has the type (a download
// from extensions.duckdb.org into $HOME/.duckdb, a native library loaded
// into the process the loads run in), and name the operator's own types
// (an ENUM's values, read with enum_range or typeof) or, misspelt, make
// DuckDB suggest them.
func TestEscapeThroughTypeStrings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE TYPE ops_mood AS ENUM ('calm', 'paged')`); err != nil {
		t.Fatal(err)
	}
	queries := []string{
		// Extension autoinstall/autoload, by a type named in a string.
		`SELECT make_type('INET') IS NULL`,
		`SELECT cast_to_type(NULL, make_type('INET'))`,
		`SELECT json_transform('{"a":"1.2.3.4"}', '{"a":"INET"}')`,
		`SELECT from_json('"1.2.3.4"', '"INET"')`,
		// The operator's ENUM: its values, and its name suggested.
		`SELECT enum_range(json_transform('null', '"ops_mood"'))`,
		`SELECT enum_range(from_json('null', '"lake.main.ops_mood"'))`,
		`SELECT typeof(from_json_strict('null', '{"x": "ops_mood[]"}'))`,
		`SELECT json_transform('null', '"ops_mod"')`,
		`SELECT make_type('ops_mod')`,
	}
	for _, q := range queries {
		got, err := l.rows(t, tenantA, q)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("Query %s\n  not refused: %v, %v", q, got, err)
			continue
		}
		for _, leak := range []string{"calm", "paged", "ops_mood", "Autoloading", "extensions.duckdb.org"} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("Query %s\n  refused naming %q: %v", q, leak, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".duckdb")); err == nil {
		t.Errorf("a tenant's query made DuckDB write %s (its extension directory, to install an extension)", filepath.Join(home, ".duckdb"))
	}
}

// TestIcebergEscapeThroughTypeStrings: the Iceberg reader's database
// (no file access) cannot install the extension a type named in a string
// asks for, but it tries, and the error it answers with, not refused as
// the caller's, names the process's home directory (its environment).
func TestIcebergEscapeThroughTypeStrings(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	l := newIceLake(t, IcebergOptions{})
	for _, q := range []string{
		`SELECT make_type('INET') IS NULL`,
		`SELECT json_transform('{"a":"1.2.3.4"}', '{"a":"INET"}')`,
		`SELECT from_json('"1.2.3.4"', '"INET"')`,
	} {
		got, err := l.rows(t, tenantA, q)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("Query %s\n  not refused: %v, %v", q, got, err)
		}
		if err != nil && (strings.Contains(err.Error(), home) || strings.Contains(err.Error(), "Autoloading")) {
			t.Errorf("Query %s\n  answered with the process's home directory or an extension install: %v", q, err)
		}
	}
}

// TestEscapeThroughFunctionStrings: list_aggregate (aggregate,
// array_aggregate, list_aggr) finds the aggregate it is given by name, as
// a string, in the catalog when it binds: a name it does not find makes
// DuckDB suggest the names the database has, the operator's own functions
// and macros among them.
func TestEscapeThroughFunctionStrings(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE MACRO ops_rotate_key(x) AS x || 'hunter2'`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT list_aggregate([1], 'ops_rotate_ke')`,
		`SELECT aggregate([1], 'ops_rotate_ke')`,
	} {
		got, err := l.rows(t, tenantA, q)
		if err == nil || strings.Contains(err.Error(), "ops_rotate_key") {
			t.Errorf("Query %s: %v, %v; want a refusal naming no function of the database", q, got, err)
		}
	}
}

// TestEscapeThroughSampleLayout: a tenant's view filters the base table
// in its scan, and DuckDB samples by the scan's vectors and chunks (SYSTEM
// picks whole vectors of the base table; a reservoir draws as chunks
// arrive), whose bounds other tenants' rows set. So a repeatable sample of
// a tenant's own rows answers differently when another tenant has rows
// among them: one row of tenant b, inserted between tenant a's, changes
// tenant a's answer, deterministically. Tenant a learns whether, and
// roughly how many, rows other tenants loaded between its own.
func TestEscapeThroughSampleLayout(t *testing.T) {
	queries := []string{
		`SELECT count(*), sum(duration_ms) FROM otel_spans USING SAMPLE 10% (system, 7)`,
		`SELECT count(*), sum(duration_ms) FROM otel_spans TABLESAMPLE SYSTEM (10%) REPEATABLE (7)`,
		`SELECT count(*), sum(duration_ms) FROM otel_spans USING SAMPLE 100 ROWS (reservoir, 7)`,
	}
	// answers are tenant a's answers to queries, in a lake where tenant b
	// has bRows rows among tenant a's 100,000 (which are the same in each).
	answers := func(bRows int) []string {
		l := newLake(t)
		if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT tenant, 't', 'n', d FROM (
			SELECT 'a' AS tenant, i AS d, 2 * i AS pos FROM range(100000) t(i)
			UNION ALL SELECT 'b', -1, 2 * i + 1 FROM range($1) t(i)) ORDER BY pos`, bRows); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range queries {
			got, err := l.rows(t, tenantA, q)
			var re *RefusedError
			if errors.As(err, &re) {
				out = append(out, "refused")
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			out = append(out, strings.Join(got, ","))
		}
		return out
	}
	alone, beside := answers(0), answers(1)
	for i, q := range queries {
		if alone[i] != beside[i] {
			t.Errorf("%s\n  tenant a reads %s alone and %s with one row of tenant b among its rows", q, alone[i], beside[i])
		}
	}
}

// A structure's key given twice: DuckDB binds the type of each, so each
// is checked (a decoder into a map kept the last alone, and the first
// reached the operator's ENUM). Found by a review.
func TestEscapeThroughStructureKeysTwice(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE TYPE ops_mood AS ENUM ('calm', 'paged')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT json_transform('null', '{"a":"ops_mod","a":"VARCHAR"}')`,
		`SELECT from_json('null', '[{"x":"ops_mod","x":"BIGINT"}]')`,
	} {
		got, err := l.rows(t, tenantA, q)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("Query %s\n  not refused: %v, %v", q, got, err)
		}
		for _, leak := range []string{"calm", "paged", "ops_mood"} {
			if strings.Contains(strings.Join(got, ","), leak) || (err != nil && strings.Contains(err.Error(), leak)) {
				t.Errorf("Query %s\n  reveals %q: %v, %v", q, leak, got, err)
			}
		}
	}
}

// Structures of DuckDB's own types, written every way a type can be, are
// taken (a MAP has no other way into a structure). Found by a review.
func TestStructureOfOwnTypesTaken(t *testing.T) {
	l := newLake(t)
	for _, q := range []string{
		`SELECT json_transform('{"m":{"k":1}}', '{"m":"MAP(VARCHAR, BIGINT)"}')`,
		`SELECT json_transform('{"t":"2024-01-01 00:00:00+00"}', '{"t":"TIMESTAMP WITH TIME ZONE"}')`,
		`SELECT json_transform('{"t":"2024-01-01 00:00:00+00"}', '{"t":"TIMESTAMPTZ"}')`,
		`SELECT json_transform('{"d":1.5}', '{"d":"DECIMAL(18, 3)"}')`,
		`SELECT json_transform('{"s":{"b":1}}', '{"s":"STRUCT(b INTEGER)"}')`,
		`SELECT json_transform('{"l":[[1]]}', '{"l":"INTEGER[][]"}')`,
	} {
		got, err := l.rows(t, tenantA, q)
		if err != nil {
			t.Errorf("Query %s\n  refused: %v, %v", q, got, err)
		}
	}
}

// A Bernoulli sample without a seed is taken, however written; one with
// a seed is refused (each thread draws from the seed anew over its part
// of the table). Found by a review: every sample was refused.
func TestBernoulliSampleTaken(t *testing.T) {
	l := newLake(t)
	for _, q := range []string{
		`SELECT count(*) FROM otel_spans USING SAMPLE 10 PERCENT (bernoulli)`,
		`SELECT count(*) FROM otel_spans TABLESAMPLE BERNOULLI(10 PERCENT)`,
	} {
		if got, err := l.rows(t, tenantA, q); err != nil {
			t.Errorf("Query %s\n  refused: %v, %v", q, got, err)
		}
	}
	var re *RefusedError
	if _, err := l.rows(t, tenantA, `SELECT count(*) FROM otel_spans USING SAMPLE 10% (bernoulli, 7)`); !errors.As(err, &re) {
		t.Errorf("a seeded sample: %v, want refused", err)
	}
}
