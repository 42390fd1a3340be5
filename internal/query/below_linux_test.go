package query

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// nice is the calling thread's nice value (getpriority's raw answer is
// 20 - nice).
func nice(t *testing.T) int {
	t.Helper()
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, syscall.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	return 20 - p
}

// A query's execution cannot pause between batches (DuckDB computes the
// result whole): with loads to give way to, it runs at the lowest CPU
// priority, on a thread that ends with it, so that no other goroutine
// inherits the priority; without, where it was called.
func TestExecutionRunsBelowTheLoads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := nice(t)
	var got int
	yielder{loads: newLoadsFake(), max: time.Second}.run(func() { got = nice(t) })
	if got != 19 {
		t.Errorf("the execution ran at nice %d, want 19", got)
	}
	if n := nice(t); n != caller {
		t.Errorf("the caller's thread went from nice %d to %d", caller, n)
	}
	yielder{}.run(func() { got = nice(t) })
	if got != caller {
		t.Errorf("without loads the execution ran at nice %d, want the caller's %d", got, caller)
	}
}
