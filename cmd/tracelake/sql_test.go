package main

import (
	"testing"
	"time"
)

// Dates print as dates, timestamps without a zone suffix, both in UTC.
func TestFormatCellTimes(t *testing.T) {
	f := func(v any, want string) {
		t.Helper()
		if got := formatCell(v); got != want {
			t.Errorf("formatCell(%v) = %q, want %q", v, got, want)
		}
	}
	f(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "2026-11-01")
	f(time.Date(2026, 11, 1, 10, 2, 3, 456000000, time.UTC), "2026-11-01 10:02:03.456")
	f(time.Date(2026, 11, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600)), "2026-11-01 11:00:00")
	f(nil, "NULL")
}
