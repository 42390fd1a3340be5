package verify

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

// A derived row stored twice, one whose source row is missing, and one at
// the coordinates of another source row fail verify; derived rows that
// each have their source row once pass.
func TestCheckDerived(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE spans (name VARCHAR, ktopic VARCHAR, kpartition INTEGER, koffset BIGINT, kindex INTEGER)`,
		`CREATE TABLE ops (name VARCHAR, ktopic VARCHAR, kpartition INTEGER, koffset BIGINT, kindex INTEGER)`,
		`INSERT INTO spans VALUES ('a', 't', 0, 5, 0), ('b', 't', 0, 5, 1), ('c', 't', 1, 5, 0)`,
		`INSERT INTO ops VALUES ('a', 't', 0, 5, 0), ('c', 't', 1, 5, 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	check := func() *Report {
		t.Helper()
		r := &Report{OK: true}
		if err := r.CheckDerived(context.Background(), SQLQuerier{DB: db}, "ops", "ops", "spans", []string{"name"}, Sources{}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := check(); !r.OK || r.Derived.Rows != 2 || r.Derived.Duplicates != 0 || r.Derived.Orphans != 0 {
		t.Fatalf("sound table: %+v %+v", r.Derived, r.Problems)
	}
	if _, err := db.Exec(`INSERT INTO ops VALUES ('a', 't', 0, 5, 0), ('lost', 't', 0, 6, 0)`); err != nil {
		t.Fatal(err)
	}
	r := check()
	if r.OK || r.Derived.Duplicates != 1 || r.Derived.Orphans != 1 || r.Derived.Mismatched != 0 ||
		!strings.Contains(strings.Join(r.Problems, ";"), "stored twice") || !strings.Contains(strings.Join(r.Problems, ";"), "not in the main table") {
		t.Fatalf("a copy and an orphan: %+v %v", r.Derived, r.Problems)
	}
	// An operation stored at the coordinates of another span (a position
	// given again to another request): its coordinates alone pass.
	if _, err := db.Exec(`DELETE FROM ops; INSERT INTO ops VALUES ('a', 't', 0, 5, 0), ('c', 't', 1, 5, 0), ('x', 't', 0, 5, 1)`); err != nil {
		t.Fatal(err)
	}
	r = check()
	if r.OK || r.Derived.Mismatched != 1 || r.Derived.Orphans != 0 || r.Derived.Duplicates != 0 ||
		!strings.Contains(strings.Join(r.Problems, ";"), "hold another source row") {
		t.Fatalf("an operation at another span's coordinates: %+v %v", r.Derived, r.Problems)
	}
}
