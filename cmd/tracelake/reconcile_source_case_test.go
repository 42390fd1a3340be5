package main

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/reconcile"
)

// reconcile --source matched the model's names to the source table's
// exactly, though both engines' names ignore case:
//   - a MySQL column "Total" modelled as "total" was left out of the
//     columns compared, and a model whose totals were all wrong was
//     reported EQUAL over the other columns;
//   - a primary key "Order_ID" modelled as "order_id" was refused as
//     another key ("usage", exit 2): the model could not be reconciled.
func TestReconcileSourceMatchesNamesInAnyCase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MariaDB")
	}
	f := func(table string, model config.Columns) {
		t.Helper()
		srv, _ := startShop(t, table, "INSERT INTO shop.orders VALUES (1, 10.50), (2, 20.00)")
		db, err := memoryDuckDB()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		for _, q := range []string{"CREATE TABLE orders (order_id BIGINT, total DECIMAL(18,4))", "INSERT INTO orders VALUES (1, 10.50), (2, 99)"} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		cfg := config.Default()
		cfg.Merge.Models = []config.Model{{Name: "orders", Format: config.FormatDebezium, Key: []string{"order_id"}, Columns: model}}
		rep, err := reconcileSource(context.Background(), cfg, db, nil, "", srv.DSN("reader", "r3ad-only", "shop"), "shop.orders", nil,
			reconcile.StreamSpec{Examples: 10}, 100, 0)
		if err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if len(rep.Columns) != 2 {
			t.Errorf("%s: columns compared: %q, want the key and the total", table, rep.Columns)
		}
		if rep.Equal || rep.Differ != 1 || rep.LeftRows != 2 || rep.RightRows != 2 {
			t.Errorf("%s: a total of 20.00 in the source, 99 in the model: %+v; want DIFFERENT, 1 key differing of 2 rows each", table, rep)
		}
	}
	f("CREATE TABLE shop.orders (order_id BIGINT PRIMARY KEY, Total DECIMAL(12,2) NOT NULL)", config.Columns{
		{Name: "order_id", Path: "$.order_id", Type: "BIGINT"}, {Name: "total", Path: "$.Total", Type: "DECIMAL(18,4)"}})
	f("CREATE TABLE shop.orders (Order_ID BIGINT PRIMARY KEY, total DECIMAL(12,2) NOT NULL)", config.Columns{
		{Name: "order_id", Path: "$.Order_ID", Type: "BIGINT"}, {Name: "total", Path: "$.total", Type: "DECIMAL(18,4)"}})
}
