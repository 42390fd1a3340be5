package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// `tracelake genai rebuild` on Databend reads the whole spans table with
// a SELECT without LIMIT, then replaces genai_operations with what it
// derived. An administrator's SET GLOBAL max_result_rows (scope Both,
// settings/src/settings_default.rs) makes databend-query add LIMIT
// max_result_rows to such a query (Planner::add_max_rows_limit,
// sql/src/planner/planner.rs): the read is cut silently and the rebuild
// replaces the operations of every span with those of the first few.
func TestGenAIRebuildReadIsWholeUnderMaxResultRows(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	t.Cleanup(srv.Close)
	srv.CreateTable("otel_spans", []string{"span_id", "kpartition"}, []string{"VARCHAR", "BIGINT"})
	for i := range 3 {
		srv.AppendRow("otel_spans", databendtest.Row{"span_id": json.RawMessage(fmt.Sprintf(`"s%d"`, i)), "kpartition": json.RawMessage("0")})
	}
	srv.Set(func() { srv.GlobalSettings = map[string]string{"max_result_rows": "1"} })
	snk, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "otel_spans"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cols := []duckdbsink.Column{{Name: "span_id", Type: "VARCHAR"}, {Name: "kpartition", Type: "BIGINT"}}
	if err := copyDatabendRows(context.Background(), snk, db, "otel_spans", cols, ""); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM otel_spans").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("the rebuild read %d of the table's 3 spans", n)
	}
}
