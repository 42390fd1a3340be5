package query

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// tenantReadsItsOwnRows reads newLake's rows (or the same in another
// reader's lake) for tenants a and b with rows.
func tenantReadsItsOwnRows(t *testing.T, rows func(s tenancy.Scope, q string, params ...any) ([]string, error)) {
	t.Helper()
	got, err := rows(tenantA, `SELECT s.name, o.input_tokens FROM otel_spans s LEFT JOIN genai_operations o USING (trace_id) ORDER BY s.name`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chat|100", "tool|100"}; !slices.Equal(got, want) {
		t.Fatalf("tenant a read %v, want %v", got, want)
	}
	got, err = rows(tenantB, `SELECT count(*), sum(duration_ms) FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1|99"}; !slices.Equal(got, want) {
		t.Fatalf("tenant b read %v, want %v", got, want)
	}
	// Ordinary SQL passes the checker: operators, LIKE, window and
	// aggregate functions, CTEs, set operations, parameters.
	got, err = rows(tenantA, `WITH c AS (SELECT name, duration_ms FROM otel_spans WHERE name LIKE $1)
		SELECT upper(name) || '!', row_number() OVER (ORDER BY duration_ms) AS n, duration_ms + 1 FROM c
		UNION ALL SELECT 'x', 0, 0 FROM genai_prices ORDER BY 1`, "%")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"CHAT!|2|11", "TOOL!|1|6", "x|0|0"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	// A row constructor is main.row to DuckDB's parser: a built-in, taken.
	got, err = rows(tenantA, `SELECT count(DISTINCT (trace_id, name)) FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"2"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// schemaAndTablesAreScoped checks r's Schema and Tables on newLake's
// tables (or the same in another reader's lake) and returns tenant a's
// tables.
func schemaAndTablesAreScoped(t *testing.T, r Reader) []Table {
	t.Helper()
	ctx := context.Background()
	s, err := r.Schema(ctx, tenantA, `SELECT name, duration_ms * $1 AS d FROM otel_spans WHERE trace_id = $2`)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Field(0).Name, s.Field(1).Name, s.NumFields()); got != "named2" {
		t.Fatalf("schema %v", s)
	}
	if _, err := r.Schema(ctx, tenantA, `SELECT * FROM events`); err == nil {
		t.Fatal("tenant a has the schema of a query of the raw table")
	}
	tables, err := r.Tables(ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Name)
	}
	if want := []string{"genai_operations", "genai_prices", "otel_spans"}; !slices.Equal(names, want) {
		t.Fatalf("tenant a's tables %v, want %v", names, want)
	}
	all, err := r.Tables(ctx, tenancy.Operator)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("the operator's tables: %d, want 5", len(all))
	}
	return tables
}

