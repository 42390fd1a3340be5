package query

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A UHUGEINT past HUGEINT's range reads as the number DuckDB holds, not
// as the negative number of its bits: DuckDB's Arrow writes a UHUGEINT
// as a decimal(38, 0), an int128, and 2^128-1 came out as -1.
func TestUhugeintReadsAsStored(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE counters (tenant_id VARCHAR, n UHUGEINT)`,
		`INSERT INTO counters VALUES ('a', 340282366920938463463374607431768211455), ('a', 170141183460469231731687303715884105728), ('a', 7), ('a', NULL)`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	rows, err := db.Query(`SELECT n::VARCHAR FROM counters ORDER BY n NULLS LAST`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s *string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s == nil {
			want = append(want, "(null)")
		} else {
			want = append(want, *s)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
		got, err := exactInts(r, s, `SELECT n FROM counters ORDER BY n NULLS LAST`)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: %q, want %q (DuckDB's n::VARCHAR)", s, got, want)
		}
	}
}

// exactInts are the integers of the first column of q's result, each as
// its exact decimal digits (Arrow's ValueStr writes a wide decimal with
// an exponent).
func exactInts(r Reader, s tenancy.Scope, q string) ([]string, error) {
	rr, err := r.Query(context.Background(), s, q)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []string
	for rr.Next() {
		col := rr.RecordBatch().Column(0)
		for i := range col.Len() {
			switch c := col.(type) {
			case *array.Decimal128:
				if c.IsValid(i) {
					out = append(out, c.Value(i).BigInt().String())
					continue
				}
			case *array.Decimal256:
				if c.IsValid(i) {
					out = append(out, c.Value(i).BigInt().String())
					continue
				}
			default:
				return nil, fmt.Errorf("a column of %s", col.DataType())
			}
			out = append(out, "(null)")
		}
	}
	return out, rr.Err()
}

// A UHUGEINT inside a list, an array, a struct, a map or a union reads as stored
// too, NULLs beside it kept.
func TestNestedUhugeintReadsAsStored(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE counters (tenant_id VARCHAR, n UHUGEINT)`,
		`INSERT INTO counters VALUES ('a', 340282366920938463463374607431768211455)`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const max = "340282366920938463463374607431768211455"
	for q, want := range map[string][]string{
		`SELECT unnest([[n, NULL]]) FROM counters`:                     {max, "(null)"},
		`SELECT unnest([[n, NULL]::UHUGEINT[2]]) FROM counters`:        {max, "(null)"},
		`SELECT {'k': 1, 'v': n} FROM counters`:                        {max},
		`SELECT MAP {n: NULL::UHUGEINT, 1::UHUGEINT: n} FROM counters`: {max, "1", "(null)", max},
		// A union's members too (DuckDB's Arrow: a sparse union).
		`SELECT union_value(k := n) FROM counters`:                                 {max},
		`SELECT [union_value(k := n)::UNION(s VARCHAR, k UHUGEINT)] FROM counters`: {max},
	} {
		rr, err := r.Query(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var got []string
		for rr.Next() {
			got = append(got, leafInts(rr.RecordBatch().Column(0))...)
		}
		if err := rr.Err(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rr.Release()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}

// leafInts are the integers in the decimal arrays under a, depth first
// (a map's keys before its values), each as its exact digits.
func leafInts(a arrow.Array) []string {
	var out []string
	switch c := a.(type) {
	case *array.Decimal128:
		for i := range c.Len() {
			if c.IsNull(i) {
				out = append(out, "(null)")
			} else {
				out = append(out, c.Value(i).BigInt().String())
			}
		}
	case *array.Decimal256:
		for i := range c.Len() {
			if c.IsNull(i) {
				out = append(out, "(null)")
			} else {
				out = append(out, c.Value(i).BigInt().String())
			}
		}
	case *array.Map:
		out = append(out, leafInts(c.Keys())...)
		out = append(out, leafInts(c.Items())...)
	case array.ListLike:
		out = append(out, leafInts(c.ListValues())...)
	case *array.Struct:
		for i := range c.NumField() {
			out = append(out, leafInts(c.Field(i))...)
		}
	case array.Union:
		for i := range c.NumFields() {
			out = append(out, leafInts(c.Field(i))...)
		}
	}
	return out
}

// hugeintPast is the error of a HUGEINT of 39 digits in column "s".
const hugeintPast = `column "s": a HUGEINT value of 39 digits (past the decimal(38, 0) Arrow result type); cast it to VARCHAR or DOUBLE`

// The 39-digit HUGEINTs: 2^127-1, -2^127, 10^38, -10^38.
var hugeints39 = []string{"170141183460469231731687303715884105727", "-170141183460469231731687303715884105728",
	"100000000000000000000000000000000000000", "-100000000000000000000000000000000000000"}

// hugeintSQL is v, one of hugeints39, as a HUGEINT in SQL (DuckDB reads
// the 2^127 of -2^127 as a DOUBLE, past a HUGEINT).
func hugeintSQL(v string) string {
	if v == "-170141183460469231731687303715884105728" {
		return "(-170141183460469231731687303715884105727::HUGEINT - 1)"
	}
	return "(" + v + "::HUGEINT)"
}

// A HUGEINT (-2^127 to 2^127-1, up to 39 digits) reads as DuckDB's Arrow
// writes it, a decimal(38, 0) (the type of sum() of integers, which
// clients such as Polars read; a decimal256 they do not). A value of 39
// digits (10^38 up, 2^127-1, -2^127) is past that precision: its bits
// hold the number, but Arrow's own text of 2^127-1 as a decimal(38, 0)
// is 1.7014118346046923173168730371588410573e+38, another number, and a
// client that trusts the precision reads it wrong. Such a value fails
// the query, naming its column and the cast that reads it, at the top
// of the result or inside a list, array, struct, map or union; every
// value within 38 digits reads exact.
func TestHugeintOf39DigitsFails(t *testing.T) {
	db := dbWith(t,
		`CREATE TABLE big (tenant_id VARCHAR, n HUGEINT)`,
		`INSERT INTO big VALUES ('a', 99999999999999999999999999999999999999), ('a', -99999999999999999999999999999999999999), ('a', 7), ('a', NULL)`,
		`CREATE TABLE huge (tenant_id VARCHAR, k INTEGER, n HUGEINT)`,
		`INSERT INTO huge VALUES ('a', 0, 170141183460469231731687303715884105727), ('a', 1, -170141183460469231731687303715884105727 - 1),
			('a', 2, 100000000000000000000000000000000000000), ('a', 3, -100000000000000000000000000000000000000)`)
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const max, min = "99999999999999999999999999999999999999", "-99999999999999999999999999999999999999"
	shapes := map[string][]string{
		`n`:                             {min, "7", max, "(null)"},
		`[n, NULL]`:                     {min, "(null)", "7", "(null)", max, "(null)", "(null)", "(null)"},
		`[n]::HUGEINT[1]`:               {min, "7", max, "(null)"},
		`{'k': 1, 'v': n}`:              {min, "7", max, "(null)"},
		`MAP {'k': n}`:                  {min, "7", max, "(null)"},
		`union_value(v := n)`:           {min, "7", max, "(null)"},
		`[{'v': [n]::HUGEINT[1]}][1:1]`: {min, "7", max, "(null)"},
		`[union_value(v := n)::UNION(s VARCHAR, v HUGEINT)]`: {min, "7", max, "(null)"},
	}
	for shape, want := range shapes {
		q := `SELECT ` + shape + ` AS s FROM big ORDER BY n NULLS LAST`
		sc, err := r.Schema(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		rr, err := r.Query(context.Background(), tenantA, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if !sc.Equal(rr.Schema()) {
			t.Errorf("%s: said to answer %s, answered %s", q, sc, rr.Schema())
		}
		if dt := rr.Schema().Field(0).Type; shape == `n` && !arrow.TypeEqual(dt, &arrow.Decimal128Type{Precision: 38, Scale: 0}) {
			t.Errorf("%s: a HUGEINT read as %s, want DuckDB's decimal(38, 0)", q, dt)
		}
		var got []string
		for rr.Next() {
			col := rr.RecordBatch().Column(0)
			if _, ok := col.(*array.Map); ok {
				col = col.(*array.Map).Items()
			}
			got = append(got, leafInts(col)...)
		}
		if err := rr.Err(); err != nil {
			t.Errorf("%s: %v", q, err)
		}
		rr.Release()
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
	if got, err := exactInts(r, tenantA, `SELECT sum(n) AS s FROM big`); err != nil || !slices.Equal(got, []string{"7"}) {
		t.Errorf("sum(n): %q, %v, want 7", got, err)
	}
	for k, v := range hugeints39 {
		for shape := range shapes {
			q := fmt.Sprintf(`SELECT %s AS s FROM huge WHERE k = %d`, shape, k)
			if _, err := readRows(r, tenantA, q); err == nil || !strings.Contains(err.Error(), hugeintPast) {
				t.Errorf("%s (%s): %v, want the error %q", q, v, err, hugeintPast)
			}
		}
		q := fmt.Sprintf(`SELECT sum(n) AS s FROM huge WHERE k = %d`, k)
		if _, err := readRows(r, tenantA, q); err == nil || !strings.Contains(err.Error(), hugeintPast) {
			t.Errorf("%s (%s): %v, want the error %q", q, v, err, hugeintPast)
		}
	}
	// Past the first batch (DuckDB's 2,048 rows) too.
	q := `SELECT CASE WHEN i = 3000 THEN 170141183460469231731687303715884105727::HUGEINT ELSE i END AS s FROM (SELECT unnest(range(4000)) AS i FROM big WHERE n = 7)`
	if _, err := readRows(r, tenantA, q); err == nil || !strings.Contains(err.Error(), hugeintPast) {
		t.Errorf("%s: %v, want the error %q", q, err, hugeintPast)
	}
}

// RunArrow (tracelake sql on a stopped file) reads a HUGEINT as the read
// path does: a value of 39 digits fails its query, one of 38 reads exact.
func TestRunArrowHugeintOf39DigitsFails(t *testing.T) {
	db := dbWith(t)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	run := func(q string) (got []string, err error) {
		err = conn.Raw(func(dc any) error {
			rr, err := RunArrow(context.Background(), dc.(driver.Conn), q)
			if err != nil {
				return err
			}
			defer rr.Release()
			for rr.Next() {
				got = append(got, leafInts(rr.RecordBatch().Column(0))...)
			}
			return rr.Err()
		})
		return got, err
	}
	for _, v := range hugeints39 {
		for _, q := range []string{`SELECT ` + hugeintSQL(v) + ` AS s`, `SELECT [` + hugeintSQL(v) + `] AS s`} {
			if _, err := run(q); err == nil || !strings.Contains(err.Error(), hugeintPast) {
				t.Errorf("%s: %v, want the error %q", q, err, hugeintPast)
			}
		}
	}
	const max = "99999999999999999999999999999999999999"
	if got, err := run(`SELECT [` + max + `::HUGEINT, -` + max + `] AS s`); err != nil || !slices.Equal(got, []string{max, "-" + max}) {
		t.Errorf("%s: %q, %v", max, got, err)
	}
}

// The Iceberg reader reads a HUGEINT as the DuckDB reader does.
func TestIcebergHugeintOf39DigitsFails(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	for _, v := range hugeints39 {
		q := `SELECT {'v': ` + hugeintSQL(v) + ` + 0 * length(name)} AS s FROM otel_spans`
		if _, err := l.rows(t, tenantA, q); err == nil || !strings.Contains(err.Error(), hugeintPast) {
			t.Errorf("%s: %v, want the error %q", q, err, hugeintPast)
		}
	}
	const max = "99999999999999999999999999999999999999"
	got, err := exactInts(l.reader, tenantA, `SELECT `+max+`::HUGEINT + 0 * length(name) AS s FROM otel_spans`)
	if err != nil || !slices.Equal(got, []string{max, max}) {
		t.Errorf("%q, %v, want %s twice", got, err, max)
	}
}
