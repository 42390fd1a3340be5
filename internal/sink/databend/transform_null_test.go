package databend_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A null into a column declared NOT NULL: COPY's NDJSON reader takes a
// field's null as NULL_FIELD_AS says, NULL unless the FILE_FORMAT says
// otherwise (meta/app principal/file_format.rs, NdJsonFileFormatParams::
// try_create), and a column that is not nullable refuses it
// (storages/stage read/row_based/formats/ndjson/block_builder.rs:
// ColumnDecodeError "null value is not allowed for non-nullable field").
// The row is dead-lettered with the reason and the rest of the file is
// loaded; the table never holds a NULL in its NOT NULL column.
func TestTransformNullIntoNotNullColumnIsDeadLettered(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("orders", []string{"id", "name"}, []string{"BIGINT", "VARCHAR NOT NULL"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "orders", Prefix: "tl/", Transform: true, Zstd: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 10,
		`{"id": 1, "name": "a"}`, `{"id": 2, "name": null}`, `{"id": 3, "name": "c"}`)))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for _, r := range srv.Rows("orders") {
		stored[string(r["id"])] = string(r["name"])
	}
	if len(stored) != 2 || stored["1"] != `"a"` || stored["3"] != `"c"` {
		t.Errorf("stored %v, want ids 1 and 3 (a, c) and not id 2, whose null its NOT NULL column refuses", stored)
	}
	dlq := srv.Rows("orders_dlq")
	if len(dlq) != 1 {
		t.Fatalf("%d dead letters, want 1 (offset 11)", len(dlq))
	}
	var o int64
	_ = json.Unmarshal(dlq[0]["offset"], &o)
	if o != 11 {
		t.Errorf("dead letter of offset %d, want 11", o)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != 2 || loaded.Ranges[0].DLQ != 1 {
		t.Errorf("loaded %+v, want 2 rows and 1 dead letter", loaded.Ranges)
	}
}
