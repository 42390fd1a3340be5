package directload

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// On Iceberg a load commits the dead-letter table first and the main
// table last. When the main table's commit fails once after the
// dead-letter table's landed, the load is tried again with the same staged
// rows (LoadAttempts): the retry finds the dead letters in (its own first
// attempt put them there) and commits the main table. The request is then
// stored, and must be answered so: told to retry, its client sends it
// again and the dead-letter table holds it twice (the positions resume
// past the completed load, so nothing removes the first copy).
func TestIcebergLoadCompletedByItsRetryIsAnsweredStored(t *testing.T) {
	dir := t.TempDir()
	catalogPath := filepath.Join(dir, "catalog.db")
	lockDB, err := sql.Open(sqliteshim.ShimName, "file:"+catalogPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lockDB.Close() })
	var (
		mu    sync.Mutex
		armed = true
		lock  *sql.Conn
	)
	unlock := func() {
		if lock != nil {
			_, _ = lock.ExecContext(context.Background(), "ROLLBACK")
			lock.Close()
			lock = nil
		}
	}
	onCommit := func(st iceberg.CommitStats) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case armed && strings.HasSuffix(st.Table, "_dlq") && !st.Failed && !st.Conflict:
			armed = false
			// The catalog fails the next commit (the main table's): its
			// database is locked past the busy timeout.
			c, err := lockDB.Conn(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
				t.Error(err)
			}
			lock = c
		case st.Failed:
			unlock() // once: the retry commits
		}
	}
	t.Cleanup(func() { mu.Lock(); unlock(); mu.Unlock() })
	s, err := iceberg.Open(context.Background(), iceberg.Options{Table: otel.Spans.Name, Typed: &otel.Spans, OnCommit: onCommit,
		Catalog: catalogPath, Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := startGenAILoader(t, s)
	garbage := []byte{0xff, 0xff, 0xff, 0xff} // the decoder refuses it: a dead letter
	if err := forward(l, garbage); err != nil {
		t.Logf("answered %v; the client retries", err)
		if err := forward(l, garbage); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	injected := !armed
	mu.Unlock()
	if !injected {
		t.Fatal("the dead-letter table's commit was never seen: the fault was not injected")
	}
	_, dlq, tp := storedOf(t, s)
	if dlq[tp] == nil || dlq[tp].Count() != 1 {
		t.Errorf("dead letters of the one refused request: %v, want 1", dlq[tp])
	}
}
