package query

import (
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// An OR pushed to a scan keeps every row its disjuncts keep in SQL's
// three-valued logic: a row whose start is NULL makes a comparison of
// start_time unknown, and the OR is still true when another disjunct is.
// Conditions whose sides prune files and rows differently (by the day
// partition, the null counts, the bounds), alone, under a tenant and
// beside other conditions, must answer as DuckDB over the same rows.
func TestIcebergOrKeepsRowsItsDisjunctsKeep(t *testing.T) {
	p := newPruneLake(t)
	at := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	p.loadBoth(t, []span{{"a", "t1", "timed", 1, at}, {"a", "t1", "no start", 2, time.Time{}}, {"b", "t1", "no start", 7, time.Time{}}})
	p.loadBoth(t, []span{{"a", "t2", "timed", 3, at.Add(48 * time.Hour)}, {"b", "t2", "timed", 8, at.Add(48 * time.Hour)}})
	p.loadBoth(t, []span{{"a", "t3", "no start", 4, time.Time{}}})
	p.loadBoth(t, []span{{"a", "t4", "timed", 5, at.Add(96 * time.Hour)}, {"b", "t4", "no start", 9, time.Time{}}})
	for _, where := range []string{
		"start_time < TIMESTAMP '2024-03-02' OR name = 'no start'",
		"start_time >= TIMESTAMP '2024-03-04' OR trace_id = 't3'",
		"start_time >= TIMESTAMP '2024-03-04' OR duration_ms IN (2, 4)",
		"start_time IS NULL OR start_time BETWEEN TIMESTAMP '2024-03-03' AND TIMESTAMP '2024-03-04'",
		"(start_time IS NULL AND duration_ms > 3) OR start_time > TIMESTAMP '2024-03-04'",
		"trace_id = 't1' AND (start_time IS NULL OR start_time > TIMESTAMP '2024-03-04')",
		"(trace_id = 't1' OR trace_id = 't3') AND (start_time IS NULL OR duration_ms = 3)",
		"start_time > TIMESTAMP '2024-03-04' OR NOT (start_time < TIMESTAMP '2024-03-02')",
		"start_time > TIMESTAMP '2024-03-04' OR NOT (start_time IS NOT NULL)",
		"start_time > TIMESTAMP '2024-03-04' OR length(name) = 8",
		"(start_time > TIMESTAMP '2024-03-04' AND length(name) = 5) OR duration_ms = 2",
		"tenant_id = 'b' OR start_time IS NULL",
		"(tenant_id = 'b' AND duration_ms = 9) OR (tenant_id = 'a' AND start_time IS NULL)",
		"start_time IS NULL OR start_time IS NULL",
		"duration_ms = 4 OR (start_time < TIMESTAMP '2024-03-02' OR trace_id = 't4')",
		"NOT (start_time IS NULL OR duration_ms = 1)",
		"(start_time IS NULL OR duration_ms = 1) = false",
		"coalesce(start_time IS NULL OR duration_ms = 3, true)",
	} {
		q := "SELECT tenant_id, trace_id, name, duration_ms FROM otel_spans WHERE " + where
		for _, s := range []tenancy.Scope{tenancy.Operator, tenancy.One("a"), tenancy.One("b")} {
			p.same(t, s, q)
			for _, sc := range p.takeScans() {
				t.Logf("%s %v: %s files %d", where, s, sc.Filter, sc.Files)
			}
		}
	}
	// Joins: an OR of one table's columns under an outer join's nulled side.
	for _, q := range []string{
		"SELECT a.name, b.name FROM otel_spans a LEFT JOIN otel_spans b ON a.trace_id = b.trace_id AND b.name = 'no start' WHERE b.start_time IS NULL OR b.duration_ms = 1",
		"SELECT a.name, b.name FROM otel_spans a LEFT JOIN otel_spans b ON a.trace_id = b.trace_id AND b.name = 'no start' WHERE b.duration_ms = 2 OR a.duration_ms = 3",
		"SELECT a.name, b.name FROM otel_spans a LEFT JOIN otel_spans b ON a.trace_id = b.trace_id AND b.name = 'no start' WHERE b.duration_ms = 2 OR b.duration_ms = 7",
	} {
		for _, s := range []tenancy.Scope{tenancy.Operator, tenancy.One("a")} {
			p.same(t, s, q)
		}
	}
}
