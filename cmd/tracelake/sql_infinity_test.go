package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// DuckDB's infinite timestamps and dates (change capture loads
// PostgreSQL's infinity as them) print as DuckDB prints them, infinity
// and -infinity: they arrive as the largest integers of their Arrow
// types, which printed as the instants those would be (294247-01-10
// 04:00:54.775807) though no such instant is stored.
func TestPrintQueryInfinity(t *testing.T) {
	db, err := memoryDuckDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for expr, want := range map[string]string{
		"'infinity'::TIMESTAMP":                  "infinity",
		"'-infinity'::TIMESTAMP":                 "-infinity",
		"'infinity'::TIMESTAMPTZ":                "infinity",
		"'-infinity'::TIMESTAMPTZ":               "-infinity",
		"'infinity'::DATE":                       "infinity",
		"'-infinity'::DATE":                      "-infinity",
		"TIMESTAMP '2262-04-11 23:47:16.854775'": "2262-04-11 23:47:16.854775",
	} {
		var out bytes.Buffer
		if err := printQuery(context.Background(), &out, db, "SELECT "+expr+" AS v"); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		var duck string
		if err := db.QueryRow("SELECT (" + expr + ")::VARCHAR").Scan(&duck); err != nil {
			t.Fatal(err)
		}
		if got := strings.Split(out.String(), "\n"); len(got) != 4 || got[1] != want {
			t.Errorf("%s printed\n%s\nwant the row %q (DuckDB: %q)", expr, out.String(), want, duck)
		}
	}
}
