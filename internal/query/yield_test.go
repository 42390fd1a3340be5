package query

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// loadsFake is a Loads whose loads the test starts and ends; each Idle
// call is reported on asked, so a test knows a read is about to wait.
type loadsFake struct {
	mu    sync.Mutex
	idle  chan struct{}
	asked chan struct{}
}

func newLoadsFake() *loadsFake {
	f := &loadsFake{idle: make(chan struct{}), asked: make(chan struct{}, 100)}
	close(f.idle)
	return f
}

func (f *loadsFake) Idle() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.asked <- struct{}{}:
	default:
	}
	return f.idle
}

// begin starts a load; end ends it.
func (f *loadsFake) begin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idle = make(chan struct{})
}

func (f *loadsFake) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.idle)
}

// drainAsked forgets the Idle calls so far.
func (f *loadsFake) drainAsked() {
	for {
		select {
		case <-f.asked:
		default:
			return
		}
	}
}

// yieldLake is a database of one table of n rows (several of DuckDB's
// 2,048-row batches) and a reader of it yielding to loads, each wait at
// most wait.
func yieldLake(t *testing.T, n int, loads Loads, wait time.Duration) *DuckDB {
	t.Helper()
	db, err := sql.Open("duckdb", filepath.Join(t.TempDir(), "lake.duckdb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE otel_spans AS SELECT 'a' AS tenant_id, i FROM range(%d) t(i)`, n)); err != nil {
		t.Fatal(err)
	}
	r, err := NewDuckDB(context.Background(), db, DuckDBOptions{Loads: loads, YieldWait: wait, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// afterEnd runs step while a load is in flight and checks that it
// returned only after the load ended: it must ask whether loads are idle
// first, and the load ends once it has.
func afterEnd(t *testing.T, loads *loadsFake, what string, step func()) {
	t.Helper()
	loads.drainAsked()
	loads.begin()
	var ended atomic.Bool
	done := make(chan bool)
	go func() {
		step()
		done <- ended.Load()
	}()
	select {
	case <-loads.asked:
	case <-done:
		t.Fatalf("%s went ahead while a load was in flight, without waiting for it", what)
	}
	ended.Store(true)
	loads.end()
	if !<-done {
		t.Fatalf("%s went ahead before the load in flight ended", what)
	}
}

// A read in the loading process gives way to loads in flight: its query
// runs, and each batch after the first is fetched, once no load is in
// flight (loads lost half their speed to a client streaming a table:
// docs/BENCHMARKS.md, "2026-12-03, read_path").
func TestReadWaitsForLoadsInFlight(t *testing.T) {
	loads := newLoadsFake()
	r := yieldLake(t, 5000, loads, time.Hour) // 3 batches
	var rr array.RecordReader
	var err error
	afterEnd(t, loads, "the query", func() {
		rr, err = r.Query(context.Background(), tenancy.One("a"), "SELECT i FROM otel_spans")
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatalf("no first batch: %v", rr.Err())
	}
	rows := rr.RecordBatch().NumRows()
	for {
		var more bool
		afterEnd(t, loads, "the next batch", func() { more = rr.Next() })
		if !more {
			break
		}
		rows += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != 5000 {
		t.Fatalf("read %d rows, want 5000", rows)
	}
}

// The first batch comes without a wait of its own: the query waited just
// before it ran, and a one-batch query (an aggregate) waits once.
func TestFirstBatchDoesNotWaitAgain(t *testing.T) {
	loads := newLoadsFake()
	r := yieldLake(t, 10, loads, time.Hour)
	rr, err := r.Query(context.Background(), tenancy.One("a"), "SELECT count(*) FROM otel_spans")
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	loads.begin() // a load that begins after the query ran
	defer loads.end()
	got := make(chan bool, 1)
	go func() { got <- rr.Next() && rr.RecordBatch().NumRows() == 1 }()
	select {
	case ok := <-got:
		if !ok {
			t.Fatalf("no batch: %v", rr.Err())
		}
	case <-time.After(time.Minute):
		t.Fatal("the first batch waited for the load that began after the query ran")
	}
}

// Loads that never pause (a busy pipeline's come back to back) slow a
// read but never stop it: each wait ends after YieldWait.
func TestReadProgressesUnderContinuousLoads(t *testing.T) {
	loads := newLoadsFake()
	loads.begin() // and never ends
	r := yieldLake(t, 5000, loads, time.Millisecond)
	done := make(chan error, 1)
	go func() {
		got, err := readRows(r, tenancy.One("a"), "SELECT i FROM otel_spans")
		if err == nil && len(got) != 5000 {
			err = errors.New("not every row read")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the read made no progress in a minute of loads in flight")
	}
}

// A read waiting for loads ends with its caller: the error is the
// context's, and its slot is free for the next query.
func TestWaitingReadEndsWithItsContext(t *testing.T) {
	loads := newLoadsFake()
	loads.begin()
	r := yieldLake(t, 10, loads, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Query(ctx, tenancy.One("a"), "SELECT i FROM otel_spans")
		done <- err
	}()
	select {
	case <-loads.asked:
	case err := <-done:
		t.Fatalf("the query went ahead while a load was in flight (%v)", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	loads.end()
	if _, err := readRows(r, tenancy.One("a"), "SELECT count(*) FROM otel_spans"); err != nil {
		t.Fatalf("the next query (MaxConcurrent 1): %v", err)
	}
}
