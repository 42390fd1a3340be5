package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// lake is a database with what a DuckDB sink holds: tables with a
// tenant_id column (two tenants' rows), a raw table and a ledger without
// one, a shared price table, and files beside it (a staged batch, a
// secret) that no tenant may read.
type lake struct {
	db     *sql.DB
	reader *DuckDB
	dir    string
}

func newLake(t *testing.T) *lake {
	t.Helper()
	dir := t.TempDir()
	db, err := sql.Open("duckdb", filepath.Join(dir, "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE otel_spans (tenant_id VARCHAR, trace_id VARCHAR, name VARCHAR, duration_ms BIGINT)`,
		`INSERT INTO otel_spans VALUES ('a', 't1', 'chat', 10), ('a', 't1', 'tool', 5), ('b', 't2', 'secret-b', 99)`,
		`CREATE TABLE genai_operations (tenant_id VARCHAR, trace_id VARCHAR, input_tokens BIGINT)`,
		`INSERT INTO genai_operations VALUES ('a', 't1', 100), ('b', 't2', 7777)`,
		`CREATE TABLE events (record_metadata JSON, record_content JSON)`,
		`INSERT INTO events VALUES ('{}', '{"tenant":"b","secret":"raw-b"}')`,
		`CREATE TABLE events_ledger (topic VARCHAR, "partition" INTEGER, first_offset BIGINT)`,
		`INSERT INTO events_ledger VALUES ('t', 0, 0)`,
		`CREATE TABLE genai_prices (model VARCHAR, input_per_mtok DOUBLE)`,
		`INSERT INTO genai_prices VALUES ('gpt', 1.5)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
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
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{Shared: []string{"genai_prices"}})
	if err != nil {
		t.Fatal(err)
	}
	return &lake{db: db, reader: r, dir: dir}
}

// rows runs q for s and returns its rows, each cell printed, or the error.
func (l *lake) rows(t *testing.T, s tenancy.Scope, q string, params ...any) ([]string, error) {
	t.Helper()
	rr, err := l.reader.Query(context.Background(), s, q, params...)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []string
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			cells := make([]string, rec.NumCols())
			for c, col := range rec.Columns() {
				// A copy: the value is the batch's memory, freed with it.
				cells[c] = strings.Clone(col.ValueStr(i))
			}
			out = append(out, strings.Join(cells, "|"))
		}
	}
	return out, rr.Err()
}

var (
	tenantA = tenancy.One("a")
	tenantB = tenancy.One("b")
)

func TestTenantReadsItsOwnRows(t *testing.T) {
	l := newLake(t)
	got, err := l.rows(t, tenantA, `SELECT s.name, o.input_tokens FROM otel_spans s LEFT JOIN genai_operations o USING (trace_id) ORDER BY s.name`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"chat|100", "tool|100"}; !slices.Equal(got, want) {
		t.Fatalf("tenant a read %v, want %v", got, want)
	}
	got, err = l.rows(t, tenantB, `SELECT count(*), sum(duration_ms) FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"1|99"}; !slices.Equal(got, want) {
		t.Fatalf("tenant b read %v, want %v", got, want)
	}
	// Ordinary SQL passes the checker: operators, LIKE, window and
	// aggregate functions, CTEs, set operations, parameters.
	got, err = l.rows(t, tenantA, `WITH c AS (SELECT name, duration_ms FROM otel_spans WHERE name LIKE $1)
		SELECT upper(name) || '!', row_number() OVER (ORDER BY duration_ms) AS n, duration_ms + 1 FROM c
		UNION ALL SELECT 'x', 0, 0 FROM genai_prices ORDER BY 1`, "%")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"CHAT!|2|11", "TOOL!|1|6", "x|0|0"}; !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

func TestOperatorReadsEveryTable(t *testing.T) {
	l := newLake(t)
	got, err := l.rows(t, tenancy.Operator, `SELECT (SELECT count(*) FROM otel_spans), (SELECT count(*) FROM events), (SELECT count(*) FROM events_ledger)`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"3|1|1"}; !slices.Equal(got, want) {
		t.Fatalf("operator read %v, want %v", got, want)
	}
}

// TestTenantEscapes tries every way out of a tenant's rows that the read
// path must close: each is refused, or answers the tenant's rows alone.
func TestTenantEscapes(t *testing.T) {
	l := newLake(t)
	secret := filepath.Join(l.dir, "secret.csv")
	staged := filepath.Join(l.dir, "stage", "batch.json")
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
			`SELECT * FROM read_parquet('` + filepath.Join(l.dir, "*.parquet") + `')`,
			`SELECT * FROM read_json('` + staged + `')`,
			`SELECT * FROM read_json_auto('` + staged + `')`,
			`SELECT * FROM read_ndjson_objects('` + staged + `')`,
			`SELECT * FROM read_text('` + secret + `')`,
			`SELECT * FROM read_blob('` + secret + `')`,
			`SELECT * FROM glob('` + l.dir + `/*')`,
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
			`SELECT * FROM '` + filepath.Join(l.dir, "stage", "*") + `'`,
			`SELECT * FROM read_json('` + filepath.Join(l.dir, "stage", "*.jsonl") + `', format = 'newline_delimited')`,
		},
		"Attach": {
			`ATTACH '` + filepath.Join(l.dir, "lake.duckdb") + `' AS other (READ_ONLY)`,
			`ATTACH ':memory:' AS m`,
			`DETACH lake`,
			`USE lake`,
		},
		"Copy": {
			`COPY otel_spans TO '` + filepath.Join(l.dir, "out.csv") + `'`,
			`COPY (SELECT * FROM otel_spans) TO '` + filepath.Join(l.dir, "out.csv") + `'`,
			`COPY otel_spans FROM '` + secret + `'`,
		},
		"Export": {
			`EXPORT DATABASE '` + filepath.Join(l.dir, "export") + `'`,
			`IMPORT DATABASE '` + filepath.Join(l.dir, "export") + `'`,
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
				got, err := l.rows(t, tenantA, q)
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
			got, err := l.rows(t, tenantA, q)
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
		got, err := l.rows(t, tenantA, `SELECT * FROM otel_spans WHERE tenant_id = 'b' UNION ALL SELECT tenant_id, trace_id, 'op', input_tokens FROM genai_operations WHERE tenant_id <> 'a'`)
		if err != nil || len(got) != 0 {
			t.Fatalf("read %v, %v; want nothing", got, err)
		}
	})
}

