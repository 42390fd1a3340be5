package iceberg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/sink"
)

// rowCheck counts, among a declared table's rows beyond their message's
// first (index > 0), those stored twice (one partition, offset and index)
// and the indexes missing below a message's largest stored one. The runs
// of sink.Offsets see each message by its first row only, and with no
// ledger nothing else counts a message's other rows. A message's rows are
// not together in the table (compaction sorts a span table by trace id),
// so they are grouped by a scratch DuckDB database in a temporary
// directory, which spills to disk: memory stays bounded for a table of
// hundreds of millions of rows.
type rowCheck struct {
	dir string
	db  *sql.DB
	ids map[sink.TopicPartition]int32 // a partition's number in the scratch table
	tps []sink.TopicPartition         // by number
}

// rowCheckMemory is the scratch database's memory limit: the spans past
// their message's first take 16 bytes each in its table, so ~16 million
// of them before it spills.
const rowCheckMemory = "256MiB"

// newRowCheck opens the scratch database.
func newRowCheck(ctx context.Context) (*rowCheck, error) {
	dir, err := os.MkdirTemp("", "tracelake-rows-")
	if err != nil {
		return nil, fmt.Errorf("scratch directory for the rows' check: %w", err)
	}
	// A database file, not an in-memory one: its tables and the
	// aggregation's spills go to that directory once past DuckDB's memory
	// limit.
	db, err := sql.Open("duckdb", filepath.Join(dir, "rows.duckdb")+"?autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("open the rows' check database: %w", err)
	}
	db.SetMaxOpenConns(1)
	c := &rowCheck{dir: dir, db: db, ids: map[sink.TopicPartition]int32{}}
	// Insertion order does not matter to a GROUP BY; keeping it would
	// hold more in memory. DuckDB's default memory limit is 80% of the
	// machine's memory, which the process reading the table beside it
	// (verify, or a run's status page) does not have to spare: the
	// aggregation spills past rowCheckMemory instead.
	for _, q := range []string{`SET preserve_insertion_order = false`, `SET memory_limit = '` + rowCheckMemory + `'`,
		`CREATE TABLE r (tp INTEGER, o BIGINT, k INTEGER)`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			c.close()
			return nil, fmt.Errorf("prepare the rows' check database: %w", err)
		}
	}
	return c, nil
}

// load runs scan with a function that adds one row of partition tp at
// offset o and index k to the scratch table.
func (c *rowCheck) load(ctx context.Context, scan func(add func(tp sink.TopicPartition, o int64, k int32) error) error) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("the rows' check database: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", "r")
		if err != nil {
			return fmt.Errorf("append to the rows' check database: %w", err)
		}
		err = scan(func(tp sink.TopicPartition, o int64, k int32) error {
			id, ok := c.ids[tp]
			if !ok {
				id = int32(len(c.tps))
				c.ids[tp] = id
				c.tps = append(c.tps, tp)
			}
			return app.AppendRow(id, o, k)
		})
		if cerr := app.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("append to the rows' check database: %w", cerr)
		}
		return err
	})
}

// rowCheckSQL counts per partition the rows whose (offset, index) is
// stored again, and the indexes from 1 to each message's largest stored
// one that no row has. Plain counts over two GROUP BYs, not
// count(DISTINCT): DuckDB's hash aggregate spills them to disk.
const rowCheckSQL = `SELECT tp, CAST(sum(repeated) AS BIGINT), CAST(sum(missing) AS BIGINT) FROM (
	SELECT tp, o, sum(n) - count(*) AS repeated, max(k) - count(*) AS missing
	FROM (SELECT tp, o, k, count(*) AS n FROM r GROUP BY tp, o, k) AS per_row
	GROUP BY tp, o) AS per_message
GROUP BY tp`

// count sets the RepeatedRows and MissingRows of out's partitions.
func (c *rowCheck) count(ctx context.Context, out map[sink.TopicPartition]*sink.Offsets) error {
	rows, err := c.db.QueryContext(ctx, rowCheckSQL)
	if err != nil {
		return fmt.Errorf("count the rows of messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int32
		var repeated, missing int64
		if err := rows.Scan(&id, &repeated, &missing); err != nil {
			return fmt.Errorf("count the rows of messages: %w", err)
		}
		if id < 0 || int(id) >= len(c.tps) {
			return fmt.Errorf("count the rows of messages: unknown partition number %d", id)
		}
		tp := c.tps[id]
		if out[tp] == nil {
			out[tp] = &sink.Offsets{}
		}
		out[tp].RepeatedRows, out[tp].MissingRows = repeated, missing
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count the rows of messages: %w", err)
	}
	return nil
}

// close closes the scratch database and removes its directory; again,
// it does nothing.
func (c *rowCheck) close() error {
	if c.db == nil {
		return nil
	}
	err := c.db.Close()
	c.db = nil
	if rerr := os.RemoveAll(c.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("close the rows' check database: %w", err)
	}
	return nil
}
