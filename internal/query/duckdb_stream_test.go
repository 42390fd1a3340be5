package query

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A read's result streams: its first batches reach the reader before
// DuckDB has made the rest (here, before a row that fails the query), and
// a result cut short by a failure ends with its error, never as a whole
// one. Materialized, the query itself failed and no batch came.
func TestReadStreamsAndAFailureLaterIsTheReadsError(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'bulk', 'n', i FROM range(300000) t(i)`); err != nil {
		t.Fatal(err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA,
		`SELECT CASE WHEN duration_ms = 250000 AND trace_id = 'bulk' THEN error('row 250000 fails') ELSE duration_ms END AS d FROM otel_spans`)
	if err != nil {
		t.Fatalf("the query failed before its first batch (a materialized result): %v", err)
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if n == 0 {
		t.Fatal("no batch came before the failure")
	}
	if err := rr.Err(); err == nil || !strings.Contains(err.Error(), "row 250000 fails") {
		t.Fatalf("after %d rows the read ended with %v, want the failure", n, err)
	}
	if n >= 300002 {
		t.Fatalf("read %d rows: the whole result despite the failure", n)
	}
}

// A streaming read holds its snapshot (a transaction) until it is
// released: the loads meanwhile commit, a CHECKPOINT writes them into
// the database (the write-ahead log emptied), and the read still streams the rows of its snapshot, all of them and no later one.
func TestLoadsCommitAndCheckpointBesideAStreamingRead(t *testing.T) {
	l := newLake(t)
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'bulk', 'n' || i, i FROM range(100000) t(i)`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`CHECKPOINT`); err != nil {
		t.Fatal(err)
	}
	rr, err := l.reader.Query(context.Background(), tenantA, `SELECT duration_ms FROM otel_spans`)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Release()
	if !rr.Next() {
		t.Fatal(rr.Err())
	}
	n := rr.RecordBatch().NumRows()
	if _, err := l.db.Exec(`INSERT INTO otel_spans SELECT 'a', 'later', repeat('x', 200), 1 FROM range(200000)`); err != nil {
		t.Fatalf("a load beside a streaming read: %v", err)
	}
	if _, err := l.db.Exec(`INSERT INTO otel_spans VALUES ('a', 'later', 'n', 2)`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(`CHECKPOINT`); err != nil {
		t.Fatalf("CHECKPOINT beside a streaming read: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(l.dir, "lake.duckdb.wal")); err == nil && fi.Size() > 0 {
		t.Errorf("the checkpoint left %d bytes in the write-ahead log: the loads were not checkpointed beside the read", fi.Size())
	}
	for rr.Next() {
		n += rr.RecordBatch().NumRows()
	}
	if err := rr.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 100002 {
		t.Fatalf("streamed %d rows, want the 100,002 of the read's snapshot", n)
	}
}

// The handles the streaming reads take from duckdb-go are where this
// release keeps them: an upgrade that moves them fails here first.
func TestDuckDBGoHandlesFound(t *testing.T) {
	if _, err := duckdbHandles(); err != nil {
		t.Fatal(err)
	}
}
