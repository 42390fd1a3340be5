package main

import (
	"testing"
	"time"
)

// A window of days is that many days, or refused: a count of days past
// the range of a duration (292 years) wrapped around, so 213505d was a
// window of about a day (and 106752d a negative one, read as all time),
// on the page and in what it counted.
func TestReportSinceDaysNeverWrapAround(t *testing.T) {
	for _, s := range []string{"7d", "30d", "1d", "100000d", "106751d", "106752d", "213505d", "9223372036854775807d"} {
		d, err := parseSince(s)
		if err != nil {
			continue // refused: fine
		}
		var n int64
		for _, c := range s[:len(s)-1] {
			n = n*10 + int64(c-'0')
		}
		if d <= 0 || d/(24*time.Hour) != time.Duration(n) {
			t.Errorf("--since %s: a window of %v (%d days), want %d days or an error", s, d, d/(24*time.Hour), n)
		}
	}
	for _, s := range []string{"all", "0"} {
		if d, err := parseSince(s); err != nil || d != 0 {
			t.Errorf("--since %s: %v, %v; want 0 (everything)", s, d, err)
		}
	}
	for _, s := range []string{"-7d", "0d", "d", "7x", "-1h", ""} {
		if d, err := parseSince(s); err == nil {
			t.Errorf("--since %q: %v, want an error", s, d)
		}
	}
}
