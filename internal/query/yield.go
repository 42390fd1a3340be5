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
// in flight, or for at most max, whichever comes first; the query itself
// runs below the loads' CPU priority (run). The bound is what
// keeps a read going under loads that never pause (a busy pipeline's
// come back to back): it then moves by one step (its query, or one batch)
// per max, never stops. A waiting read holds its connection and its
// materialized result, no lock and no transaction (DuckDB's result is
// computed whole when the query runs, and its transaction is over by
// then), so a load never waits for it.
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

// reader is rr waiting before each batch after the first (see yielder);
// with no loads, rr itself.
func (y yielder) reader(ctx context.Context, rr array.RecordReader) array.RecordReader {
	if y.loads == nil {
		return rr
	}
	return &yieldingReader{RecordReader: rr, ctx: ctx, y: y}
}

// yieldingReader is a query's reader that gives way to loads between
// batches; Retain and Release are the reader's.
type yieldingReader struct {
	array.RecordReader
	ctx     context.Context
	y       yielder
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
	return r.RecordReader.Next()
}

func (r *yieldingReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.RecordReader.Err()
}

// run runs a query's execution, f. DuckDB computes a result whole when
// its query runs (duckdb-go's results are materialized), on the calling
// thread (and DuckDB's worker threads, beside the pipeline none on 2
// cores): that cannot pause between batches, so with loads to give way
// to it runs on a thread of its own at the lowest CPU priority, which
// the loads' threads take the cores from while they need them. The
// thread ends with it (never handed back to the Go runtime at that
// priority). What it does not cover: DuckDB's worker threads (threads
// > 1) run their share of the query at theirs, and a lock inside DuckDB
// the query holds briefly may keep a load waiting for the query's slice
// of CPU (the scheduler's milliseconds, not the query's time).
func (y yielder) run(f func()) {
	if y.loads == nil {
		f()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Never unlocked: the thread exits with this goroutine.
		runtime.LockOSThread()
		_ = lowestPriority() // at worst, the read runs at the loads' priority
		f()
	}()
	<-done
}
