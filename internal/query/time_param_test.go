package query

import (
	"slices"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// A time bound where DuckDB takes a TIME is the time of day of its
// instant in UTC, the read path's time zone, as a TIMESTAMP placeholder
// takes the same value (its instant, in UTC): duckdb-go binds a TIME as
// the clock of the value's own location, so 12:00 in New York (an Arrow
// timestamp with a time zone) was bound as 12:00, not 17:00, while
// ts = ? took it as 17:00.
func TestTimeBoundAsATimeIsItsInstantsTimeOfDay(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`CREATE TABLE clock (tenant_id VARCHAR, tm TIME, ts TIMESTAMP); INSERT INTO clock VALUES ('a', '17:00:00', '2020-01-01 17:00:00')`); err != nil {
		t.Fatal(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	at := time.Date(2020, 1, 1, 12, 0, 0, 0, ny)
	for _, c := range []struct{ q, want string }{
		{`SELECT count(*) FROM clock WHERE ts = ?`, "1"},
		{`SELECT count(*) FROM clock WHERE tm = ?`, "1"},
	} {
		for _, s := range []tenancy.Scope{tenancy.Operator, tenantA} {
			got, err := l.rows(t, s, c.q, at)
			if err != nil {
				t.Fatalf("%s: %v", c.q, err)
			}
			if !slices.Equal(got, []string{c.want}) {
				t.Errorf("%s with %s, %v: %q, want %q", c.q, at, s, got, c.want)
			}
		}
	}
}
