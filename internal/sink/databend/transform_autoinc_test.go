package databend_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A table whose CREATE holds the word AUTOINCREMENT only in a column's
// name (or a COMMENT, a string DEFAULT) has no AUTOINCREMENT column: SHOW
// CREATE TABLE writes a column's AUTOINCREMENT as "AUTOINCREMENT (start,
// step) ORDER|NOORDER" after its type (service interpreters/
// interpreter_table_show_create.rs show_create_table_query; expression
// schema.rs AutoIncrementExpr::to_sql_string), and its name first. Its NOT
// NULL column without DEFAULT is still filled by COPY with its type's
// default (0) when the message lacks it (binder/default_expr.rs
// parse_and_bind: Scalar::default_value), so the message must be
// dead-lettered as for any other table.
func TestTransformMissingNotNullWithAutoincrementInAName(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id", "qty", "autoincrement_note"}, []string{"BIGINT", "INT NOT NULL", "VARCHAR"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10,
		`{"id": 1, "qty": 2}`, `{"id": 2, "autoincrement_note": "b"}`))); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Rows("orders") {
		if string(r["id"]) == "2" {
			t.Errorf("stored id 2 with qty %s: the message has no qty, a NOT NULL column without DEFAULT, and the table has no AUTOINCREMENT column", r["qty"])
		}
	}
	var reasons []string
	for _, r := range srv.Rows("orders_dlq") {
		var reason string
		_ = json.Unmarshal(r["error"], &reason)
		reasons = append(reasons, reason)
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], "qty") {
		t.Errorf("dead letters %q, want one naming column qty", reasons)
	}
}

// Only the AUTOINCREMENT column itself is exempt: another NOT NULL column
// without DEFAULT of the same table is filled with its type's default by
// COPY like any other (default_expr.rs parse_and_bind takes the
// auto-increment branch for the field holding auto_increment_expr only).
func TestTransformMissingNotNullBesideAutoincrementColumn(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id", "qty"}, []string{"BIGINT NOT NULL AUTOINCREMENT (0, 1) ORDER", "INT NOT NULL"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10,
		`{"qty": 2}`, `{"id": 7}`))); err != nil {
		t.Fatal(err)
	}
	rows := srv.Rows("orders")
	if len(rows) != 1 || string(rows[0]["qty"]) != "2" {
		t.Errorf("stored %v, want only the row with qty 2 (the message without its id is not refused for it)", rows)
	}
	var reasons []string
	for _, r := range srv.Rows("orders_dlq") {
		var reason string
		_ = json.Unmarshal(r["error"], &reason)
		reasons = append(reasons, reason)
	}
	if len(reasons) != 1 || !strings.Contains(reasons[0], "qty") {
		t.Errorf("dead letters %q, want one naming column qty", reasons)
	}
}
