package query

import (
	"context"
	"slices"
	"testing"

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
