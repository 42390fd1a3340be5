package databend_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// In transform mode a value Databend would store as another one is not
// stored silently wrong: a number with a fraction into an integer column
// (or element) is dead-lettered, as DuckDB's transform does; a decimal
// number is stored exactly rounded at its scale, as DuckDB stores it,
// not truncated through a double; a field given twice is dead-lettered
// (Databend takes its last value, DuckDB its first).
func TestTransformStoresValuesAsSentOrDeadLetters(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id", "price", "qtys"}, []string{"BIGINT", "DECIMAL(10, 2)", "ARRAY(INT32)"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent := []string{
		`{"id": 1, "price": 0.29}`,
		`{"id": 1.5, "price": 1}`,
		`{"id": 3, "price": 12345.678, "qtys": [1, 2e0]}`,
		`{"id": 4, "qtys": [1, 2.5]}`,
		`{"id": 5, "ID": 6}`,
		`{"id": 7.0, "price": "2.345"}`,
		`{"id": 9007199254740993.0}`,
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10, sent...)))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, r := range srv.Rows("orders") {
		stored[string(r["id"])] = string(r["price"])
	}
	want := map[string]string{"1": `"0.29"`, "3": `"12345.68"`, "7": `"2.35"`}
	if len(stored) != len(want) {
		t.Errorf("stored %v, want %v", stored, want)
	}
	for id, price := range want {
		if stored[id] != price {
			t.Errorf("id %s: price %q, want %q (all: %v)", id, stored[id], price, stored)
		}
	}
	dead := map[int64]string{}
	for _, r := range srv.Rows("orders_dlq") {
		var o int64
		var reason, value string
		_ = json.Unmarshal(r["offset"], &o)
		_ = json.Unmarshal(r["error"], &reason)
		_ = json.Unmarshal(r["value"], &value)
		v, _ := base64.StdEncoding.DecodeString(value)
		if want := sent[o-10]; string(v) != want {
			t.Errorf("offset %d: dead letter's value %s, want %s", o, v, want)
		}
		dead[o] = reason
	}
	for o, why := range map[int64]string{11: "would be stored as 2", 13: "would be stored as 3", 14: "given twice", 16: "would be stored as 9007199254740992"} {
		if !strings.Contains(dead[o], why) {
			t.Errorf("offset %d: dead letter %q, want one saying %q", o, dead[o], why)
		}
	}
	if len(dead) != 4 {
		t.Errorf("%d dead letters, want 4: %v", len(dead), dead)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 3 || loaded.Ranges[0].DLQ != 4 {
		t.Errorf("loaded %+v, want 3 rows and 4 dead letters", loaded.Ranges)
	}
}

// The pipeline retries a failed Stage with the same batch (a dead-letter
// file's upload failing, say). An object dead-lettered before staging
// must be one dead letter after the retry, not one per attempt: the
// batch's own dead-letter rows are not Stage's to grow.
func TestTransformStageRetryDeadLettersAnObjectOnce(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id"}, []string{"BIGINT"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := transformBatch(0, 0, `{"id": 1}`, `{"id": 1.5}`, `{"id": 3}`)
	srv.Set(func() {
		srv.UploadStatus = func(path string) int {
			if strings.Contains(path, ".dlq") {
				return 503
			}
			return 0
		}
	})
	if _, err := s.Stage(context.Background(), b); err == nil {
		t.Fatal("stage with the dead-letter file's upload failing: no error")
	}
	srv.Set(func() { srv.UploadStatus = nil })
	loaded, err := s.Load(context.Background(), stage(t, s, b))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Rows("orders_dlq")); n != 1 {
		t.Errorf("%d dead letters of offset 1, want 1", n)
	}
	if n := len(srv.Rows("orders")); n != 2 {
		t.Errorf("%d rows stored, want 2", n)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v, want 2 rows and 1 dead letter", loaded.Ranges)
	}
}
