package databend_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A field that drifts between a string, a number written every way, an
// object and an array, into one VARCHAR column, loaded in transform mode
// on DuckDB and on Databend (its test server decoding as databend-query's
// read_string): each sink must store the same text for each message, or
// dead-letter it on both. DuckDB writes a number as yyjson does (1e2 as
// "100.0", 1e22 as "1e22", 123456789012345678.5 as
// "123456789012345680.0") and an object or array as its JSON text;
// COPY writes a number as serde_json does ("1e+22",
// "1.2345678901234568e+17") and refuses an object or an array ("must be
// string"), which went to Databend's dead-letter table alone.
func TestTransformStringColumnStoresAlikeOnDuckDBAndDatabend(t *testing.T) {
	sent := []string{
		`{"id": 1, "note": "text"}`,
		`{"id": 2, "note": 7}`,
		`{"id": 3, "note": 1.50}`,
		`{"id": 4, "note": 1e2}`,
		`{"id": 5, "note": 1e22}`,
		`{"id": 6, "note": 123456789012345678.5}`,
		`{"id": 7, "note": 0.0000001}`,
		`{"id": 8, "note": true}`,
		`{"id": 9, "note": {"a": 1}}`,
		`{"id": 10, "note": [1, "x"]}`,
		`{"id": 11, "note": {"b": 1.50, "a": [1e2, -0.0, -0, 12345678901234567890123, 1E400, null, false], "b": {"c": "\u00e9/<>&\t\u0001\u001f\u007f\u2028\ud83d\ude00\"\\"}}}`,
		`{"id": 12, "note": 1e21}`,
		`{"id": 13, "note": 1e20}`,
		`{"id": 14, "note": 0.000001}`,
		`{"id": 15, "note": -1.5e-300}`,
		`{"id": 16, "note": -0}`,
		`{"id": 17, "note": 0.1000000000000000055511151231257827}`,
		`{"id": 18, "note": -12345678901234567890123}`,
		`{"id": 19, "note": 18446744073709551615}`,
		`{"id": 20, "note": 1E400}`,
		`{"id": 21, "note": {}}`,
		`{"id": 22, "note": [ ]}`,
		`{"id": 23, "note": null}`,
		`{"id": 24, "note": 0}`,
		`{"id": 25, "note": -0.0e5}`,
	}
	loadAlike(t, "VARCHAR", "VARCHAR", sent)
}

// A field that drifts between true, "true", "t", "yes", 1 and 0, into a
// BOOLEAN column: DuckDB's transform casts the field's text (TRY_CAST,
// TryCastStringBool: t, y, 1, yes, true and f, n, 0, no, false in any
// case), COPY takes a JSON boolean alone (json_ast.rs read_bool:
// "Incorrect boolean value"), so every other form went to Databend's
// dead-letter table alone.
func TestTransformBooleanColumnStoresAlikeOnDuckDBAndDatabend(t *testing.T) {
	var sent []string
	for i, v := range []string{`true`, `false`, `"true"`, `"TRUE"`, `"t"`, `"F"`, `"yes"`, `"no"`, `"y"`, `"n"`, `"1"`, `"0"`,
		`1`, `0`, `-0`, `2`, `1.0`, `" true"`, `"nope"`, `{"a": true}`, `[true]`, `null`} {
		sent = append(sent, `{"id": `+strconv.Itoa(i+1)+`, "note": `+v+`}`)
	}
	loadAlike(t, "BOOLEAN", "BOOLEAN", sent)
}

// loadAlike loads sent ({"id": n, "note": …}, ids 1… in order) in
// transform mode into a table (id BIGINT, note duckType) on DuckDB and
// (id BIGINT, note bendType) on Databend, and compares the rows each
// stored, note as text.
func loadAlike(t *testing.T, duckType, bendType string, sent []string) {
	t.Helper()
	duck, bend := loadBoth(t, duckType, bendType, sent)
	if len(duck) != len(bend) {
		t.Errorf("of %d messages DuckDB stored %d rows, Databend %d", len(sent), len(duck), len(bend))
	}
	for i := range sent {
		id := strconv.Itoa(i + 1)
		w, inDuck := duck[id]
		g, inBend := bend[id]
		if inDuck != inBend || w != g {
			t.Errorf("%s: DuckDB stored %q (%v), Databend %q (%v)", sent[i], w, inDuck, g, inBend)
		}
	}
}

