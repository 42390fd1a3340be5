package query

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A changelog table of database change capture holds its source table's
// columns, a tenant_id among them when the source has one: that is the
// source's tenant, not ours, yet the read path took the table for a
// tenant-scoped one and let tenant "a" read every change of the source's
// rows whose tenant_id was 'a'. Tables of the registry of routed tables
// are now the operator's alone, as every table without tenant_id is.
func TestChangelogTablesAreTheOperators(t *testing.T) {
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE cdc_routes (log_table VARCHAR, source_database VARCHAR, source_schema VARCHAR, source_table VARCHAR, first_seen TIMESTAMP, model_table VARCHAR)`,
		`CREATE TABLE cdc_shop_accounts_log (id BIGINT, tenant_id VARCHAR, secret VARCHAR, cdc_op VARCHAR)`,
		`INSERT INTO cdc_routes VALUES ('cdc_shop_accounts_log', 'shop', '', 'accounts', now(), 'cdc_shop_accounts')`,
		`INSERT INTO cdc_shop_accounts_log VALUES (1, 'a', 'card of a', 'c'), (2, 'b', 'card of b', 'c')`,
		`CREATE TABLE cdc_shop_accounts (id BIGINT, tenant_id VARCHAR, secret VARCHAR)`,
		`INSERT INTO cdc_shop_accounts VALUES (1, 'a', 'card of a'), (2, 'b', 'card of b')`,
		`CREATE TABLE cdc_shop_accounts_tombstones (id BIGINT, tenant_id VARCHAR)`,
		`INSERT INTO cdc_shop_accounts_tombstones VALUES (3, 'a')`,
		`CREATE TABLE otel_spans (tenant_id VARCHAR, name VARCHAR)`,
		`INSERT INTO otel_spans VALUES ('a', 'chat'), ('b', 'secret-b')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{Routes: "cdc_routes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"cdc_shop_accounts_log", "cdc_shop_accounts", "cdc_shop_accounts_tombstones"} {
		if got, err := readRows(r, tenancy.One("a"), `SELECT id FROM `+table); err == nil {
			t.Errorf("tenant a read %s: %v", table, got)
		}
	}
	if got, err := readRows(r, tenancy.One("a"), `SELECT name FROM otel_spans`); err != nil || !slices.Equal(got, []string{"chat"}) {
		t.Errorf("tenant a read otel_spans: %v, %v; want its own row", got, err)
	}
	got, err := readRows(r, tenancy.Operator, `SELECT count(*) FROM cdc_shop_accounts_log`)
	if err != nil || !slices.Equal(got, []string{"2"}) {
		t.Errorf("operator read %v, %v; want 2 rows", got, err)
	}
}

// A model made before the registry named models (its model_table null,
// as a database of a release before the column came keeps it: merge
// registers a model only in the transaction that creates it), and the
// change capture tables of a database whose run no longer captures
// changes (no registry named to the reader), still hold the source's
// tenant_id: the reader knew them only from the registry, and let tenant
// "a" read the source's rows whose tenant_id was 'a'. Every table change
// capture makes carries cdc_position, which now makes it the operator's.
func TestChangeCaptureTablesAreTheOperatorsWithoutTheRegistry(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE cdc_routes (log_table VARCHAR, source_database VARCHAR, source_schema VARCHAR, source_table VARCHAR, first_seen TIMESTAMP, model_table VARCHAR)`,
		`CREATE TABLE cdc_shop_accounts_log (id BIGINT, tenant_id VARCHAR, secret VARCHAR, cdc_op VARCHAR, cdc_position VARCHAR, cdc_source_time TIMESTAMP, cdc_key JSON)`,
		`INSERT INTO cdc_routes VALUES ('cdc_shop_accounts_log', 'shop', '', 'accounts', now(), NULL)`,
		`INSERT INTO cdc_shop_accounts_log VALUES (1, 'a', 'card of a', 'c', '1', NULL, '["id"]'), (2, 'b', 'card of b', 'c', '2', NULL, '["id"]')`,
		`CREATE TABLE cdc_shop_accounts (id BIGINT, tenant_id VARCHAR, secret VARCHAR, cdc_position VARCHAR, cdc_source_time TIMESTAMP)`,
		`INSERT INTO cdc_shop_accounts VALUES (1, 'a', 'card of a', '1', NULL), (2, 'b', 'card of b', '2', NULL)`,
		`CREATE TABLE cdc_shop_accounts_tombstones (id BIGINT, cdc_position VARCHAR)`,
		`CREATE TABLE otel_spans (tenant_id VARCHAR, name VARCHAR)`,
		`INSERT INTO otel_spans VALUES ('a', 'chat'), ('b', 'secret-b')`)
	for _, routes := range []string{"cdc_routes", ""} {
		r, err := NewDuckDB(context.Background(), db, DuckDBOptions{Routes: routes})
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"cdc_shop_accounts_log", "cdc_shop_accounts"} {
			if got, err := readRows(r, tenancy.One("a"), `SELECT secret FROM `+table); err == nil {
				t.Errorf("registry %q: tenant a read %s: %v", routes, table, got)
			}
		}
		tables, err := r.Tables(context.Background(), tenancy.One("a"))
		if err != nil {
			t.Fatal(err)
		}
		if len(tables) != 1 || tables[0].Name != "otel_spans" {
			t.Errorf("registry %q: tenant a lists %v, want otel_spans alone", routes, tables)
		}
		if got, err := readRows(r, tenancy.One("a"), `SELECT name FROM otel_spans`); err != nil || !slices.Equal(got, []string{"chat"}) {
			t.Errorf("registry %q: tenant a read otel_spans: %v, %v; want its own row", routes, got, err)
		}
		got, err := readRows(r, tenancy.Operator, `SELECT count(*) FROM cdc_shop_accounts`)
		if err != nil || !slices.Equal(got, []string{"2"}) {
			t.Errorf("registry %q: operator read %v, %v; want 2 rows", routes, got, err)
		}
	}
}
