package flightsql

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// TestTenantOfAnotherCaseUnderACollation: tenant ids are case-sensitive
// (acme and ACME are two tenants, as in Mimir), and a table a user made
// for transform mode may give its tenant_id a collation (VARCHAR COLLATE
// NOCASE). The tenant's view compared tenant_id with the id under the
// column's collation, so a token reading acme alone, through ADBC, read
// ACME's rows (and á's under NOACCENT).
func TestTenantOfAnotherCaseUnderACollation(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("duckdb", filepath.Join(dir, "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, q := range []string{
		`CREATE TABLE orders (tenant_id VARCHAR COLLATE NOCASE, name VARCHAR, amount BIGINT)`,
		`INSERT INTO orders VALUES ('acme', 'mine', 1), ('ACME', 'secret-of-ACME', 2), ('Acme', 'secret-of-Acme', 3)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	reader, err := query.NewDuckDB(context.Background(), db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte("tok-acme read=acme\ntok-ACME read=ACME\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := tenancy.LoadTokens(tokensFile, quiet)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, &fakeReader{}, func(o *Options) { o.Reader, o.Tenants = reader, tenancy.Resolver{Tokens: tokens} })
	uri := "grpc+tcp://" + s.Addr
	for _, c := range []struct {
		tenant, token string
		want          []string
	}{
		{"acme", "tok-acme", []string{"mine"}},
		{"", "tok-acme", []string{"mine"}},
		{"ACME", "tok-ACME", []string{"secret-of-ACME"}},
	} {
		got := runQuery(t, adbcConn(t, uri, c.tenant, c.token, nil), `SELECT name, amount FROM orders ORDER BY amount`)
		if !slices.Equal(got.names, c.want) {
			t.Errorf("token %s, tenant %q read %v; want %v", c.token, c.tenant, got.names, c.want)
		}
	}
}
