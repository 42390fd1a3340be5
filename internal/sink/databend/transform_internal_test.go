package databend

import (
	"fmt"
	"strings"
	"testing"
)

// Each DESC type is checked as the column's decoder reads it: integers
// (top level, in arrays, maps and tuples) are refused where Databend
// would round them, decimals' numbers are staged as their text, other
// types pass as sent.
func TestStageableObjectByColumnType(t *testing.T) {
	f := func(typ, obj, want, wantReason string) {
		t.Helper()
		cols := []userColumn{{name: "c", typ: parseColType(typ)}}
		got, changed, reason := stageableObject([]byte(obj), cols)
		if wantReason != "" {
			if !strings.Contains(reason, wantReason) {
				t.Errorf("%s into %s: staged %s, reason %q; want refused with %q", obj, typ, got, reason, wantReason)
			}
			return
		}
		if reason != "" || string(got) != want || changed != (want != obj) {
			t.Errorf("%s into %s: staged %s (changed %v, reason %q), want %s", obj, typ, got, changed, reason, want)
		}
	}
	f("INT", `{"c": 1.5}`, "", "would be stored as 2")
	f("BIGINT UNSIGNED", `{"c": 0.5e0}`, "", "would be stored as 1")
	f("INT", `{"c": 1e2, "d": 1.5}`, `{"c": 1e2, "d": 1.5}`, "")
	f("SMALLINT", `{"c": "1.5"}`, `{"c": "1.5"}`, "") // Databend refuses a string: COPY's error
	f("DECIMAL(10, 2)", `{"a": 1, "c": 0.29, "b": 2}`, `{"a": 1, "c": "0.29", "b": 2}`, "")
	f("DECIMAL(10, 2)", `{"c": 29}`, `{"c": 29}`, "")
	f("DECIMAL(38, 0)", `{"c": 123456789012345678901234}`, `{"c": "123456789012345678901234"}`, "")
	f("DECIMAL(38, 0)", `{"c": -9223372036854775808}`, `{"c": -9223372036854775808}`, "")
	f("ARRAY(INT32)", `{"c": [1, 2.0, 3]}`, `{"c": [1, 2.0, 3]}`, "")
	f("ARRAY(INT32)", `{"c": [1, 2.5]}`, "", "element 2: 2.5")
	f("ARRAY(DECIMAL(5, 1))", `{"c": [1.25]}`, `{"c": ["1.25"]}`, "")
	f("MAP(STRING, INT64)", `{"c": {"a": 1, "b": 0.5}}`, "", "would be stored as 1")
	f("TUPLE(A STRING, B INT32)", `{"c": {"a": 2.5, "b": 1.5}}`, "", "element 2: 1.5")
	f("TUPLE(A STRING, B DECIMAL(5, 1))", `{"c": {"B": 1.5, "a": 2.5}}`, `{"c": {"B":"1.5","a":2.5}}`, "")
	f("TUPLE(INT32, STRING)", `{"c": [0.5, 1.5]}`, "", "element 1: 0.5")
	f("NULLABLE(INT32)", `{"c": 2.5}`, "", "would be stored as 3")
	f("VARIANT", `{"c": 1.5, "C": 2}`, "", "given twice")
	f("DOUBLE", `{"c": 1.5}`, `{"c": 1.5}`, "")
	f("TIMESTAMP", `{"c": 1767340800}`, `{"c": 1767340800}`, "")
	f("TIMESTAMP", `{"c": 300000000000000000}`, "", "out of Databend's TIMESTAMP range")
	f("DATE", `{"c": 19000}`, `{"c": 19000}`, "")
	f("DATE", `{"c": 3000000}`, "", "out of Databend's DATE range")
}

// databend-query reads a tuple given as an object by name, in any case
// (json_ast.rs read_tuple, object_value, since databend#19916), so each
// member is checked against the type of the field it names: by
// position, a member written in another order was checked against
// another field's type (its 1.5 stored as 2, its 0.29 as 0.28).
func TestStageableObjectChecksATupleObjectByName(t *testing.T) {
	f := func(typ, obj, want, wantReason string) {
		t.Helper()
		cols := []userColumn{{name: "c", typ: parseColType(typ)}}
		got, _, reason := stageableObject([]byte(obj), cols)
		if wantReason != "" {
			if !strings.Contains(reason, wantReason) {
				t.Errorf("%s into %s: staged %s, reason %q; want refused with %q", obj, typ, got, reason, wantReason)
			}
			return
		}
		if reason != "" || string(got) != want {
			t.Errorf("%s into %s: staged %s (reason %q), want %s", obj, typ, got, reason, want)
		}
	}
	f("TUPLE(A STRING, B INT32)", `{"c": {"b": 1.5, "a": "x"}}`, "", "element 1: 1.5")
	f("TUPLE(A STRING, B INT32)", `{"c": {"B": 1.5, "a": "x"}}`, "", "element 1: 1.5")
	f("TUPLE(A STRING, B DECIMAL(10, 2))", `{"c": {"b": 0.29, "a": "x"}}`, `{"c": {"b":"0.29","a":"x"}}`, "")
	f("TUPLE(A DECIMAL(10, 2), B STRING)", `{"c": {"b": 0.29, "a": "x"}}`, `{"c": {"b": 0.29, "a": "x"}}`, "")
	f("TUPLE(1 INT32, 2 INT32)", `{"c": {"2": 1.5, "1": 2}}`, "", "element 1: 1.5")
	f("TUPLE(A INT32, B INT32)", `{"c": {"x": 1.5, "y": 2}}`, `{"c": {"x": 1.5, "y": 2}}`, "") // COPY's "missing field a"
}

