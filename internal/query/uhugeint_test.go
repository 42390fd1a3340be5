package query

import (
	"context"
	"fmt"
	"slices"
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
