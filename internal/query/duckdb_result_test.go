package query

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
)

// bulkRows are the rows of the 'bulk' trace the tests below load.
const bulkRows = 400_000

// failingLater is a query over the lake's otel_spans that fails at the
// last row of the 'bulk' trace (duration_ms 0 to bulkRows-1, loaded in
// that order), several times DuckDB's streaming buffer past the first.
const failingLater = `SELECT CASE WHEN duration_ms = 399999 AND trace_id = 'bulk' THEN error('the last row fails') ELSE duration_ms END AS d FROM otel_spans`

// bulkIceLake is an Iceberg lake with bulkRows spans of tenant a's 'bulk'
// trace more, in one load, their duration_ms 0 to bulkRows-1.
//
// DuckDB runs its queries on the reading thread alone: a query failing on
// a worker thread of DuckDB 1.5 may reach the reader as interrupted, its
// error lost (errWorkerFailed), which the tests below do not look at.
func bulkIceLake(t *testing.T) *iceLake {
	t.Helper()
	l := newIceLake(t, IcebergOptions{ScanConcurrency: 1, BatchRows: 4096, Threads: 1})
	spans := make([]span, bulkRows)
	for i := range spans {
		spans[i] = span{"a", "bulk", "n", int64(i), day(2)}
	}
	l.load(t, spans, nil)
	return l
}

// The Iceberg reader's results stream: their first batches reach the
// reader before DuckDB has made the rest (here, before a row that fails
// the query), DuckDB reading the scan only a bounded way ahead of the
// client, and a result cut short by a failure ends with its error, never
// as a whole one. Materialized, the query itself failed and no batch
// came; streaming with insertion order kept, DuckDB read the whole scan
// before the first batch.
func TestIcebergReadStreamsAndAFailureLaterIsTheReadsError(t *testing.T) {
	l := bulkIceLake(t)
	rr, err := l.reader.Query(context.Background(), tenantA, failingLater)
	if err != nil {
		t.Fatalf("the query failed before its first batch (a materialized result): %v", err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatalf("no batch came before the failure: %v", rr.Err())
	}
	// What DuckDB holds made ahead of the reader is bounded: the scan
	// has not handed it the table.
	l.mu.Lock()
	scanned := l.scanned
	l.mu.Unlock()
	if scanned >= bulkRows {
		t.Errorf("at the first batch the scan had handed DuckDB %d rows: the whole table, read ahead of the client", scanned)
	}
	n := rr.RecordBatch().NumRows()
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err == nil || !strings.Contains(err.Error(), "the last row fails") {
		t.Fatalf("after %d rows the read ended with %v, want the failure", n, err)
	}
	if n >= bulkRows {
		t.Fatalf("read %d rows: the whole result despite the failure", n)
	}
}

// lateConversion fails at the last row of the 'bulk' trace with the
// caller's mistake (a string that is no number), several times DuckDB's
// streaming buffer past the first.
const lateConversion = `SELECT CAST(CASE WHEN duration_ms = 399999 AND trace_id = 'bulk' THEN 'x' ELSE duration_ms::VARCHAR END AS BIGINT) AS d FROM otel_spans`

// A query's own mistake is a RefusedError (Flight SQL's InvalidArgument)
// wherever the result meets it: when the query runs, as a materialized
// result does, or at a later batch, as a streaming one does.
func TestIcebergLateQueryErrorIsRefused(t *testing.T) {
	l := bulkIceLake(t)
	rr, err := l.reader.Query(context.Background(), tenantA, lateConversion)
	if err != nil {
		t.Fatalf("the query failed before its first batch: %v", err)
	}
	defer rr.Release()
	batches := 0
	for rr.Next() {
		batches++
	}
	var re *RefusedError
	if err := rr.Err(); !errors.As(err, &re) {
		t.Fatalf("after %d batches the read ended with %T %v, want a *RefusedError (the DuckDB reader's for the same query)", batches, err, err)
	}
	if batches == 0 {
		t.Fatal("no batch before the failure: the test no longer shows a failure met while streaming")
	}
}

// An interrupt the read did not make (its context is live) is a query
// failed on a DuckDB worker whose error DuckDB lost: said so, never
// passed on as DuckDB's bare "Interrupted!", which reads as a cancel. An
// interrupt the read made comes with the context's error.
func TestAnInterruptNotTheReadsIsAWorkersLostError(t *testing.T) {
	interrupted := &duckdb.Error{Type: duckdb.ErrorTypeInterrupt, Msg: "INTERRUPT Error: Interrupted!"}
	err := duckdbResultError(context.Background(), interrupted)
	if !errors.Is(err, errWorkerFailed) {
		t.Fatalf("a live read's interrupt: %v, want errWorkerFailed", err)
	}
	var re *RefusedError
	if errors.As(queryError(err), &re) {
		t.Errorf("a lost worker's error was refused as the caller's query: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := duckdbResultError(ctx, interrupted); !errors.Is(err, context.Canceled) || errors.Is(err, errWorkerFailed) {
		t.Errorf("a cancelled read's interrupt: %v, want the context's error", err)
	}
	conversion := &duckdb.Error{Type: duckdb.ErrorTypeConversion, Msg: "Conversion Error: x"}
	if err := duckdbResultError(context.Background(), conversion); err != conversion {
		t.Errorf("a conversion error: %v, want it as DuckDB gave it", err)
	}
}

// A DuckDB sink's database is read materialized: DuckDB computes a
// result when its query runs, so a row that fails the query fails it
// before any batch goes out, and the read's transaction ends there, not
// when the client has read the last batch (see
// TestLoadsCheckpointBesideAStreamingReadAfterAnUpdate in
// internal/sink/duckdb for why).
func TestDuckDBReadsAreMaterialized(t *testing.T) {
	for _, loads := range []Loads{nil, newLoadsFake()} {
		t.Run(fmt.Sprintf("loads=%v", loads != nil), func(t *testing.T) {
			l := newLake(t)
			if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'bulk', 'n', i FROM range(400000) t(i)`); err != nil {
				t.Fatal(err)
			}
			r, err := NewDuckDB(context.Background(), l.db, DuckDBOptions{Loads: loads})
			if err != nil {
				t.Fatal(err)
			}
			rr, err := r.Query(context.Background(), tenantA, failingLater)
			if err == nil {
				rr.Release()
				t.Fatal("the query's later failing row did not fail the query before its first batch: the result streams")
			}
			if !strings.Contains(err.Error(), "the last row fails") {
				t.Fatalf("the query failed with %v, want its failing row's error", err)
			}
		})
	}
}

// A read whose context ends stops at its next batch with the context's
// error, even where DuckDB holds the rest made (a materialized result):
// a cancelled client, or query.timeout, is never handed more rows.
func TestReadEndsWithItsContext(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'bulk', 'n', i FROM range(100000) t(i)`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr, err := l.reader.Query(ctx, tenantA, `SELECT duration_ms FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	cancel()
	if rr.Next() {
		t.Fatal("a batch came after the read's context ended")
	}
	if err := rr.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("the read ended with %v, want its context's error", err)
	}
}

// The handles the reads take from duckdb-go are where this release keeps
// them: an upgrade that moves them fails here first.
func TestDuckDBGoHandlesFound(t *testing.T) {
	if _, err := duckdbHandles(); err != nil {
		t.Fatal(err)
	}
}
