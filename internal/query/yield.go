package query

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// Loads are the loads into the database a DuckDB reader reads, as the
// loading process signals them (the DuckDB sink's Loading): reads give
// way to them, so that ingest keeps its speed while a client reads.
type Loads interface {
	// Idle is closed once no load is in flight (at once when none is).
	Idle() <-chan struct{}
}

// DefaultYieldWait is DuckDBOptions.YieldWait's default.
const DefaultYieldWait = time.Second

// yielder makes a read give way to the loads in flight: before its query
// runs and before each batch after the first, it waits until no load is
// in flight, or for at most max, whichever comes first; the query's work
// (its execution, and the fetch of each batch) runs below the loads' CPU
// priority (niceThread). The bound is what keeps a read going under loads
// that never pause (a busy pipeline's come back to back): it then moves
// by one step (its query, or one batch) per max, never stops. In the
// loading process a result is materialized (runQuery): a waiting read
// holds its connection and its computed result, no lock and no
// transaction (its transaction ended when its query ran), so a load never
// waits for it and DuckDB checkpoints as it would without it.
type yielder struct {
	loads Loads // nil: reads never wait
	max   time.Duration
}

// wait returns once no load is in flight or y.max has passed, or with
// ctx's error when it ends first.
func (y yielder) wait(ctx context.Context) error {
	if y.loads == nil {
		return nil
	}
	idle := y.loads.Idle()
	select {
	case <-idle:
		return nil
	default:
	}
	t := time.NewTimer(y.max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("wait for the loads in flight: %w", ctx.Err())
	}
	return nil
}

// reader is rr waiting before each batch after the first (see yielder)
// and making it on t; with no loads, rr itself.
func (y yielder) reader(ctx context.Context, rr array.RecordReader, t *niceThread) array.RecordReader {
	if y.loads == nil {
		return rr
	}
	return &yieldingReader{RecordReader: rr, ctx: ctx, y: y, t: t}
}

// yieldingReader is a query's reader that gives way to loads between
// batches; Retain and Release are the reader's.
type yieldingReader struct {
	array.RecordReader
	ctx     context.Context
	y       yielder
	t       *niceThread
	started bool
	err     error
}

func (r *yieldingReader) Next() bool {
	if r.err != nil {
		return false
	}
	if r.started {
		if r.err = r.y.wait(r.ctx); r.err != nil {
			return false
		}
	}
	r.started = true
	var ok bool
	r.t.do(func() { ok = r.RecordReader.Next() })
	return ok
}

func (r *yieldingReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.RecordReader.Err()
}

// niceThread runs a read's DuckDB work, one call at a time, on an OS
// thread of its own at the lowest CPU priority, which the loads' threads
// take the cores from while they need them: the query's execution (DuckDB
// computes a materialized result whole, without a pause) and the fetch of
// each batch. The thread ends with
// the read (stop), never handed back to the Go runtime at that priority.
// What it does not cover: DuckDB's worker threads (threads > 1) run
// their share of the query at theirs, and a lock inside DuckDB the query
// holds briefly may keep a load waiting for the query's slice of CPU (the
// scheduler's milliseconds, not the query's time).
type niceThread struct {
	calls chan func()
	done  chan any // each call's panic, or nil
}

// thread starts a read's niceThread; with no loads to give way to, nil,
// which runs each call where it is made.
func (y yielder) thread() *niceThread {
	if y.loads == nil {
		return nil
	}
	t := &niceThread{calls: make(chan func()), done: make(chan any)}
	go func() {
		// Never unlocked: the thread exits with this goroutine.
		runtime.LockOSThread()
		_ = lowestPriority() // at worst, the read runs at the loads' priority
		for f := range t.calls {
			t.done <- call(f)
		}
	}()
	return t
}

// do runs f on t and returns when it has; a panic in f is do's.
func (t *niceThread) do(f func()) {
	if t == nil {
		f()
		return
	}
	t.calls <- f
	if p := <-t.done; p != nil {
		panic(p)
	}
}

// stop ends t's thread; t takes no call after it.
func (t *niceThread) stop() {
	if t != nil {
		close(t.calls)
	}
}

// call runs f, returning its panic.
func call(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
