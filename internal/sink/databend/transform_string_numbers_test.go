package databend_test

import (
	"context"
	"testing"

	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
)

// A field that is a string in one message and a number past 64 bits in
// the next, into a VARCHAR column: DuckDB's transform stores the number's
// digits (json_extract_string keeps an integer past 64 bits as written),
// but COPY parses it as an f64 (serde_json without arbitrary_precision)
// and read_string writes that double's text, so Databend stored
// 12345678901234567890123 as "1.2345678901234568e+22", another value,
// with no error to dead-letter.
func TestTransformStringColumnKeepsTheDigitsOfAWideInteger(t *testing.T) {
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("events", []string{"id", "note", "notes"}, []string{"BIGINT", "VARCHAR", "ARRAY(STRING)"})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "events", Prefix: "tl/", Transform: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	sent := []string{
		`{"id": 1, "note": "text"}`,
		`{"id": 2, "note": 7}`,
		`{"id": 3, "note": 12345678901234567890123}`,
		`{"id": 4, "note": -9223372036854775809}`,
		`{"id": 5, "note": 18446744073709551616}`,
		`{"id": 6, "note": 18446744073709551615}`,
		`{"id": 7, "notes": ["a", 99999999999999999999999]}`,
	}
	loaded, err := s.Load(context.Background(), stage(t, s, transformBatch(0, 0, sent...)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"1": `"text"`, "2": `"7"`, "3": `"12345678901234567890123"`, "4": `"-9223372036854775809"`,
		"5": `"18446744073709551616"`, "6": `"18446744073709551615"`, "7": `["a","99999999999999999999999"]`,
	}
	got := map[string]string{}
	for _, r := range srv.Rows("events") {
		v := string(r["note"])
		if string(r["id"]) == "7" {
			v = string(r["notes"])
		}
		got[string(r["id"])] = v
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("id %s: stored %s, want %s (as DuckDB's transform stores it)", id, got[id], w)
		}
	}
	if len(loaded.Ranges) != 1 || loaded.Ranges[0].Records != int64(len(sent)) || loaded.Ranges[0].DLQ != 0 {
		t.Errorf("loaded %+v, want %d rows and no dead letter", loaded.Ranges, len(sent))
	}
}
