package query

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A query runs as DuckDB's parse of it printed back, and DuckDB prints a
// DOUBLE or FLOAT constant as a bare number (1e3 as 1000.0), which it
// parses again as a DECIMAL: read through the read path, a literal in
// scientific notation changed type, and every value computed from it
// with it (0.1e0 + 0.2e0 = 0.3e0 is false for doubles, true for
// decimals). The answer must be DuckDB's own for the same SQL.
func TestFloatingPointLiteralsKeepTheirType(t *testing.T) {
	l := newLake(t)
	const q = `SELECT typeof(1e3) AS t, 0.1e0 + 0.2e0 = 0.3e0 AS sum_is, [1.5e0] AS l, 1e2 AS c FROM otel_spans WHERE duration_ms = 10`
	var typ string
	var sumIs bool
	if err := l.db.QueryRow(`SELECT typeof(1e3), 0.1e0 + 0.2e0 = 0.3e0`).Scan(&typ, &sumIs); err != nil {
		t.Fatal(err)
	}
	if typ != "DOUBLE" || sumIs {
		t.Fatalf("DuckDB itself: typeof(1e3) %s, 0.1e0 + 0.2e0 = 0.3e0 %v; the test assumes DOUBLE, false", typ, sumIs)
	}
	want := []string{"DOUBLE|false|[1.5]|100"}
	for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
		got, err := l.rows(t, s, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != want[0] {
			t.Errorf("%v: %v, want %v (DuckDB's own answer)", s, got, want)
		}
	}
	rr, err := l.reader.Query(context.Background(), tenancy.Operator, `SELECT 1e2 AS c, 0.5e0::FLOAT AS f`)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if got := rr.Schema().Field(0).Type; !arrow.TypeEqual(got, arrow.PrimitiveTypes.Float64) {
		t.Errorf("1e2 reads as %s, want float64 (a DOUBLE)", got)
	}
	if got := rr.Schema().Field(1).Type; !arrow.TypeEqual(got, arrow.PrimitiveTypes.Float32) {
		t.Errorf("0.5e0::FLOAT reads as %s, want float32", got)
	}

	// Columns are named as DuckDB names them for the query sent, by the
	// literal as written back, not by the cast that keeps its type.
	rr2, err := l.reader.Query(context.Background(), tenancy.Operator, `SELECT 1e3, 1.5e0 * duration_ms, x FROM (SELECT 2e0 AS x, duration_ms FROM otel_spans)`)
	if err != nil {
		t.Fatal(err)
	}
	defer rr2.Release()
	var names []string
	for _, f := range rr2.Schema().Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"1000.0", "(1.5 * duration_ms)", "x"}; !slices.Equal(names, want) {
		t.Errorf("columns %q, want %q", names, want)
	}
	// COLUMNS(…) names each of its columns by the table's.
	rr3, err := l.reader.Query(context.Background(), tenancy.Operator, `SELECT COLUMNS('duration_ms') * 1e0 FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	defer rr3.Release()
	if got := rr3.Schema().Field(0).Name; got != "duration_ms" {
		t.Errorf("COLUMNS('duration_ms') * 1e0 named %q, want duration_ms", got)
	}
}

// A DOUBLE constant is the double written, to its last bit: printed back
// as a bare number (0.9381259166408439 reads again as a DECIMAL) and cast
// to DOUBLE, it is the DECIMAL's digits divided by a power of ten in
// doubles, which rounds twice and may land one ulp away (0.938125916640844),
// and -0e0 is the DECIMAL -0.0, which is 0: a DOUBLE column equal to the
// constant written lost its row, and 1/-0e0 was +inf.
func TestDoubleConstantsAreTheDoublesWritten(t *testing.T) {
	l := newLake(t)
	const exact = "0.9381259166408439"
	if _, err := l.db.Exec(`INSERT INTO genai_prices VALUES ('exact', ` + exact + `e0)`); err != nil {
		t.Fatal(err)
	}
	q := `SELECT model, (` + exact + `e0)::VARCHAR, (0.09741197049329217e0)::VARCHAR, (1/-0e0)::VARCHAR FROM genai_prices WHERE input_per_mtok = ` + exact + `e0`
	var model, v, v2, inf string
	if err := l.db.QueryRow(q).Scan(&model, &v, &v2, &inf); err != nil {
		t.Fatal(err)
	}
	want := []string{strings.Join([]string{model, v, v2, inf}, "|")}
	if want[0] != "exact|"+exact+"|0.09741197049329217|-inf" {
		t.Fatalf("DuckDB itself: %v; the test assumes exact|%s|0.09741197049329217|-inf", want, exact)
	}
	for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
		got, err := l.rows(t, s, q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: %v, want %v (DuckDB's own answer)", s, got, want)
		}
	}
}

// A star within a subquery of an item stands for the subquery's columns,
// not the item's: the item holding a DOUBLE constant is named as DuckDB
// names it, not by the cast that keeps the constant's type.
func TestSubqueryStarItemKeepsDuckDBsName(t *testing.T) {
	l := newLake(t)
	const q = `SELECT EXISTS (SELECT * FROM otel_spans WHERE duration_ms > 1e0)`
	rows, err := l.db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rows.Columns()
	rows.Close()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if got := rr.Schema().Field(0).Name; got != want[0] {
		t.Errorf("column %q, want %q (DuckDB's own name)", got, want[0])
	}
}

// A column holding a DOUBLE constant is named as DuckDB names it for the
// query sent, whatever else it holds: the alias that keeps its name is
// the item printed from its parse's JSON, where DuckDB has resolved the
// types it names (DECIMAL(3,1), HUGEINT), which DuckDB's own name writes
// as written (DECIMAL(3, 1), "HUGEINT").
func TestDoubleConstantColumnsKeepDuckDBsNames(t *testing.T) {
	l := newLake(t)
	const q = `SELECT 1::DECIMAL(3,1) + 1e0, duration_ms::HUGEINT * 1e0 FROM otel_spans`
	rows, err := l.db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := rows.Columns()
	rows.Close()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	var got []string
	for _, f := range rr.Schema().Fields() {
		got = append(got, f.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("columns %q, want %q (DuckDB's own names)", got, want)
	}
}

// A constant past a double's range (1e400) is, as DuckDB reads it, the
// DOUBLE infinity (-1e400 the negative one), and DuckDB's parse writes it
// as the bare token Infinity, which is not JSON: the read path refused
// every query holding one ("read the parsed query: invalid character
// 'I'"). The answer, the columns' names and the rows a comparison with it
// keeps are DuckDB's own, on DuckDB and on Iceberg (where a comparison of
// an integer column with a constant prunes the scan).
func TestInfiniteDoubleConstantsAreDuckDBs(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	const q = `SELECT model, 1e400::VARCHAR AS a, (-1e400)::VARCHAR AS b, typeof(1e400) AS t, 1e400 > 1e308 AS g
		FROM genai_prices WHERE input_per_mtok < 1e400 AND input_per_mtok > -1e400`
	var model, a, b, typ string
	var g bool
	if err := l.db.QueryRow(q).Scan(&model, &a, &b, &typ, &g); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%s|%s|%s|%s|%v", model, a, b, typ, g)}
	if want[0] != "gpt|inf|-inf|DOUBLE|true" {
		t.Fatalf("DuckDB itself: %v; the test assumes gpt|inf|-inf|DOUBLE|true", want)
	}
	for name, r := range map[string]Reader{"duckdb": l.reader, "iceberg": il.reader} {
		for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
			got, err := readRows(r, s, q)
			if err != nil {
				t.Errorf("%s, %v: %v", name, s, err)
				continue
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, %v: %v, want %v (DuckDB's own answer)", name, s, got, want)
			}
		}
	}
	// The words in strings stay strings.
	got, err := l.rows(t, tenantA, `SELECT 'Infinity' || '"NaN\-Infinity', (-1e400)::VARCHAR`)
	if want := []string{`Infinity"NaN\-Infinity|-inf`}; err != nil || !slices.Equal(got, want) {
		t.Errorf("strings holding the words: %v, %v; want %v", got, err, want)
	}
	// Its column is named as DuckDB names it.
	const named = `SELECT 1e400, -1e400`
	rows, err := l.db.Query(named)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := rows.Columns()
	rows.Close()
	if err != nil {
		t.Fatal(err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA, named)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, f := range rr.Schema().Fields() {
		got = append(got, f.Name)
	}
	rr.Release()
	if !slices.Equal(got, cols) {
		t.Errorf("%s: columns %q, want %q (DuckDB's own names)", named, got, cols)
	}
	// On Iceberg a comparison of an integer column with it prunes
	// nothing it keeps.
	all, err := il.rows(t, tenantA, `SELECT count(*) FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{`duration_ms < 1e400`, `duration_ms > -1e400`, `duration_ms BETWEEN -1e400 AND 1e400`} {
		n, err := il.rows(t, tenantA, `SELECT count(*) FROM otel_spans WHERE `+c)
		if err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		if !slices.Equal(n, all) {
			t.Errorf("%s: %v rows, want %v (every row)", c, n, all)
		}
	}
}