// TestReadsDoNotLeaveViewsToTheLoads: the connections a tenant's query
// used (with its views) are closed, not handed back to the pool where the
// sink would load into or count through a tenant's view.
func TestReadsDoNotLeaveViewsToTheLoads(t *testing.T) {
	l := newLake(t)
	l.db.SetMaxOpenConns(1)
	if _, err := l.rows(t, tenantA, `SELECT * FROM otel_spans`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.reader.Schema(context.Background(), tenantA, `SELECT * FROM otel_spans`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.reader.Tables(context.Background(), tenantA); err != nil {
		t.Fatal(err)
	}
	if _, err := l.rows(t, tenantA, `SELECT * FROM events`); err == nil {
		t.Fatal("tenant a read the raw table")
	}
	var n int
	if err := l.db.QueryRow(`SELECT count(*) FROM otel_spans`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("the pool's connection counts %d spans, want 3: it kept a tenant's view", n)
	}
	if _, err := l.db.Exec(`INSERT INTO otel_spans VALUES ('b', 't3', 'later', 1)`); err != nil {
		t.Fatalf("load after a read: %v", err)
	}
}

func TestSchemaAndTablesAreScoped(t *testing.T) {
	l := newLake(t)
	ctx := context.Background()
	s, err := l.reader.Schema(ctx, tenantA, `SELECT name, duration_ms * $1 AS d FROM otel_spans WHERE trace_id = $2`)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(s.Field(0).Name, s.Field(1).Name, s.NumFields()); got != "named2" {
		t.Fatalf("schema %v", s)
	}
	tables, err := l.reader.Tables(ctx, tenantA)
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
	tables, err = l.reader.Tables(ctx, tenancy.Operator)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 5 {
		t.Fatalf("the operator's tables: %d, want 5", len(tables))
	}
}

// TestReadSeesTheLoadsCommittedWhenItStarted: a read streams one snapshot
// while loads go on (DuckDB's MVCC), and does not hold them up.
func TestReadSeesTheLoadsCommittedWhenItStarted(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'bulk', 'n' || i, i FROM range(100000) t(i)`); err != nil {
		t.Fatal(err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA, `SELECT duration_ms FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	n, batches := rr.RecordBatch().NumRows(), 1
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'later', 'n', 1 FROM range(1000)`); err != nil {
		t.Fatalf("a load while a read streams: %v", err)
	}
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
		batches++
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 100002 || batches < 2 {
		t.Fatalf("streamed %d rows in %d batches, want the 100,002 committed when the read started, in several", n, batches)
	}
	var _ array.RecordReader = rr
}

// Parameters are typed as DuckDB infers them from where they stand (JDBC
// binds by these types), checked as Query checks the query.
func TestParameterTypes(t *testing.T) {
	l := newLake(t)
	s, err := l.reader.Parameters(context.Background(), tenantA, `SELECT * FROM otel_spans WHERE duration_ms > ? AND name = ? AND trace_id = $3::VARCHAR`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range s.Fields() {
		got = append(got, f.Type.String())
	}
	if want := []string{"int64", "utf8", "utf8"}; !slices.Equal(got, want) {
		t.Fatalf("parameter types %v, want %v", got, want)
	}
	if _, err := l.reader.Parameters(context.Background(), tenantA, `SELECT * FROM events WHERE record_content = ?`); err == nil {
		t.Fatal("the parameters of a query over a table the tenant may not read were described")
	}
}