// An integer past i64 and u64 is a double to COPY's read_int (serde_json
// without arbitrary_precision), rounded: one just below i64's least into
// a BIGINT would be stored as that least, so it is dead-lettered.
func TestStageableObjectRefusesAWideIntegerCOPYWouldRound(t *testing.T) {
	for obj, want := range map[string]string{
		`{"c": -9223372036854775809}`: "would be stored as -9223372036854775808",
		`{"c": -9223372036854775808}`: "",
		`{"c": 9223372036854775807}`:  "",
	} {
		_, _, reason := stageableObject([]byte(obj), []userColumn{{name: "c", typ: parseColType("BIGINT")}})
		if want == "" && reason != "" || !strings.Contains(reason, want) {
			t.Errorf("%s into BIGINT: reason %q, want %q", obj, reason, want)
		}
	}
}

// COPY matches a field to a column by Rust's to_lowercase of both
// (ndjson block_builder.rs normalize_field_name, object_values_by_key),
// not Go's strings.ToLower: İ lowers to i and a combining dot (so "İD"
// is not the column id, and a 1.5 there is not COPY's to round), and a
// word's last Σ to ς (so a field ΟΔΟΣ is the column ΟΔΟΣ's, whose 1.5
// COPY would round).
func TestStageableObjectMatchesFieldsAsCOPYLowercases(t *testing.T) {
	desc := func(name, typ string) []userColumn {
		return readUserColumns(&result{Rows: [][]*string{{&name, &typ}}})
	}
	for _, c := range []struct {
		cols       []userColumn
		obj, why   string
		wantStaged bool
	}{
		{desc("id", "BIGINT"), `{"İD": 1.5, "id": 2}`, "", true},
		{desc("ΟΔΟΣ", "BIGINT"), `{"ΟΔΟΣ": 1.5}`, "would be stored as 2", false},
		{desc("ΟΔΟΣ", "BIGINT"), `{"οδος": 1.5}`, "would be stored as 2", false},
		{desc("ΣΑ", "BIGINT"), `{"σα": 1.5}`, "would be stored as 2", false},
	} {
		got, _, reason := stageableObject([]byte(c.obj), c.cols)
		if c.wantStaged && (reason != "" || string(got) != c.obj) || !c.wantStaged && !strings.Contains(reason, c.why) || !c.wantStaged && c.why == "" {
			t.Errorf("%s into %+v: staged %s, reason %q; want staged %v, reason %q", c.obj, c.cols, got, reason, c.wantStaged, c.why)
		}
	}
}

// BenchmarkStageableObject is transform mode's check before staging, on
// ~1 KB objects of five columns and a field that is none (docs/BENCHMARKS.md,
// "2026-12-06, transform_member_walk").
func BenchmarkStageableObject(b *testing.B) {
	cols := []userColumn{{name: "id", typ: parseColType("BIGINT")}, {name: "price", typ: parseColType("DECIMAL(10, 2)")},
		{name: "name", typ: parseColType("VARCHAR")}, {name: "tags", typ: parseColType("ARRAY(INT32)")}, {name: "at", typ: parseColType("TIMESTAMP")}}
	var lines [][]byte
	for i := range 1000 {
		lines = append(lines, fmt.Appendf(nil, `{"id":%d,"price":"12.50","name":"user %d","tags":[1,2,3],"at":"2026-12-06T10:00:00Z","extra":{"a":"%0900d","b":[1,2,{"c":"d"}]}}`, i, i, i))
	}
	b.SetBytes(int64(len(lines[0]) * len(lines)))
	for b.Loop() {
		for _, l := range lines {
			if _, _, reason := stageableObject(l, cols); reason != "" {
				b.Fatal(reason)
			}
		}
	}
}

// A string column's values are rewritten only where COPY would store
// other text than DuckDB's transform: a number both write alike stays as
// sent (a column changed to a number type while tracelake runs, read at
// the next start, still takes it), the others are staged as DuckDB's text.
func TestStringColumnStagesOnlyWhatCOPYWritesOtherwise(t *testing.T) {
	str := parseColType("VARCHAR")
	for v, want := range map[string]string{
		`7`: ``, `1.5`: ``, `1e2`: ``, `true`: ``, `"x"`: ``, `null`: ``, `0`: ``, `18446744073709551615`: ``,
		`-0`: `"0"`, `1e22`: `"1e22"`, `123456789012345678.5`: `"123456789012345680.0"`,
		`12345678901234567890123`: `"12345678901234567890123"`, `1E400`: `"1E400"`,
		`{"a": [1.50, "\u0001"]}`: `"{\"a\":[1.5,\"\\u0001\"]}"`,
	} {
		got, reason := stageableValue([]byte(v), str)
		if string(got) != want || reason != "" {
			t.Errorf("%s: staged %s (%q), want %s", v, got, reason, want)
		}
	}
	// The elements of a list of strings, as DuckDB's cast of the field's
	// JSON to VARCHAR[] writes them (to_json of it gives this array).
	v := `["a", {"b": 1.50}, [1e22, "x"], -0, 1E400, true]`
	want := `["a","{\"b\":1.5}","[1e22,\"x\"]","0","1E400",true]`
	if got, reason := stageableValue([]byte(v), parseColType("ARRAY(STRING)")); string(got) != want || reason != "" {
		t.Errorf("%s: staged %s (%q), want %s", v, got, reason, want)
	}
}
