package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// tracelake sql on a stopped file prints a UHUGEINT as stored: DuckDB's
// Arrow writes it as the bits of a decimal(38, 0), and every value from
// 2^127 up printed as a negative number (2^128-1 as -1).
func TestPrintQueryUhugeint(t *testing.T) {
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, v := range []string{"340282366920938463463374607431768211455", "170141183460469231731687303715884105728", "7"} {
		var out bytes.Buffer
		if err := printQuery(context.Background(), &out, db, "SELECT "+v+"::UHUGEINT AS v"); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if got := strings.Split(out.String(), "\n"); len(got) != 4 || got[1] != v {
			t.Errorf("%s::UHUGEINT printed\n%s\nwant the row %q", v, out.String(), v)
		}
	}
}

// tracelake sql on a stopped file fails a HUGEINT of 39 digits, which
// DuckDB's Arrow declares a decimal(38, 0) (Arrow's own text of 2^127-1
// there is 1.7014118346046923173168730371588410573e+38), naming its
// column, and prints one of 38 digits as stored.
func TestPrintQueryHugeint(t *testing.T) {
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const past = `column "s": a HUGEINT value of 39 digits (past the decimal(38, 0) Arrow result type); cast it to VARCHAR or DOUBLE`
	for _, v := range []string{"170141183460469231731687303715884105727", "(-170141183460469231731687303715884105727::HUGEINT - 1)", "100000000000000000000000000000000000000"} {
		var out bytes.Buffer
		err := printQuery(context.Background(), &out, db, "SELECT "+v+"::HUGEINT AS s")
		if err == nil || !strings.Contains(err.Error(), past) {
			t.Errorf("%s::HUGEINT: %v, want the error %q; printed\n%s", v, err, past, out.String())
		}
	}
	for _, v := range []string{"99999999999999999999999999999999999999", "-99999999999999999999999999999999999999", "7"} {
		var out bytes.Buffer
		if err := printQuery(context.Background(), &out, db, "SELECT "+v+"::HUGEINT AS s"); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if got := strings.Split(out.String(), "\n"); len(got) != 4 || got[1] != v {
			t.Errorf("%s::HUGEINT printed\n%s\nwant the row %q", v, out.String(), v)
		}
	}
}