// writeLakeFiles writes beside a lake the files no tenant may read: a
// secret, and a staged batch of tenant b's rows.
func writeLakeFiles(t testing.TB, dir string) {
	t.Helper()
	for name, body := range map[string]string{
		"secret.csv":        "tenant,secret\nb,file-b\n",
		"stage/batch.json":  `{"tenant_id":"b","name":"staged-b"}` + "\n",
		"stage/batch.jsonl": `{"tenant_id":"b","name":"staged-b"}` + "\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tenantEscapes tries every way out of tenant a's rows that a reader
// must close: each is refused, or answers the tenant's rows alone. The
// reader serves a lake beside dir's files (writeLakeFiles) holding, as
// newLake's does, otel_spans and genai_operations with a tenant_id column
// (tenant a's spans are named chat and tool), events and events_ledger
// without one, and the shared genai_prices; rows runs a query for tenant
// a.
func tenantEscapes(t *testing.T, dir string, rows func(t *testing.T, q string) ([]string, error)) {
	secret := filepath.Join(dir, "secret.csv")
	staged := filepath.Join(dir, "stage", "batch.json")
	refused := map[string][]string{
		"QualifiedNames": {
			`SELECT * FROM main.otel_spans`,
			`SELECT * FROM lake.main.otel_spans`,
			`SELECT * FROM lake.otel_spans`,
			`SELECT * FROM "main"."otel_spans"`,
			`SELECT * FROM temp.main.otel_spans`,
		},
		"InformationSchema": {
			`SELECT * FROM information_schema.tables`,
			`SELECT * FROM information_schema.columns`,
			`SELECT * FROM duckdb_tables()`,
			`SELECT * FROM duckdb_columns()`,
			`SELECT * FROM pg_catalog.pg_tables`,
			`SELECT * FROM sqlite_master`,
		},
		"CTEs": {
			`WITH x AS (SELECT * FROM main.otel_spans) SELECT * FROM x`,
			`WITH events AS (SELECT * FROM events) SELECT * FROM events`,
			`SELECT * FROM (WITH events AS (SELECT 1) SELECT 1), events`,
			`WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a`,
		},
		"Subqueries": {
			`SELECT (SELECT count(*) FROM main.otel_spans)`,
			`SELECT * FROM otel_spans WHERE EXISTS (SELECT 1 FROM events)`,
			`SELECT * FROM (SELECT * FROM events_ledger)`,
			`SELECT * FROM otel_spans s, LATERAL (SELECT * FROM main.genai_operations) o`,
		},
		"SetOperations": {
			`SELECT name FROM otel_spans UNION ALL SELECT name FROM main.otel_spans`,
			`SELECT name FROM otel_spans EXCEPT SELECT record_content::VARCHAR FROM events`,
		},
		"TableFunctions": {
			`SELECT * FROM read_csv('` + secret + `')`,
			`SELECT * FROM read_csv_auto('` + secret + `')`,
			`SELECT * FROM read_parquet('` + filepath.Join(dir, "*.parquet") + `')`,
			`SELECT * FROM read_json('` + staged + `')`,
			`SELECT * FROM read_json_auto('` + staged + `')`,
			`SELECT * FROM read_ndjson_objects('` + staged + `')`,
			`SELECT * FROM read_text('` + secret + `')`,
			`SELECT * FROM read_blob('` + secret + `')`,
			`SELECT * FROM glob('` + dir + `/*')`,
			`SELECT * FROM '` + secret + `'`,
			`SELECT * FROM '` + staged + `'`,
			`SELECT * FROM query_table('events')`,
			`SELECT * FROM query('SELECT * FROM main.otel_spans')`,
			`SELECT * FROM range(3)`,
			`SELECT * FROM duckdb_settings()`,
			`SELECT * FROM duckdb_secrets()`,
			`SELECT * FROM otel_spans WHERE name IN (SELECT name FROM read_json('` + staged + `'))`,
		},
		"StagedFiles": {
			`SELECT * FROM '` + filepath.Join(dir, "stage", "*") + `'`,
			`SELECT * FROM read_json('` + filepath.Join(dir, "stage", "*.jsonl") + `', format = 'newline_delimited')`,
		},
		"Attach": {
			`ATTACH '` + filepath.Join(dir, "lake.duckdb") + `' AS other (READ_ONLY)`,
			`ATTACH ':memory:' AS m`,
			`DETACH lake`,
			`USE lake`,
		},
		"Copy": {
			`COPY otel_spans TO '` + filepath.Join(dir, "out.csv") + `'`,
			`COPY (SELECT * FROM otel_spans) TO '` + filepath.Join(dir, "out.csv") + `'`,
			`COPY otel_spans FROM '` + secret + `'`,
		},
		"Export": {
			`EXPORT DATABASE '` + filepath.Join(dir, "export") + `'`,
			`IMPORT DATABASE '` + filepath.Join(dir, "export") + `'`,
		},
		"InstallLoad": {`INSTALL httpfs`, `LOAD httpfs`, `FORCE INSTALL json`, `LOAD '` + secret + `'`},
		"SetPragma": {
			`SET enable_external_access = true`,
			`SET search_path = 'main'`,
			`RESET search_path`,
			`PRAGMA table_info('events')`,
			`PRAGMA database_list`,
			`CALL pragma_table_info('events')`,
			`SELECT * FROM pragma_table_info('events')`,
			`SET VARIABLE x = 1`,
		},
		"Getenv": {
			`SELECT getenv('HOME')`,
			`SELECT current_setting('temp_directory')`,
			`SELECT getvariable('x')`,
			`SELECT name FROM otel_spans WHERE name = getenv('USER')`,
		},
		"Statistics": {`SELECT stats(duration_ms) FROM otel_spans`},
		"Macros":     {`SELECT pg_get_viewdef(0)`},
		"TimeTravel": {`SELECT * FROM otel_spans AT (VERSION => 1)`},
		"ShowDescribe": {
			`DESCRIBE events`,
			`SUMMARIZE otel_spans`,
			`SHOW TABLES`,
			`SHOW ALL TABLES`,
			`PIVOT otel_spans ON name USING count(*)`,
			`FROM (PIVOT main.otel_spans ON name USING count(*))`,
		},
		"Writes": {
			`INSERT INTO otel_spans VALUES ('a', 'x', 'y', 1)`,
			`DELETE FROM otel_spans`,
			`UPDATE otel_spans SET tenant_id = 'a'`,
			`CREATE TABLE x AS SELECT * FROM main.otel_spans`,
			`CREATE TEMP VIEW otel_spans AS SELECT * FROM main.otel_spans`,
			`DROP VIEW otel_spans`,
			`CHECKPOINT`,
			`BEGIN TRANSACTION`,
			`CREATE SECRET s (TYPE s3)`,
			`CREATE MACRO m() AS TABLE SELECT * FROM main.otel_spans`,
		},
		"SeveralStatements": {
			`SELECT 1; SELECT * FROM main.otel_spans`,
			`SELECT * FROM otel_spans; DROP VIEW otel_spans; SELECT * FROM otel_spans`,
			`SELECT 1; SELECT 2`,
		},
		"TablesWithoutTenant": {
			`SELECT * FROM events`,
			`SELECT * FROM events_ledger`,
			`SELECT count(*) FROM otel_spans, events`,
		},
		"Comments": {
			`SELECT 1 -- ; SELECT * FROM otel_spans
			; SELECT * FROM main.otel_spans`,
			`SELECT 1 /* */; SELECT * FROM main.otel_spans`,
		},
	}
	for name, queries := range refused {
		t.Run(name, func(t *testing.T) {
			for _, q := range queries {
				got, err := rows(t, q)
				var re *RefusedError
				if !errors.As(err, &re) {
					t.Errorf("%s\n  not refused: %v, %v", q, got, err)
				}
			}
		})
	}
	// Comments hide nothing: what runs is the query as DuckDB parsed it.
	t.Run("CommentsRunAsParsed", func(t *testing.T) {
		for _, q := range []string{
			"SELECT name FROM otel_spans -- WHERE tenant_id = 'b'\nORDER BY name",
			"SELECT name FROM /* main. */ otel_spans ORDER BY name",
			"SELECT name FROM otel_spans WHERE tenant_id = 'b' OR true /* ; SELECT * FROM main.otel_spans */ ORDER BY name",
		} {
			got, err := rows(t, q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if want := []string{"chat", "tool"}; !slices.Equal(got, want) {
				t.Errorf("%s\n  read %v, want %v", q, got, want)
			}
		}
	})
	// The tenant's own predicate on another tenant finds nothing.
	t.Run("OtherTenantsPredicate", func(t *testing.T) {
		got, err := rows(t, `SELECT tenant_id, name FROM otel_spans WHERE tenant_id = 'b' UNION ALL SELECT tenant_id, trace_id FROM genai_operations WHERE tenant_id <> 'a'`)
		if err != nil || len(got) != 0 {
			t.Fatalf("read %v, %v; want nothing", got, err)
		}
	})
}
