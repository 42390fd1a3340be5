// Package cputime reads the process's CPU time, for benchmarks on a
// machine shared with other work: wall time per operation swells with the
// load, CPU time much less.
package cputime

import (
	"syscall"
	"time"
)

// Process is the CPU time the process has used so far, user and system,
// every thread's (cgo's, DuckDB's, included); 0 when the system does not
// say.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
