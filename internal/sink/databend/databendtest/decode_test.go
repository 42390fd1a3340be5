package databendtest

import (
	"strings"
	"testing"
)

// copyRow is what COPY stores in column c of type typ for the NDJSON line
// (the column's JSON, "" when absent) or why it rejects the row.
func copyRow(t *testing.T, typ, line string) (stored, reason string) {
	t.Helper()
	tb := &table{cols: []string{"c"}, types: []string{typ}, lenient: true}
	rows, _, err := parseRows(tb, []byte(line+"\n"))
	if err != nil {
		return "", err.Error()
	}
	if reason := (&Server{}).rowError("t", tb, rows[0]); reason != "" {
		return "", reason
	}
	return string(rows[0]["c"]), ""
}

// The fake's COPY stores what databend-query's NDJSON reader stores
// (formats field_decoder/json_ast.rs, expression utils/serialize.rs
// read_decimal_from_json, default numeric_cast_option "rounding"), and
// refuses what it refuses.
func TestCopyDecodesFieldsAsDatabend(t *testing.T) {
	f := func(typ, line, want, wantErr string) {
		t.Helper()
		got, reason := copyRow(t, typ, line)
		if wantErr != "" {
			if !strings.Contains(reason, wantErr) {
				t.Errorf("%s into %s: stored %q (reason %q), want refused with %q", line, typ, got, reason, wantErr)
			}
			return
		}
		if reason != "" || got != want {
			t.Errorf("%s into %s: stored %q (reason %q), want %q", line, typ, got, reason, want)
		}
	}
	// read_int: a number with a fraction is rounded, not refused.
	f("INT", `{"c":1.5}`, "2", "")
	f("BIGINT", `{"c":-2.5}`, "-3", "")
	f("INT", `{"c":1e2}`, "100", "")
	f("INT", `{"c":7}`, "7", "")
	f("INT", `{"c":"12"}`, "", "Incorrect json value, must be number")
	f("INT", `{"c":true}`, "", "Incorrect json value, must be number")
	f("TINYINT", `{"c":300}`, "", "Incorrect json number 300")
	f("TINYINT", `{"c":127}`, "127", "")
	// An integer past i64 and u64 is serde_json's f64 (no
	// arbitrary_precision), rounded and cast: one just below i64's least
	// is that least, one past u64 is refused.
	f("BIGINT", `{"c":-9223372036854775809}`, "-9223372036854775808", "")
	f("BIGINT UNSIGNED", `{"c":18446744073709551616}`, "", "Incorrect json number")
	f("BIGINT UNSIGNED", `{"c":18446744073709551615}`, "18446744073709551615", "")
	// read_decimal_from_json: a number with a fraction goes through f64
	// and is truncated; a string is read exactly and rounded.
	f("DECIMAL(10, 2)", `{"c":12345.678}`, `"12345.67"`, "")
	f("DECIMAL(10, 2)", `{"c":0.29}`, `"0.28"`, "")
	f("DECIMAL(10, 2)", `{"c":"12345.678"}`, `"12345.68"`, "")
	f("DECIMAL(10, 2)", `{"c":3}`, `"3.00"`, "")
	f("DECIMAL(10, 2)", `{"c":123456789}`, "", "Decimal overflow")
	// An integer past u64 is serde_json's f64 too (no arbitrary_precision).
	f("DECIMAL(38, 0)", `{"c":123456789012345678901234}`, `"123456789012345685803008"`, "")
	// read_bool, read_array.
	f("BOOLEAN", `{"c":1}`, "", "Incorrect boolean value")
	f("ARRAY(INT)", `{"c":[1,2.5]}`, "[1,3]", "")
	// A null element: NULL in a nullable element (the default,
	// ARRAY(STRING) NOT NULL too: read_nullable); into an element
	// declared NOT NULL, read_string writes the text "null" and the
	// other readers refuse it.
	f("ARRAY(STRING)", `{"c":["a",null]}`, `["a",null]`, "")
	f("ARRAY(STRING) NOT NULL", `{"c":[null]}`, `[null]`, "")
	f("ARRAY(STRING NOT NULL)", `{"c":["a",null]}`, `["a","null"]`, "")
	f("ARRAY(INT NOT NULL)", `{"c":[1,null]}`, "", "Incorrect json value, must be number")
	// read_tuple: an object's values by the fields' names, in any case
	// (databend#19916); an array's by place.
	f("TUPLE(A STRING, B INT)", `{"c":{"b":1.5,"a":"x"}}`, `["x",2]`, "")
	f("TUPLE(a STRING, b INT)", `{"c":{"A":"x","B":3}}`, `["x",3]`, "")
	f("TUPLE(STRING, INT)", `{"c":["x",3]}`, `["x",3]`, "")
	f("TUPLE(A STRING, B INT)", `{"c":{"x":1,"b":2}}`, "", "missing field a")
	f("TUPLE(A STRING, B INT)", `{"c":{"a":"x"}}`, "", "expect 2 values, but get 1 values")
	f("ARRAY(ARRAY(STRING NOT NULL))", `{"c":[[null],null]}`, `[["null"],null]`, "")
	// An integer into a DATE is days, into a TIMESTAMP seconds,
	// milliseconds or microseconds by its size; out of range, the least
	// value (types/date.rs clamp_date, clamp_timestamp).
	f("DATE", `{"c":3000000}`, "-719162", "")
	f("DATE", `{"c":19000}`, "19000", "")
	f("TIMESTAMP", `{"c":300000000000000000}`, "-62135596800000000", "")
	// A timestamp with its offset is that instant.
	f("TIMESTAMP", `{"c":"2026-01-02T10:00:00+02:00"}`, "1767340800000000", "")
	// Fields match columns whatever their case (the decoder's
	// ident_case_sensitive is false); a key given twice keeps its last
	// value (serde_json's map insert).
	f("INT", `{"C":5}`, "5", "")
	f("INT", `{"c":1,"c":2}`, "2", "")
	f("INT", `{"c":1,"C":2}`, "2", "")
}

