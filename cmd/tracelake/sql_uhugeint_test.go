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
