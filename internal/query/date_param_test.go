package query

import (
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A time bound where DuckDB takes a DATE is the date of its instant in
// UTC, as DuckDB casts a timestamp to a date: duckdb-go's binding divides
// the seconds since 1970 by a day's, which rounds a time before 1970 up
// to the next day unless it is midnight, so 1900-01-01 12:00 UTC was
// bound as 1900-01-02 and its rows were not read.
func TestTimeBoundAsADateIsItsDay(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE TABLE days (tenant_id VARCHAR, d DATE); INSERT INTO days VALUES ('a', '1900-01-01'), ('a', '1959-12-31'), ('a', '2020-05-01')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    string
		p    time.Time
		want []string
	}{
		{`SELECT d FROM days WHERE d = ?`, time.Date(1900, 1, 1, 12, 0, 0, 0, time.UTC), []string{"1900-01-01"}},
		{`SELECT d FROM days WHERE d = ?`, time.Date(1959, 12, 31, 23, 59, 59, 0, time.UTC), []string{"1959-12-31"}},
		{`SELECT d FROM days WHERE d = ?`, time.Date(2020, 5, 1, 12, 0, 0, 0, time.UTC), []string{"2020-05-01"}},
		{`SELECT ?::DATE`, time.Date(1959, 12, 31, 12, 0, 0, 0, time.UTC), []string{"1959-12-31"}},
	} {
		for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
			got, err := l.rows(t, s, c.q, c.p)
			if err != nil {
				t.Fatalf("%s: %v", c.q, err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s with %s, %v: %q, want %q", c.q, c.p, s, got, c.want)
			}
		}
	}
}

// The Iceberg reader evaluates the pushed constants in a statement of
// their own, whose placeholders DuckDB types from those constants alone:
// in start_time >= $1::DATE AND start_time <= $1, $1 is a DATE there
// (bound as the midnight of its day) and untyped in the query (bound as
// its instant), so the scan was pruned to start_time <= midnight and
// the rows between midnight and the instant were lost.
func TestIcebergPrunesByTheTimeTheQueryBinds(t *testing.T) {
	l := newIceLake(t, IcebergOptions{})
	at := day(1).Add(11*time.Hour + 30*time.Minute) // chat at 10:00 and tool at 11:00 are before it
	const q = `SELECT name FROM otel_spans WHERE start_time >= $1::DATE AND start_time <= $1 ORDER BY name`
	for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
		got, err := l.rows(t, s, q, at)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"chat", "tool"}; !slices.Equal(got, want) {
			t.Errorf("%v: %q, want %q (scans %+v)", s, got, want, l.takeScans())
		}
	}
}
