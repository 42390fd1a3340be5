package query

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
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

// A query's work cannot pause halfway (its execution, the making of a
// batch): with loads to give way to, it runs at the lowest CPU priority,
// every call of one read on the same thread, which ends with the read, so
// that no other goroutine inherits the priority; without, where it was
// called.
func TestReadWorkRunsBelowTheLoads(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	caller := nice(t)
	th := yielder{loads: newLoadsFake(), max: time.Second}.thread()
	var got [2]int
	var tids [2]int
	for i := range got {
		th.do(func() { got[i], tids[i] = nice(t), syscall.Gettid() })
	}
	th.stop()
	if got != [2]int{19, 19} {
		t.Errorf("the read's calls ran at nice %v, want 19", got)
	}
	if tids[0] != tids[1] || tids[0] == syscall.Gettid() {
		t.Errorf("the read's calls ran on threads %v, want one thread of their own (the caller's is %d)", tids, syscall.Gettid())
	}
	if n := nice(t); n != caller {
		t.Errorf("the caller's thread went from nice %d to %d", caller, n)
	}
	var none *niceThread = yielder{}.thread()
	none.do(func() { got[0] = nice(t) })
	none.stop()
	if got[0] != caller {
		t.Errorf("without loads the read ran at nice %d, want the caller's %d", got[0], caller)
	}
}

// With loads to give way to, each batch of a read is made on its nice
// thread: results stream, so making a batch is most of a query's work.
func TestBatchesAreMadeBelowTheLoads(t *testing.T) {
	y := yielder{loads: newLoadsFake(), max: time.Second}
	th := y.thread()
	defer th.stop()
	src := &niceReader{t: t, left: 3}
	rr := y.reader(context.Background(), src, th)
	for rr.Next() {
	}
	if len(src.nices) != 4 {
		t.Fatalf("Next ran %d times, want 4", len(src.nices))
	}
	for i, n := range src.nices {
		if n != 19 {
			t.Errorf("call %d of Next ran at nice %d, want 19", i, n)
		}
	}
}

// A panic in a read's work on its thread is the caller's, not the
// process's end.
func TestPanicOnTheNiceThreadIsTheCallers(t *testing.T) {
	th := yielder{loads: newLoadsFake(), max: time.Second}.thread()
	defer th.stop()
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want the panic of the call", p)
		}
	}()
	th.do(func() { panic("boom") })
}

// niceReader is a reader of left empty batches that records the nice
// value of the thread each Next runs on.
type niceReader struct {
	array.RecordReader
	t     *testing.T
	left  int
	nices []int
}

func (r *niceReader) Next() bool {
	r.nices = append(r.nices, nice(r.t))
	r.left--
	return r.left >= 0
}
