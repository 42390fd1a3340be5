package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/query"
)

// Dates print as dates, timestamps without a zone suffix, both in UTC.
func TestFormatCellTimes(t *testing.T) {
	f := func(v any, want string) {
		t.Helper()
		if got := formatCell(v); got != want {
			t.Errorf("formatCell(%v) = %q, want %q", v, got, want)
		}
	}
	f(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "2026-11-01")
	f(time.Date(2026, 11, 1, 10, 2, 3, 456000000, time.UTC), "2026-11-01 10:02:03.456")
	f(time.Date(2026, 11, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600)), "2026-11-01 11:00:00")
	f(nil, "NULL")
}

// One printer for every sql, standalone or through tracelake run (both
// read Arrow): numbers, decimals as DuckDB writes them, times in UTC,
// UUIDs and JSON as text, nested values as JSON, NULL.
func TestPrintQueryTypes(t *testing.T) {
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`SET TimeZone = 'Europe/Paris'`); err != nil {
		t.Fatal(err)
	}
	f := func(expr, want string) {
		t.Helper()
		var out bytes.Buffer
		if err := printQuery(context.Background(), &out, db, "SELECT "+expr+" AS v"); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if got := strings.Split(out.String(), "\n"); len(got) != 4 || got[1] != want || got[2] != "(1 rows)" {
			t.Errorf("%s printed\n%s\nwant the row %q", expr, out.String(), want)
		}
	}
	f("42::TINYINT", "42")
	f("-7::BIGINT", "-7")
	f("18446744073709551615::UBIGINT", "18446744073709551615")
	f("1.1::FLOAT", "1.1")
	f("2.5::DOUBLE", "2.5")
	f("true", "true")
	f("'tab\tand\nnewline'", `tab\tand\nnewline`)
	f("'\\x01a'::BLOB", `"\x01a"`)
	f("1.50::DECIMAL(10,2)", "1.5")
	f("0.004500000000::DECIMAL(38,12)", "0.0045")
	f("100::DECIMAL(10,2)", "100")
	f("123456789012345678901234567890::HUGEINT", "123456789012345678901234567890")
	f("DATE '2026-11-01'", "2026-11-01")
	f("TIMESTAMP '2026-11-01 10:02:03.456'", "2026-11-01 10:02:03.456")
	f("TIMESTAMP_NS '2026-11-01 10:02:03.456789123'", "2026-11-01 10:02:03.456789")
	f("TIMESTAMPTZ '2026-11-01 12:00:00+01'", "2026-11-01 11:00:00")
	f("'00000000-0000-0000-0000-000000000001'::UUID", "00000000-0000-0000-0000-000000000001")
	f(`'{"b":1,"a":[1,2.5]}'::JSON`, `{"b":1,"a":[1,2.5]}`)
	f("[1, 2]", "[1,2]")
	f("{'x': 1, 'y': 'z'}", `{"x":1,"y":"z"}`)
	f("NULL::INTEGER", "NULL")
	f("repeat('x', 200)", strings.Repeat("x", 117)+"...")
}

// A query the read path refuses by its rules says what the rules are; a
// query DuckDB refuses as it would anywhere (a column misspelt) gets
// DuckDB's answer alone, not rules that had nothing to do with it.
func TestPrintReadExplainsOnlyTheReadPathsRules(t *testing.T) {
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE otel_spans AS SELECT 'a' AS tenant_id, 1 AS v`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reader, err := query.NewDuckDB(ctx, db, query.DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const rules = "sql takes one SELECT over the tables"
	var out bytes.Buffer
	err = printRead(ctx, &out, reader, "SELECT * FROM read_csv('/etc/passwd')", "", "here")
	if err == nil || !strings.Contains(err.Error(), rules) {
		t.Errorf("a table function: %v, want the read path's rules", err)
	}
	err = printRead(ctx, &out, reader, "SELECT model FROM otel_spans", "", "here")
	if err == nil || !strings.Contains(err.Error(), `"model" not found`) || strings.Contains(err.Error(), rules) {
		t.Errorf("a misspelt column: %v, want DuckDB's binder error alone", err)
	}
}
