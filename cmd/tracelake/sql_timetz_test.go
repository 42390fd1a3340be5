package main

import (
	"strings"
	"testing"
)

// A TIME WITH TIME ZONE is printed with its offset on the stopped file as
// through a running run (12:34:56+05:30): DuckDB's Arrow writes such a
// value as a time64 of its clock alone, and the stopped file's sql
// printed 12:34:56.000000 for 12:34:56+05:30 and for 12:34:56-08 alike,
// where the read path (through run) prints the value as DuckDB writes it.
func TestSQLTimeWithTimeZoneSameOnTheStoppedFile(t *testing.T) {
	cmds := [][]string{
		{"sql", "SELECT name, t FROM spans ORDER BY name"},
		{"sql", "SELECT t, count(*) AS n FROM spans GROUP BY t ORDER BY n, t"},
		// Beside a UHUGEINT (which the reader widens) and past one batch.
		{"sql", "SELECT s.t, 340282366920938463463374607431768211455::UHUGEINT AS u, g FROM spans s, (SELECT unnest(generate_series(1, 3000)) AS g) ORDER BY g, s.name"},
	}
	through, alone := bothWays(t, []string{
		`CREATE TABLE spans (tenant_id VARCHAR, name VARCHAR, t TIMETZ)`,
		`INSERT INTO spans VALUES ('a', 'india', TIMETZ '12:34:56.5+05:30'), ('a', 'pacific', TIMETZ '12:34:56-08'), ('a', 'none', NULL)`,
	}, cmds...)
	for i, c := range cmds {
		if through[i] != alone[i] {
			t.Errorf("%q through run:\n%s\non the stopped file:\n%s", c, through[i], alone[i])
		}
	}
	for _, want := range []string{"12:34:56.5+05:30", "12:34:56-08", "NULL"} {
		if !strings.Contains(alone[0], want) {
			t.Errorf("on the stopped file:\n%s\nwant %s in it", alone[0], want)
		}
	}
}
