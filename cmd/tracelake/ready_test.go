package main

import (
	"strings"
	"testing"
	"time"
)

// An hour is read in the forms the usage names, truncated to the hour in
// UTC; anything else is refused with the forms it takes.
func TestParseHour(t *testing.T) {
	want := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, s := range []string{"2026-12-04T10", "2026-12-04 10", "2026-12-04T10:59", "2026-12-04T11:30:00+01:00"} {
		if got, err := parseHour(s); err != nil || !got.Equal(want) {
			t.Errorf("parseHour(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "10", "2026-12-04", "yesterday"} {
		if _, err := parseHour(s); err == nil || !strings.Contains(err.Error(), "want 2026-12-04T10 or RFC 3339") {
			t.Errorf("parseHour(%q): %v, want a refusal naming the forms", s, err)
		}
	}
}
