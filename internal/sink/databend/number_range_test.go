package databend_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A number past a double's range anywhere in a row (1e999, an integer of
// 400 digits) does not fail the row: databend-query's serde_json is built
// with arbitrary_precision (the jsonb crate's default features, Cargo.toml
// [features] default = [..., "arbitrary_precision"] ->
// serde_json/arbitrary_precision; databend's Cargo.toml takes jsonb with
// its defaults, and Cargo unifies the feature), so serde_json::from_slice
// in COPY's NDJSON reader (storages/stage read/row_based/formats/ndjson/
// block_builder.rs, read_row) keeps such a number as its text (serde_json
// tests/test.rs: "1e999" parses to Number "1e+999" under
// arbitrary_precision) and no NumberOutOfRange is raised. Into a VARIANT,
// jsonb::Value::from (jsonb src/from.rs) finds no u64, i64, i128, u128,
// and as_f64 (serde_json number.rs: parse, filter is_finite) gives none:
// "If the value is NaN or Infinity, fallback to NULL". The row is stored,
// the number as null; nothing is dead-lettered.
func TestRawNumberPastDoubleIsStoredAsNull(t *testing.T) {
	srv, loaded, rows := loadRawValues(t, `{"o": 0}`, `{"o": 1, "x": 1e999}`, `{"o": 2, "n": 1`+strings.Repeat("0", 400)+`}`, `{"o": 3, "y": [-1E+400]}`)
	stored := map[int64]string{}
	for o, row := range rows {
		stored[o] = string(row["raw_data"])
	}
	want := map[int64]string{1: `"x":null`, 2: `"n":null`, 3: `"y":[null]`}
	for o := int64(0); o < 4; o++ {
		raw, ok := stored[o]
		if !ok {
			t.Errorf("offset %d not stored: Databend stores the row", o)
			continue
		}
		if w := want[o]; w != "" && !strings.Contains(strings.ReplaceAll(raw, " ", ""), w) {
			t.Errorf("offset %d stored raw_data %s, want %s in it (jsonb: a number past a double is null)", o, raw, w)
		}
	}
	if dlq := dlqRows(t, srv); len(dlq) != 0 {
		t.Errorf("%d dead letters, want none", len(dlq))
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 4 || loaded.Ranges[0].DLQ != 0 {
		t.Errorf("loaded %+v, want 4 rows and no dead letter", loaded.Ranges)
	}
}

// In transform mode a number past a double's range in a field of no
// column is parsed (arbitrary_precision, above) and ignored: the row is
// stored. Into a DOUBLE column it fails the row (json_ast.rs read_float:
// as_f64 gives none, "Incorrect json number").
func TestTransformNumberPastDoubleInAnyField(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id", "amount"}, []string{"BIGINT", "DOUBLE"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10, `{"id": 1}`, `{"id": 2, "junk": 1e999}`, `{"id": 3, "amount": 1e999}`)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range srv.Rows("orders") {
		ids = append(ids, string(r["id"]))
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"1", "2"}) {
		t.Errorf("stored ids %v, want 1 and 2 (3's amount is past a double)", ids)
	}
	if n := len(srv.Rows("orders_dlq")); n != 1 {
		t.Errorf("%d dead letters, want 1 (offset 12)", n)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v, want 2 rows and 1 dead letter", loaded.Ranges)
	}
}
