package query

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
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
	writeLakeFiles(t, dir)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{Shared: []string{"genai_prices"}})
	if err != nil {
		t.Fatal(err)
	}
	return &lake{db: db, reader: r, dir: dir}
}

// rows runs q for s and returns its rows, each cell printed, or the error.
func (l *lake) rows(t *testing.T, s tenancy.Scope, q string, params ...any) ([]string, error) {
	t.Helper()
	return readRows(l.reader, s, q, params...)
}

var (
	tenantA = tenancy.One("a")
	tenantB = tenancy.One("b")
)

// dbWith is a database in a file of its own, made by stmts.
func dbWith(t *testing.T, stmts ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

func TestTenantReadsItsOwnRows(t *testing.T) {
	l := newLake(t)
	tenantReadsItsOwnRows(t, func(s tenancy.Scope, q string, params ...any) ([]string, error) { return l.rows(t, s, q, params...) })
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

// TestTenantEscapes: see tenantEscapes.
func TestTenantEscapes(t *testing.T) {
	l := newLake(t)
	tenantEscapes(t, l.dir, func(t *testing.T, q string) ([]string, error) { return l.rows(t, tenantA, q) })
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
	schemaAndTablesAreScoped(t, newLake(t).reader)
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
// binds by these types), checked as Query checks the query: over the
// DuckDB sink and over Iceberg (tracelake serve) alike.
func TestParameterTypes(t *testing.T) {
	for name, r := range map[string]interface {
		Parameters(context.Context, tenancy.Scope, string) (*arrow.Schema, error)
	}{"duckdb": newLake(t).reader, "iceberg": newIceLake(t, IcebergOptions{}).reader} {
		s, err := r.Parameters(context.Background(), tenantA, `SELECT * FROM otel_spans WHERE duration_ms > ? AND name = ? AND trace_id = $3::VARCHAR`)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, f := range s.Fields() {
			got = append(got, f.Type.String())
		}
		if want := []string{"int64", "utf8", "utf8"}; !slices.Equal(got, want) {
			t.Errorf("%s: parameter types %v, want %v", name, got, want)
		}
		// Types a client binds natively (a decimal column of a changelog
		// table, an unsigned key, a nanosecond time) are declared as
		// themselves: declared strings, ADBC's database/sql adapter
		// refused a uint64 or a time.Time for them.
		s, err = r.Parameters(context.Background(), tenantA, `SELECT * FROM otel_spans WHERE duration_ms::DECIMAL(10,2) = ? AND duration_ms::UBIGINT = ?
			AND make_timestamp(duration_ms)::TIMESTAMP_NS = ? AND make_time(0, 0, duration_ms) = ? AND make_timestamp(duration_ms)::TIMESTAMPTZ = ?`)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got = got[:0]
		for _, f := range s.Fields() {
			got = append(got, f.Type.String())
		}
		if want := []string{"decimal(10, 2)", "uint64", "timestamp[ns, tz=UTC]", "time64[us]", "timestamp[us, tz=UTC]"}; !slices.Equal(got, want) {
			t.Errorf("%s: parameter types %v, want %v", name, got, want)
		}
		if _, err := r.Parameters(context.Background(), tenantA, `SELECT * FROM events WHERE record_content = ?`); err == nil {
			t.Errorf("%s: the parameters of a query over a table the tenant may not read were described", name)
		}
	}
}

// A query running past the reader's timeout is interrupted and fails with
// the deadline; the next one runs (the slot and connection were freed).
func TestQueryTimeout(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'bulk', 'n', i FROM range(200000) t(i)`); err != nil {
		t.Fatal(err)
	}
	r, err := NewDuckDB(context.Background(), l.db, DuckDBOptions{Timeout: 300 * time.Millisecond, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// 4·10^10 pairs: minutes of work without the timeout.
	rr, err := r.Query(context.Background(), tenantA, `SELECT count(*) FROM otel_spans x, otel_spans y WHERE x.duration_ms + y.duration_ms = -1`)
	if err == nil {
		for rr.Next() {
		}
		err = rr.Err()
		rr.Release()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a query past the timeout: %v, want the deadline", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the query was stopped after %s", took)
	}
	rr, err = r.Query(context.Background(), tenantA, `SELECT count(*) FROM genai_operations`)
	if err != nil {
		t.Fatalf("the next query: %v", err)
	}
	rr.Release()
}

// TestTenantReadsRowsOfItsIdExactly: a tenant's rows are those whose
// tenant_id is its id, byte for byte. The view compared a tenant_id
// column of another type than VARCHAR (a model's INTEGER, a UUID, a
// BOOLEAN) with the id cast to that type, so tenant "01" read tenant
// "1"'s rows, "A0EE…" those of "a0ee…", and "t" those of "true".
func TestTenantReadsRowsOfItsIdExactly(t *testing.T) {
	const id = "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
	db := dbWith(t,
		`CREATE TABLE by_number (tenant_id INTEGER, v VARCHAR)`,
		`INSERT INTO by_number VALUES (1, 'of 1'), (2, 'of 2')`,
		`CREATE TABLE by_uuid (tenant_id UUID, v VARCHAR)`,
		`INSERT INTO by_uuid VALUES ('`+id+`', 'of the uuid')`,
		`CREATE TABLE by_flag (tenant_id BOOLEAN, v VARCHAR)`,
		`INSERT INTO by_flag VALUES (true, 'of true')`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, table string
		want          []string
	}{
		{"1", "by_number", []string{"of 1"}},
		{"01", "by_number", nil},
		{"1.0", "by_number", nil},
		{"a", "by_number", nil},
		{id, "by_uuid", []string{"of the uuid"}},
		{strings.ToUpper(id), "by_uuid", nil},
		{strings.ReplaceAll(id, "-", ""), "by_uuid", nil},
		{"true", "by_flag", []string{"of true"}},
		{"t", "by_flag", nil},
		{"1", "by_flag", nil},
	} {
		got, err := readRows(r, tenancy.One(c.tenant), `SELECT v FROM `+c.table)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("tenant %q read %s: %v, %v; want %v", c.tenant, c.table, got, err, c.want)
		}
	}
}

// TestTenantReadsRowsOfItsIdExactlyUnderACollation: tenant ids are
// case-sensitive (acme and ACME are two tenants), and a tenant_id column
// may have a collation (a user's table in transform mode: VARCHAR COLLATE
// NOCASE), as may the database (default_collation). The view compared
// tenant_id with the id under that collation: tenant acme read ACME's
// rows, and "a" those of "á" under NOACCENT.
func TestTenantReadsRowsOfItsIdExactlyUnderACollation(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE nocase (tenant_id VARCHAR COLLATE NOCASE, v VARCHAR)`,
		`INSERT INTO nocase VALUES ('acme', 'of acme'), ('ACME', 'of ACME')`,
		`CREATE TABLE noaccent (tenant_id VARCHAR COLLATE NOCASE.NOACCENT, v VARCHAR)`,
		`INSERT INTO noaccent VALUES ('a', 'of a'), ('á', 'of á'), ('A', 'of A')`,
		`CREATE TABLE plain (tenant_id VARCHAR, v VARCHAR)`,
		`INSERT INTO plain VALUES ('acme', 'of acme'), ('ACME', 'of ACME')`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tenant, table string
		want          []string
	}{
		{"acme", "nocase", []string{"of acme"}},
		{"ACME", "nocase", []string{"of ACME"}},
		{"a", "noaccent", []string{"of a"}},
		{"A", "noaccent", []string{"of A"}},
		{"acme", "plain", []string{"of acme"}},
	}
	read := func(when string) {
		for _, c := range cases {
			got, err := readRows(r, tenancy.One(c.tenant), `SELECT v FROM `+c.table)
			if err != nil || !slices.Equal(got, c.want) {
				t.Errorf("%s: tenant %q read %s: %v, %v; want %v", when, c.tenant, c.table, got, err, c.want)
			}
		}
	}
	read("the columns' collations")
	if _, err := db.Exec(`SET GLOBAL default_collation = 'nocase'`); err != nil {
		t.Fatal(err)
	}
	read("default_collation nocase")
}

// TestTenantColumnInAnyCase: DuckDB's names ignore case, so a column
// TENANT_ID is the column tenant_id a query (and the tenant's view) binds
// to; the reader looked for it in lower case alone and took such a table
// for one without tenant_id: the operator's alone, or, shared, every
// tenant's rows for every tenant. The Iceberg reader already folds case.
func TestTenantColumnInAnyCase(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE model ("Tenant_ID" VARCHAR, v VARCHAR)`,
		`INSERT INTO model VALUES ('a', 'of a'), ('b', 'of b')`)
	for _, shared := range [][]string{nil, {"model"}} {
		r, err := NewDuckDB(context.Background(), db, DuckDBOptions{Shared: shared})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readRows(r, tenantA, `SELECT v FROM model`)
		if err != nil || !slices.Equal(got, []string{"of a"}) {
			t.Errorf("shared %v: tenant a read %v, %v; want its own row alone", shared, got, err)
		}
	}
}
