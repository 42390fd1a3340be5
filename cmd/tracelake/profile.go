package main

import (
	"log/slog"
	"os"
	"runtime/pprof"
)

// cpuProfile starts a CPU profile of the whole process into the file
// TRACELAKE_CPU_PROFILE names, if set, and returns what stops it: how a
// run's CPU is looked at where perf is not available (docs/OPERATIONS.md,
// "CPU and start-up"). A profile that cannot start is logged, not fatal.
func cpuProfile() (stop func()) {
	path := os.Getenv("TRACELAKE_CPU_PROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		slog.Error("cpu profile not written", "path", path, "err", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		slog.Error("cpu profile not written", "path", path, "err", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			slog.Error("cpu profile incomplete", "path", path, "err", err)
		}
	}
}