// loadBoth loads sent as loadAlike does and returns, by id, the note
// each sink stored: DuckDB's as text (note::VARCHAR), Databend's as the
// test server holds it (a string's text, any other value's JSON).
func loadBoth(t *testing.T, duckType, bendType string, sent []string) (duck, bend map[string]string) {
	t.Helper()

	// DuckDB.
	dir := t.TempDir()
	d, err := duckdbsink.Open(duckdbsink.Options{Path: filepath.Join(dir, "t.duckdb"), StageDir: filepath.Join(dir, "stage"), Table: "events", Transform: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.DB().Exec(`CREATE TABLE events (id BIGINT, note ` + duckType + `)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	b := &sink.Batch{Ranges: []sink.Range{{TopicPartition: sink.TopicPartition{Topic: "events"}, First: 0, Last: int64(len(sent)) - 1, Records: int64(len(sent))}}}
	for i, v := range sent {
		b.Rows = envelope.AppendTransformRow(b.Rows, &kgo.Record{Topic: "events", Offset: int64(i), Value: []byte(v)}, envelope.ValueText)
	}
	f, err := d.Stage(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(ctx, []sink.File{f}); err != nil {
		t.Fatal(err)
	}
	duck = map[string]string{}
	rows, err := d.DB().Query(`SELECT id::VARCHAR, note::VARCHAR FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var note sql.NullString
		if err := rows.Scan(&id, &note); err != nil {
			t.Fatal(err)
		}
		duck[id] = note.String
	}
	rows.Close()

	// Databend.
	srv := databendtest.New("tl", "s3cret")
	defer srv.Close()
	srv.CreateTable("events", []string{"id", "note"}, []string{"BIGINT", bendType})
	s, err := databend.Open(databend.Options{DSN: srv.DSN(""), Table: "events", Prefix: "tl/", Transform: true, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, stage(t, s, transformBatch(0, 0, sent...))); err != nil {
		t.Fatal(err)
	}
	bend = map[string]string{}
	for _, r := range srv.Rows("events") {
		note := string(r["note"]) // a boolean's JSON, a string's text
		if r["note"] == nil || string(r["note"]) == "null" {
			note = ""
		}
		_ = json.Unmarshal(r["note"], &note)
		bend[string(r["id"])] = note
	}

	return duck, bend
}

// A field that is a number in one message and a string in the next, into
// a DOUBLE or a FLOAT column: DuckDB's transform casts the string's text
// (TryDoubleCast: spaces around it, a leading '+', '_' between digits,
// "1e2", ".5"), and COPY takes a JSON number alone (json_ast.rs
// read_float: "Incorrect json value, must be number"), so every such row
// went to Databend's dead-letter table alone. What DuckDB refuses ("",
// "0x10", "1,5", a number past the type's range) is dead-lettered on
// both. NaN and infinity, which DuckDB stores from their text, have no
// JSON number for COPY to read: dead-lettered on Databend alone, saying
// so.
func TestTransformFloatColumnsStoreStringsAlikeOnDuckDBAndDatabend(t *testing.T) {
	var sent []string
	for i, v := range []string{`1.5`, `"1.5"`, `" 1.5"`, `"1.5 "`, `"\t-2\n"`, `"+1.5"`, `"+-1"`, `".5"`, `"5."`, `"-.5e1"`, `"1e2"`,
		`"1_000"`, `"1_0.5"`, `"1e-400"`, `"-0"`, `"0.1"`, `"3.4028236e38"`, `"12345678901234567890"`, `"0.30000000000000004"`,
		`"1e400"`, `"0x10"`, `""`, `"  "`, `"1,5"`, `"1__0"`, `"1e"`, `"x"`, `"true"`, `true`} {
		sent = append(sent, `{"id": `+strconv.Itoa(i+1)+`, "note": `+v+`}`)
	}
	special := []string{`{"id": 1, "note": "nan"}`, `{"id": 2, "note": "-Infinity"}`, `{"id": 3, "note": " +INF"}`, `{"id": 4, "note": "nan(1)"}`}
	for _, typ := range []string{"DOUBLE", "FLOAT"} {
		t.Run(typ, func(t *testing.T) {
			bits := 64
			if typ == "FLOAT" {
				bits = 32
			}
			duck, bend := loadBoth(t, typ, typ, sent)
			for i := range sent {
				id := strconv.Itoa(i + 1)
				w, inDuck := duck[id]
				g, inBend := bend[id]
				if inDuck != inBend {
					t.Errorf("%s: DuckDB stored %q (%v), Databend %q (%v)", sent[i], w, inDuck, g, inBend)
					continue
				}
				if !inDuck {
					continue
				}
				wf, err1 := strconv.ParseFloat(w, bits)
				gf, err2 := strconv.ParseFloat(g, bits)
				if err1 != nil || err2 != nil || wf != gf || math.Signbit(wf) != math.Signbit(gf) {
					t.Errorf("%s: DuckDB stored %q, Databend %q", sent[i], w, g)
				}
			}
			duck, bend = loadBoth(t, typ, typ, special)
			if len(duck) != len(special) || len(bend) != 0 {
				t.Errorf("NaN and infinity: DuckDB stored %v (want all), Databend %v (want none: COPY has no JSON number for them)", duck, bend)
			}
		})
	}
}

// A JSON array holding null into an array column: DuckDB's transform
// stores a NULL element (its lists' elements are always nullable).
// Databend's element is nullable too unless declared NOT NULL
// (resolve_type_name wraps every level in Nullable; ARRAY(STRING) NOT
// NULL removes the outer one alone), and then COPY does not refuse the
// null: read_field_with_data_type hands it to read_string, which writes
// the text "null" (json_ast.rs). DESC shows ARRAY(STRING) for both, so
// the sink staged the null as it was, and Databend stored the text
// "null" for DuckDB's NULL, with no error. A NULL that Databend's column
// cannot hold must be dead-lettered instead.
func TestTransformNullArrayElementsStoreAlikeOrDeadLetter(t *testing.T) {
	sent := []string{
		`{"id": 1, "note": ["a", null]}`,
		`{"id": 2, "note": [null]}`,
		`{"id": 3, "note": ["a", "b"]}`,
		`{"id": 4, "note": []}`,
		`{"id": 5, "note": ["null"]}`,
	}
	for _, tc := range []struct {
		bendType   string
		deadLetter []string // ids Databend cannot store as DuckDB does
	}{
		{"ARRAY(STRING)", nil},
		{"ARRAY(STRING) NOT NULL", nil},
		{"ARRAY(STRING NOT NULL)", []string{"1", "2"}},
		{"ARRAY(STRING NOT NULL) NOT NULL", []string{"1", "2"}},
	} {
		t.Run(tc.bendType, func(t *testing.T) {
			duck, bend := loadBoth(t, "VARCHAR[]", tc.bendType, sent)
			for i := range sent {
				id := strconv.Itoa(i + 1)
				w, g := duck[id], bend[id]
				if g != "" {
					var elems []*string
					if err := json.Unmarshal([]byte(g), &elems); err != nil {
						t.Fatalf("%s: Databend stored %s", sent[i], g)
					}
					g = "["
					for j, e := range elems {
						if j > 0 {
							g += ", "
						}
						switch {
						case e == nil:
							g += "NULL"
						case *e == "null":
							g += "'null'" // DuckDB quotes a string that reads as NULL
						default:
							g += *e
						}
					}
					g += "]"
				}
				_, stored := bend[id]
				if slices.Contains(tc.deadLetter, id) {
					if stored {
						t.Errorf("%s: Databend stored %q, DuckDB %q; want it dead-lettered (Databend's element holds no NULL)", sent[i], g, w)
					}
					continue
				}
				if !stored || g != w {
					t.Errorf("%s: DuckDB stored %q, Databend %q (stored %v)", sent[i], w, g, stored)
				}
			}
		})
	}
}

// An object into a TUPLE column: databend-query's COPY gives each field
// the member of its name (json_ast.rs read_tuple, object_value, since
// databend#19916, before the commit the test server follows), as DuckDB's
// transform does for a STRUCT. The sink checked each member against the
// type of the field at its place instead, so a member written in
// another order went unchecked against its own field's type: 1.5 into
// the INT field b was stored as 2 (read_int rounds), and 0.29 into a
// DECIMAL(10, 2) field as 0.28 (read_decimal_from_json truncates), where
// DuckDB dead-letters the first and stores 0.29.
func TestTransformTupleObjectsStoreAlikeOnDuckDBAndDatabend(t *testing.T) {
	for _, tc := range []struct {
		duckType, bendType string
		sent               []string
	}{
		{"STRUCT(a VARCHAR, b INTEGER)", "TUPLE(a STRING, b INT)", []string{
			`{"id": 1, "note": {"b": 1.5, "a": "x"}}`,
			`{"id": 2, "note": {"a": "x", "b": 2}}`,
			`{"id": 3, "note": {"b": 3, "a": "y"}}`,
			`{"id": 4, "note": {"a": 1.5, "b": 4}}`,
		}},
		{"STRUCT(a VARCHAR, b DECIMAL(10, 2))", "TUPLE(a STRING, b DECIMAL(10, 2))", []string{
			`{"id": 1, "note": {"b": 0.29, "a": "x"}}`,
			`{"id": 2, "note": {"a": "x", "b": 12345.678}}`,
			`{"id": 3, "note": {"b": "0.29", "a": "z"}}`,
		}},
	} {
		t.Run(tc.bendType, func(t *testing.T) {
			duck, bend := loadBoth(t, tc.duckType, tc.bendType, tc.sent)
			for i := range tc.sent {
				id := strconv.Itoa(i + 1)
				w, inDuck := duck[id]
				g, inBend := bend[id]
				if inBend {
					var fields []any
					if err := json.Unmarshal([]byte(g), &fields); err != nil || len(fields) != 2 {
						t.Fatalf("%s: Databend stored %s", tc.sent[i], g)
					}
					g = fmt.Sprintf("{'a': %v, 'b': %v}", fields[0], fields[1])
				}
				if inDuck != inBend || w != g {
					t.Errorf("%s: DuckDB stored %q (%v), Databend %q (%v)", tc.sent[i], w, inDuck, g, inBend)
				}
			}
		})
	}
}
