package databend_test

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A number past FLOAT's range (1e39), as a FLOAT column's field or an
// ARRAY(FLOAT)'s element, is dead-lettered by DuckDB's transform (since
// 2026-12-07: its cast would store infinity, and TRY_CAST of [1e39] to
// FLOAT[] nulls the element). COPY reads it as the f64 1e39 and
// read_float casts that to f32 with num_traits (`f as f32`), which
// saturates to infinity: Databend stored infinity, another value than
// sent, with no error to dead-letter. A number in range, FLT_MAX's
// shortest text included, and one that rounds to 0 are stored.
func TestTransformFloatColumnDeadLettersANumberPastItsRange(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("events", []string{"id", "f", "fs", "d"}, []string{"BIGINT", "FLOAT", "ARRAY(FLOAT)", "DOUBLE"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "events", Prefix: "tl/", Transform: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent := []string{
		`{"id": 1, "f": 1.5}`,
		`{"id": 2, "f": 1e39}`,
		`{"id": 3, "f": -1e39}`,
		`{"id": 4, "f": 3.4028235e38}`,
		`{"id": 5, "fs": [1.5, 1e39]}`,
		`{"id": 6, "d": 1e300, "f": 1e-46}`,
		`{"id": 7, "fs": [-3.4028235e38, 0]}`,
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 0, sent...)))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range srv.Rows("events") {
		ids = append(ids, string(r["id"]))
	}
	sort.Strings(ids)
	if want := []string{"1", "4", "6", "7"}; !slices.Equal(ids, want) {
		t.Errorf("stored ids %v, want %v (1e39 into FLOAT dead-lettered, as DuckDB's transform does)", ids, want)
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].DLQ != 3 {
		t.Errorf("loaded %+v, want 3 dead letters", loaded.Ranges)
	}
}
