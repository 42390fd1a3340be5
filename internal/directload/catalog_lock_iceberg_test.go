package directload

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/uptrace/bun/driver/sqliteshim"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// catalogLock fails the Iceberg commits that follow a table's commit: once
// a commit of a table named with suffix lands, it takes the SQLite
// catalog's database in an exclusive transaction, so the next commits
// wait past the busy timeout and fail, until unlock (or, with
// unlockOnFailure, the first failed commit) lets them through.
type catalogLock struct {
	t               *testing.T
	db              *sql.DB
	suffix          string
	unlockOnFailure bool

	mu    sync.Mutex
	armed bool
	lock  *sql.Conn
}

func newCatalogLock(t *testing.T, catalogPath, suffix string, unlockOnFailure bool) *catalogLock {
	t.Helper()
	db, err := sql.Open(sqliteshim.ShimName, "file:"+catalogPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	c := &catalogLock{t: t, db: db, suffix: suffix, unlockOnFailure: unlockOnFailure, armed: true}
	t.Cleanup(func() { c.unlock(); db.Close() })
	return c
}

// onCommit is the sink's iceberg.Options.OnCommit.
func (c *catalogLock) onCommit(st iceberg.CommitStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.armed && strings.HasSuffix(st.Table, c.suffix) && !st.Failed && !st.Conflict:
		c.armed = false
		conn, err := c.db.Conn(context.Background())
		if err != nil {
			c.t.Error(err)
			return
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
			c.t.Error(err)
		}
		c.lock = conn
	case st.Failed && c.unlockOnFailure:
		c.release()
	}
}

func (c *catalogLock) unlock() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release()
}

func (c *catalogLock) release() {
	if c.lock != nil {
		_, _ = c.lock.ExecContext(context.Background(), "ROLLBACK")
		c.lock.Close()
		c.lock = nil
	}
}

// injected reports whether the lock was taken.
func (c *catalogLock) injected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.armed
}

// openLockedSpans opens and prepares an Iceberg sink of otel_spans (and
// genai_operations, with derived) in dir whose commits a catalogLock of
// suffix fails.
func openLockedSpans(t *testing.T, dir, suffix string, unlockOnFailure, derived bool) (*iceberg.Sink, *catalogLock) {
	t.Helper()
	catalogPath := filepath.Join(dir, "catalog.db")
	c := newCatalogLock(t, catalogPath, suffix, unlockOnFailure)
	opt := iceberg.Options{Table: otel.Spans.Name, Typed: &otel.Spans, OnCommit: c.onCommit,
		Catalog: catalogPath, Warehouse: filepath.Join(dir, "warehouse"), Namespace: "tracelake"}
	if derived {
		opt.Derived, opt.DerivedTable = &genai.Table, "genai_operations"
	}
	s, err := iceberg.Open(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, c
}
