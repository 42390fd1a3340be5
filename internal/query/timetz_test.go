package query

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A TIME WITH TIME ZONE keeps its offset: DuckDB's Arrow writes it as a
// time64 of its clock alone, so 12:34:56+05:30 and 12:34:56-08 (two
// instants 13 and a half hours apart) both read as 12:34:56. The read
// path answers each as DuckDB writes it, offset included, on DuckDB and
// on Iceberg, its schema saying the type it answers.
func TestZonedTimeKeepsItsOffset(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE zoned (tenant_id VARCHAR, id INTEGER, t TIMETZ)`,
		`INSERT INTO zoned VALUES ('a', 1, '12:34:56+05:30'), ('a', 2, '12:34:56-08:00'), ('a', 3, '23:59:59.999999+15:59'), ('a', 4, '00:00:00-15:59'), ('a', 5, NULL)`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const q = `SELECT id, t FROM zoned ORDER BY id`
	var want []string
	rows, err := db.Query(`SELECT id::VARCHAR || '|' || coalesce(t::VARCHAR, '(null)') FROM zoned ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		want = append(want, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want[0] != "1|12:34:56+05:30" {
		t.Fatalf("DuckDB itself: %q; the test assumes 1|12:34:56+05:30 first", want)
	}
	for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
		got, err := readRows(r, s, q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: %q, want %q (DuckDB's t::VARCHAR)", s, got, want)
		}
		sc, err := r.Schema(context.Background(), s, q)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := r.Query(context.Background(), s, q)
		if err != nil {
			t.Fatal(err)
		}
		if !sc.Equal(rr.Schema()) {
			t.Errorf("%v: said to answer %s, answered %s", s, sc, rr.Schema())
		}
		rr.Release()
	}
	// A constant on Iceberg too.
	il := newIceLake(t, IcebergOptions{})
	got, err := il.rows(t, tenantA, `SELECT '12:34:56+05:30'::TIMETZ AS a, '12:34:56-08:00'::TIMETZ AS b`)
	if want := []string{"12:34:56+05:30|12:34:56-08"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("iceberg: %q, %v; want %q", got, err, want)
	}
}

// A query whose columns' types wait for its parameters' values keeps a
// TIME WITH TIME ZONE's offset too, on DuckDB and on Iceberg, its
// schema saying the type it answers: its zoned column went out as
// DuckDB's time64 of the clock alone, 12:34:56+05:30 as 12:34:56.
func TestZonedTimeOfAParameterTypedQueryKeepsItsOffset(t *testing.T) {
	l := newLake(t)
	il := newIceLake(t, IcebergOptions{})
	const q = `SELECT $1 AS p, '12:34:56+05:30'::TIMETZ AS z`
	want := []string{"v|12:34:56+05:30"}
	for name, r := range map[string]Reader{"duckdb": l.reader, "iceberg": il.reader} {
		got, err := readRows(r, tenantA, q, "v")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q (DuckDB's z::VARCHAR)", name, got, want)
		}
		sc, err := r.Schema(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if typ := sc.Field(1).Type; !arrow.TypeEqual(typ, arrow.BinaryTypes.String) {
			t.Errorf("%s: schema says z is %s, want utf8 (the text answered)", name, typ)
		}
	}
}

// Which columns are a TIME WITH TIME ZONE, the values say: for a NULL
// timezone('UTC', $1) is one, for a timestamp a timestamp, which stays
// one (cast to text as a zoned time, it changed type).
func TestZonedColumnsOfAParameterTypedQueryAsTheValuesType(t *testing.T) {
	l := newLake(t)
	const q = `SELECT timezone('UTC', $1) AS ts, $2 AS p`
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	var typ string
	if err := l.db.QueryRow(`SELECT typeof(timezone('UTC', $1))`, at).Scan(&typ); err != nil || !strings.HasPrefix(typ, "TIMESTAMP") {
		t.Fatalf("DuckDB itself: %q, %v; the test assumes a TIMESTAMP", typ, err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA, q, at, "v")
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if got := rr.Schema().Field(0).Type; got.ID() != arrow.TIMESTAMP {
		t.Errorf("ts answered as %s, want a timestamp", got)
	}
}

// The tables listed (Flight SQL's GetTables with include_schema, ADBC's
// GetObjects and GetTableSchema) say a TIME WITH TIME ZONE column is the
// text a query of it answers, not DuckDB's time64 of its clock alone: a
// client that typed its columns by the listing read text as a time of
// day without its offset.
func TestTablesListZonedTimeAsTheTextAnswered(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE zoned (tenant_id VARCHAR, id INTEGER, t TIMETZ, ts TIMESTAMPTZ)`,
		`INSERT INTO zoned VALUES ('a', 1, '12:34:56+05:30', '2026-12-07 12:00:00+00')`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
		tables, err := r.Tables(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(tables, func(tb Table) bool { return tb.Name == "zoned" })
		if i < 0 {
			t.Fatalf("%v: zoned not listed: %v", s, tables)
		}
		rr, err := r.Query(context.Background(), s, `SELECT * FROM zoned`)
		if err != nil {
			t.Fatal(err)
		}
		answered := rr.Schema()
		rr.Release()
		if typ := answered.Field(2).Type; !arrow.TypeEqual(typ, arrow.BinaryTypes.String) {
			t.Fatalf("%v: SELECT * answers t as %s; the test assumes text", s, typ)
		}
		if !tables[i].Schema.Equal(answered) {
			t.Errorf("%v: zoned listed as %s, SELECT * of it answers %s", s, tables[i].Schema, answered)
		}
	}
}
