package databend_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A message without a field for a column declared NOT NULL with no
// DEFAULT: COPY's MISSING_FIELD_AS = FIELD_DEFAULT fills the column with
// its type's default value (sql binder/default_expr.rs parse_and_bind:
// Scalar::default_value, 0 or the empty string, for a field without a default
// expression; storages/stage read/load_context.rs push_default_value),
// so Databend stored a qty of 0 and an empty note that the message never
// had, with no error; DuckDB's transform dead-letters such a row (its
// NOT NULL constraint). A column with a DEFAULT, or a nullable one, is
// filled as both sinks fill it.
func TestTransformMissingNotNullFieldIsDeadLettered(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id", "qty", "note"}, []string{"BIGINT", "INT NOT NULL", "VARCHAR NOT NULL"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10,
		`{"id": 1, "qty": 2, "note": "a"}`, `{"id": 2, "note": "b"}`, `{"id": 3, "QTY": 4}`, `{"qty": 5, "note": "c"}`)))
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, r := range srv.Rows("orders") {
		stored = append(stored, string(r["qty"])+"/"+string(r["note"]))
	}
	slices.Sort(stored)
	if !slices.Equal(stored, []string{`2/"a"`, `5/"c"`}) {
		t.Errorf("stored (qty/note) %v, want 2/\"a\" and 5/\"c\" only: ids 2 and 3 lack a NOT NULL column's field", stored)
	}
	dead := map[int64]string{}
	for _, r := range srv.Rows("orders_dlq") {
		var o int64
		var reason string
		_ = json.Unmarshal(r["offset"], &o)
		_ = json.Unmarshal(r["error"], &reason)
		dead[o] = reason
	}
	for o, col := range map[int64]string{11: "qty", 12: "note"} {
		if !strings.Contains(dead[o], col) {
			t.Errorf("offset %d: dead letter %q, want one naming column %s", o, dead[o], col)
		}
	}
	if len(dead) != 2 {
		t.Errorf("%d dead letters, want 2: %v", len(dead), dead)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 2 {
		t.Errorf("loaded %+v, want 2 rows and 2 dead letters", loaded.Ranges)
	}
}
