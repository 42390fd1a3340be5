package main

import (
	"context"
	"database/sql"
	"slices"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/reconcile"
)

// reconcile --source compares every column both tables have, but it
// matched the model's column names to the source's exactly, though both
// engines' names ignore case: a MySQL column "Total" modelled as "total"
// was left out of the comparison, and a model whose totals were all
// wrong was reported EQUAL over the other columns.
func TestReconcileSourceComparesAColumnNamedInAnotherCase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB")
	}
	srv, _ := startShop(t, "CREATE TABLE shop.orders (order_id BIGINT PRIMARY KEY, Total DECIMAL(12,2) NOT NULL)",
		"INSERT INTO shop.orders VALUES (1, 10.50), (2, 20.00)")
	db := duckDBWith(t, "CREATE TABLE orders (order_id BIGINT, total DECIMAL(18,4))", "INSERT INTO orders VALUES (1, 10.50), (2, 99)")
	cfg := config.Default()
	cfg.Merge.Models = []config.Model{{Name: "orders", Format: config.FormatDebezium, Key: []string{"order_id"}, Columns: config.Columns{
		{Name: "order_id", Path: "$.order_id", Type: "BIGINT"}, {Name: "total", Path: "$.Total", Type: "DECIMAL(18,4)"}}}}
	rep, err := reconcileSource(context.Background(), cfg, db, "", srv.DSN("reader", "r3ad-only", "shop"), "shop.orders", nil,
		reconcile.StreamSpec{Examples: 10}, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Columns) != 2 || !slices.ContainsFunc(rep.Columns, func(c string) bool { return c == "Total" || c == "total" }) {
		t.Errorf("columns compared: %q, want order_id and Total (the model's total)", rep.Columns)
	}
	if rep.Equal || rep.Differ != 1 {
		t.Errorf("a total of 20.00 in the source, 99 in the model: equal %v, %d keys differ; want DIFFERENT, 1", rep.Equal, rep.Differ)
	}
}

// The model's key must be the source table's primary key, but the two
// were compared by exact name: a primary key Order_ID, modelled as
// order_id (one column to both engines), was refused as another key
// ("usage" exit 2), and the model could not be reconciled at all.
func TestReconcileSourceTakesAKeyNamedInAnotherCase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB")
	}
	srv, _ := startShop(t, "CREATE TABLE shop.orders (Order_ID BIGINT PRIMARY KEY, total DECIMAL(12,2) NOT NULL)",
		"INSERT INTO shop.orders VALUES (1, 10.50), (2, 20.00)")
	db := duckDBWith(t, "CREATE TABLE orders (order_id BIGINT, total DECIMAL(18,4))", "INSERT INTO orders VALUES (1, 10.50), (2, 99)")
	cfg := config.Default()
	cfg.Merge.Models = []config.Model{{Name: "orders", Format: config.FormatDebezium, Key: []string{"order_id"}, Columns: config.Columns{
		{Name: "order_id", Path: "$.Order_ID", Type: "BIGINT"}, {Name: "total", Path: "$.total", Type: "DECIMAL(18,4)"}}}}
	rep, err := reconcileSource(context.Background(), cfg, db, "", srv.DSN("reader", "r3ad-only", "shop"), "shop.orders", nil,
		reconcile.StreamSpec{Examples: 10}, 100, 0)
	if err != nil {
		t.Fatalf("a model keyed by order_id against the primary key Order_ID: %v", err)
	}
	if rep.Equal || rep.Differ != 1 || rep.LeftRows != 2 || rep.RightRows != 2 {
		t.Errorf("a total of 20.00 in the source, 99 in the model: %+v; want DIFFERENT, 1 key differing of 2 rows each", rep)
	}
}

// duckDBWith is an in-memory DuckDB database made by stmts, closed when
// the test ends.
func duckDBWith(t *testing.T, stmts ...string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1) // one in-memory database
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}
