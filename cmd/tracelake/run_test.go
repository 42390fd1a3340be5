package main

import (
	"testing"
	"time"
)

// The closing line's elapsed time is rounded for a reader (it was seconds
// as a float, 0.071 or 12.345).
func TestElapsedRounded(t *testing.T) {
	f := func(d time.Duration, want string) {
		t.Helper()
		if got := elapsed(d); got != want {
			t.Errorf("elapsed(%v) = %s, want %s", d, got, want)
		}
	}
	f(12345678912*time.Nanosecond, "12.3s")
	f(12*time.Second, "12s")
	f(430*time.Millisecond, "400ms")
	f(59960*time.Millisecond, "1m0s")
	f(4*time.Minute+5400*time.Millisecond, "4m5s")
	f(2*time.Hour+3*time.Minute+4*time.Second, "2h3m4s")
}