// DESC shows a type without the NULLs of any level (interpreters
// util.rs generate_desc_schema: remove_recursive_nullable).
func TestDescShowsNoNullability(t *testing.T) {
	for typ, want := range map[string]string{
		"ARRAY(STRING NOT NULL)":                "ARRAY(STRING)",
		"ARRAY(STRING) NOT NULL":                "ARRAY(STRING)",
		"NULLABLE(ARRAY(NULLABLE(INT)))":        "ARRAY(INT)",
		"MAP(STRING, ARRAY(INT NULL) NOT NULL)": "MAP(STRING, ARRAY(INT))",
		"DECIMAL(10, 2)":                        "DECIMAL(10, 2)",
	} {
		if got := descType(typ); got != want {
			t.Errorf("DESC of %s: %s, want %s", typ, got, want)
		}
	}
}

// system.columns' type shows the nullability of every level (schema.rs
// wrapped_display), nullable unless declared NOT NULL (resolve_type_name;
// a map's key never).
func TestColumnTypesShowNullability(t *testing.T) {
	for typ, want := range map[string]string{
		"ARRAY(STRING)":                     "Nullable(Array(Nullable(String)))",
		"ARRAY(STRING) NOT NULL":            "Array(Nullable(String))",
		"ARRAY(STRING NOT NULL)":            "Nullable(Array(String))",
		"MAP(STRING, BIGINT NOT NULL)":      "Nullable(Map(String, Int64))",
		"TUPLE(A INT, B STRING NOT NULL)":   "Nullable(Tuple(Nullable(Int32), String))",
		"DECIMAL(10, 2) NOT NULL":           "Decimal(10, 2)",
		"ARRAY(ARRAY(DOUBLE NOT NULL))":     "Nullable(Array(Nullable(Array(Float64))))",
		"NULLABLE(ARRAY(VARCHAR NOT NULL))": "Nullable(Array(String))",
	} {
		if got := wrappedDisplay(typ); got != want {
			t.Errorf("type of %s: %s, want %s", typ, got, want)
		}
	}
}
