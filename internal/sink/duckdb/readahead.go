package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"

	"github.com/google/uuid"

	"github.com/tracelake/tracelake/internal/sink"
)

// readAhead is the main table's rows of a load's staged files (raw rows,
// each value parsed as JSON, or the rows of a typed table), read into a
// temporary table while another load holds the load lock.
//
// A load has two parts in DuckDB: reading the staged files into its
// transaction (splitting the lines, parsing the values) and the commit
// (the checkpoint compresses and writes the rows). Only one load commits
// at a time, but the workers of a pipeline load side by side:
// read ahead, the next load parses its files while the one before it
// commits, and inserting the parsed rows under the lock costs about a
// fifth of reading them (docs/BENCHMARKS.md, "read_ahead").
//
// The temporary table is in DuckDB's temporary database, which has its
// own transactions and checkpoints: reading into it takes no lock of the
// database file, so it never keeps the committing load from checkpointing
// (DuckTransactionManager::CanCheckpoint needs the only writer of the
// file, and CommitTransaction releases its transaction lock while it
// checkpoints, so other transactions start meanwhile; v1.5).
//
// The table holds every row of the files: the load's filter leaves out
// those the fence covers, as it does reading the files, including the
// rows of a file the plan leaves out because the ledger covers it whole.
type readAhead struct {
	conn  *sql.Conn // the temporary table's connection; the load runs on it
	table string
}

// readAheadMaxLine is the longest staged line of a load read ahead. The
// gain is in the work per row (splitting lines, parsing values); a load
// of ~1 MB values is mostly copying bytes, which the temporary table only
// doubles: with 1 MB values reading ahead was no faster and the peak RSS
// 45–120 MiB higher (docs/BENCHMARKS.md, "read_ahead").
const readAheadMaxLine = 64 << 10

// readAhead reads the main table's rows of files into a temporary table
// (derived rows, genai_operations, the load reads itself); nil in
// transform mode (each row is checked against the user's table), when
// there are none, a line is longer than readAheadMaxLine, or reading
// fails: the load then reads the files itself, and any error (a value
// DuckDB's JSON parser rejects, a file the ledger covers that is gone,
// memory) is its to handle.
func (s *Sink) readAhead(ctx context.Context, files []sink.File) *readAhead {
	if s.opt.Transform {
		return nil
	}
	var paths []string
	maxLine := 0
	for _, f := range files {
		if f.RowsPath != "" {
			paths = append(paths, f.RowsPath)
			maxLine = max(maxLine, f.MaxLine)
		}
	}
	if len(paths) == 0 || maxLine > readAheadMaxLine {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil
	}
	name := "read_ahead_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	src := "uuid, koffset, kpartition, raw_data::JSON AS raw_data, record_metadata FROM " + rawSource(paths, maxLine)
	if s.opt.Typed != nil {
		src = "* FROM " + typedSource(s.opt.Typed, paths, maxLine)
	}
	q := "CREATE TEMP TABLE " + name + " AS SELECT " + src
	if _, err := conn.ExecContext(ctx, q); err != nil {
		s.log.Debug("reading a load's files ahead failed; the load reads them", "err", err)
		conn.Close()
		return nil
	}
	return &readAhead{conn: conn, table: "temp." + name}
}

// close drops the temporary table and hands the connection back; a
// connection whose table could not be dropped is closed instead, so no
// later load finds it holding the rows.
func (a *readAhead) close() {
	if a == nil {
		return
	}
	if _, err := a.conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+a.table); err != nil {
		_ = a.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	a.conn.Close()
}
