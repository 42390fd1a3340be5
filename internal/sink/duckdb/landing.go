package duckdb

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Routed rows land first, then are distributed. A load of routed rows
// (database change capture) inserts every routed table's rows of its
// batches into one landing table (<table>_landing: the changelog table's
// name and the row's JSON), in one statement fenced by the ledger as the
// raw table's rows are: what DuckDB charges per table and statement
// (about a millisecond, BENCHMARKS "cdc_insert_cost") is not paid per load
// for every table a load touches. The tables' columns are still created,
// added and widened by the load that brings them (ensureRouted), so the
// decoders' checks see the catalog as before.
//
// Distribute moves the landed rows into their changelog tables, typed,
// one statement per table, and deletes them from the landing table in the
// same transaction, with what each table reached (<table>_routes_reached,
// which mergers and done marks read) computed from the rows moved: a
// changelog table, and its reach, holds rows once, whole, or not yet.
// Verify counts the ledger against the rows of both tables.

// Landing ends the name of the landing table of routed rows, after
// sink.table.
const Landing = "_landing"

// landingColumns are the landing table's columns. bytes is the row's
// length as staged (strlen at the load, read without the row): the moves
// go by it (moveBudget). A table an older release made gains it at
// Prepare, its rows landed then null there, measured at the next move.
var landingColumns = []Column{{"log_table", "VARCHAR"}, {"row", "VARCHAR"}, {"bytes", "BIGINT"}}

// DefaultDistributeEvery is Options.DistributeEvery's default. Each
// distribution pays DuckDB's cost of an insert once per table it moves
// rows into, about 2 ms a table whatever its rows (BENCHMARKS
// "cdc_landing"): over a thousand tables, 2 s a distribution.
const DefaultDistributeEvery = 30 * time.Second

// landingExt names a batch's staged landing lines.
const landingExt = ".routed"

// landingBuffers hold a batch's landing lines while Stage writes them.
var landingBuffers = sync.Pool{New: func() any { return new([]byte) }}

// appendLandingRows appends the batch's routed rows as landing lines:
// the table's name, envelope.FieldSeparator, the row's JSON with its
// carriage returns as spaces (DuckDB's CSV reader ends a line there; in
// JSON they are whitespace between tokens). JSON has no other control
// character outside a string's escapes, and the routed names none.
func appendLandingRows(dst []byte, routed []sink.TableRows) ([]byte, error) {
	for _, t := range routed {
		if strings.ContainsFunc(t.Table, func(r rune) bool { return r < ' ' }) {
			return dst, fmt.Errorf("BUG: routed table name %q has a control character", t.Table)
		}
		for rows := t.Rows; len(rows) > 0; {
			line, rest, _ := bytes.Cut(rows, []byte{'\n'})
			rows = rest
			if len(line) == 0 {
				continue
			}
			if bytes.IndexByte(line, envelope.FieldSeparator) >= 0 {
				return dst, fmt.Errorf("BUG: a row of %s holds a raw control character (0x1f)", t.Table)
			}
			dst = append(dst, t.Table...)
			dst = append(dst, envelope.FieldSeparator)
			start := len(dst)
			dst = append(append(dst, line...), '\n')
			for i := bytes.IndexByte(dst[start:], '\r'); i >= 0; i = bytes.IndexByte(dst[start:], '\r') {
				dst[start+i] = ' '
				start += i + 1
			}
		}
	}
	return dst, nil
}

// readLanding is the table function reading staged landing lines.
func readLanding(files []string, maxLine int) string {
	return readDelimited(files, `{log_table: 'VARCHAR', "row": 'VARCHAR'}`, maxLine)
}

// landedCoordinates is the SQL of a landed row's coordinates, named as
// the changelog tables' columns, for the fence and for verify.
var landedCoordinates = fmt.Sprintf(`"row"->>'%[1]s' AS %[1]s, ("row"->>'%[2]s')::INTEGER AS %[2]s, ("row"->>'%[3]s')::BIGINT AS %[3]s, ("row"->>'%[4]s')::INTEGER AS %[4]s`,
	schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn, schema.IndexColumn)

// insertLanding inserts the plan's routed rows into the landing table, in
// one statement whatever the count of tables.
func (s *Sink) insertLanding(ctx context.Context, tx *sql.Tx, p loadPlan) error {
	var files []string
	for _, f := range p.routed {
		if !slices.Contains(files, f.Path) {
			files = append(files, f.Path)
		}
	}
	src := readLanding(files, p.maxLine)
	if p.rawFilter != "" {
		src = fmt.Sprintf(`(SELECT log_table, "row" FROM (SELECT *, %s FROM %s) WHERE %s)`, landedCoordinates, src, p.rawFilter)
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s (log_table, "row", bytes) SELECT log_table, "row", strlen("row") FROM %s`, s.tables.landing, src)); err != nil {
		return fmt.Errorf("insert routed rows into %s: %w", s.tables.landing, err)
	}
	if s.landedSince.IsZero() {
		s.landedSince = time.Now()
	}
	return nil
}

// Distribute moves the landed routed rows into their changelog tables,
// waiting for a load in progress. A table whose rows cannot be moved
// (its insert fails: a constraint an operator added, a column dropped)
// keeps them landed, counted by verify, and is reported in the error,
// while the other tables' rows move: one table never holds back the
// others. It returns the rows moved.
func (s *Sink) Distribute(ctx context.Context) (int64, error) {
	if !s.opt.Routed {
		return 0, nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	return s.distribute(ctx)
}

// Unmoved are the changelog tables whose landed changes could not move
// into them at the last try, with the reason (see Distribute).
func (s *Sink) Unmoved() map[string]error {
	if p := s.unmoved.Load(); p != nil {
		return *p
	}
	return nil
}

// Finish implements sink.Finisher: a stopped pipeline leaves its rows in
// their changelog tables.
func (s *Sink) Finish(ctx context.Context) error {
	n, err := s.Distribute(ctx)
	if n > 0 {
		s.log.Info("moved the landed changes into their changelog tables", "rows", n)
	}
	return err
}

// distributeIfDue moves the landed rows once the oldest rows landed
// since the last move have waited Options.DistributeEvery, or a table
// that could not move is due to be tried again, and otherwise makes sure
// a move comes then, even if no load does (a quiet source). It runs after
// each load, which has committed: a failure is logged, and the rows stay
// landed for the next move. Called with loadMu held.
func (s *Sink) distributeIfDue(ctx context.Context) {
	if s.closed {
		return
	}
	if at, ok := s.nextMove(); ok && !time.Now().Before(at) {
		if _, err := s.distribute(ctx); err != nil {
			s.log.Error("changes could not be moved from the landing table into their changelog tables; they stay landed and are moved again later", "err", err)
		}
	}
	at, ok := s.nextMove()
	if !ok {
		return
	}
	if now := time.Now(); !at.After(now) {
		// Still due: the move just made failed whole (the database, its
		// memory). Try again a wait later, not at once and again.
		at = now.Add(s.opt.DistributeEvery)
	}
	s.moveBy(at)
}

// moveBy makes sure a move comes at at or sooner. Called with loadMu
// held.
func (s *Sink) moveBy(at time.Time) {
	switch {
	case s.moveTimer == nil:
		s.moveTimer = time.AfterFunc(time.Until(at), s.moveWhenDue)
	case at.Before(s.moveAt):
		s.moveTimer.Reset(time.Until(at))
	default:
		return
	}
	s.moveAt = at
}

// MoveLanded arranges a move, at once and in the background, of the rows
// a process before this one left landed (killed before its Finish, or
// `tracelake dlq replay`'s), so that they do not wait for a load that a
// quiet source may never send. For the process that loads (tracelake
// run), after Prepare; a command that only reads never calls it.
func (s *Sink) MoveLanded(ctx context.Context) error {
	if !s.opt.Routed {
		return nil
	}
	var landed bool
	if err := s.db.QueryRowContext(ctx, fmt.Sprintf(`SELECT EXISTS (FROM %s)`, s.tables.landing)).Scan(&landed); err != nil {
		return fmt.Errorf("look for changes left in %s: %w", s.tables.landing, err)
	}
	if !landed {
		return nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.closed {
		return nil
	}
	if s.landedSince.IsZero() {
		s.landedSince = time.Now().Add(-s.opt.DistributeEvery) // they waited the downtime at least
	}
	s.moveBy(time.Now())
	return nil
}

// nextMove is when the next move is due: DistributeEvery after the
// oldest rows landed since the last (or nine times as long as the last
// move took, if longer: moves take at most a tenth of the time, whatever
// the count of tables), or a failed table's next try; false for none.
func (s *Sink) nextMove() (time.Time, bool) {
	var at time.Time
	if !s.landedSince.IsZero() {
		at = s.landedSince.Add(max(s.opt.DistributeEvery, 9*s.moveTook))
	}
	for _, f := range s.landingFailed {
		if at.IsZero() || f.retry.Before(at) {
			at = f.retry
		}
	}
	return at, !at.IsZero()
}

// moveWhenDue is the move a quiet source's landed rows, or a failed
// table's next try, wait for (see distributeIfDue).
func (s *Sink) moveWhenDue() {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	s.moveTimer = nil
	s.distributeIfDue(context.Background())
}

// distribute is Distribute with loadMu held. A table that failed before
// is left out of the move of the others, and tried alone once its wait
// has passed: DistributeEvery, doubling at each failure up to
// maxLandingWait.
func (s *Sink) distribute(ctx context.Context) (int64, error) {
	if err := s.freshRouted(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	defer s.publishUnmoved()
	moved, fresh, err := s.distributeTables(ctx, "", slices.Collect(maps.Keys(s.landingFailed)))
	if err != nil {
		return moved, err
	}
	s.landedSince, s.moveTook = time.Time{}, time.Since(start)
	for table, err := range fresh {
		s.log.Error("a changelog table's changes cannot be moved there; they stay in the landing table, the other tables go on", "table", table, "err", err)
		s.landingFailed[table] = landingFailure{err: err, wait: s.opt.DistributeEvery, retry: time.Now().Add(s.opt.DistributeEvery)}
	}
	for _, table := range slices.Sorted(maps.Keys(s.landingFailed)) {
		f := s.landingFailed[table]
		if fresh[table] != nil || time.Now().Before(f.retry) {
			continue
		}
		n, failed, err := s.distributeTables(ctx, table, nil)
		switch {
		case err != nil:
			return moved, err
		case failed[table] != nil:
			f.err, f.wait = failed[table], min(2*f.wait, max(maxLandingWait, s.opt.DistributeEvery))
			f.retry = time.Now().Add(f.wait)
			s.landingFailed[table] = f
		default:
			moved += n
			delete(s.landingFailed, table)
			s.log.Info("a changelog table's changes that could not move have moved", "table", table, "rows", n)
		}
	}
	if moved > 0 {
		s.log.Info("moved landed changes into their changelog tables", "rows", moved, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
	}
	if len(s.landingFailed) == 0 {
		return moved, nil
	}
	errs := make([]error, 0, len(s.landingFailed))
	for _, table := range slices.Sorted(maps.Keys(s.landingFailed)) {
		errs = append(errs, fmt.Errorf("changelog table %s: %w", table, s.landingFailed[table].err))
	}
	return moved, errors.Join(errs...)
}

// publishUnmoved makes the tables whose rows could not move Unmoved's.
func (s *Sink) publishUnmoved() {
	unmoved := make(map[string]error, len(s.landingFailed))
	for table, f := range s.landingFailed {
		unmoved[table] = f.err
	}
	s.unmoved.Store(&unmoved)
}

// landingFailure is a table whose landed rows could not move: why, and
// when to try again.
type landingFailure struct {
	err   error
	wait  time.Duration
	retry time.Time
}

// maxLandingWait bounds the wait between two tries of a table whose rows
// could not move: each try copies and converts all its landed rows.
const maxLandingWait = 10 * time.Minute

// distributeTables moves the landed rows of table only ("": of every
// table but skip's), in groups within moveBudget, one transaction
// each (distributeOnce), until none is left. A table whose insert fails
// is left out and the group run again without it (DuckDB aborts a
// transaction at its first error); such tables are returned with their
// errors. An error that is no table's (the database's, memory, the
// context) ends it, with the rows of the groups committed before it
// moved (and counted).
//
// Between two groups, and before a group that ran out of memory is tried
// again (once), the database is checkpointed (checkpointMoved): the
// values a group committed are held in memory until a checkpoint writes
// them, and DuckDB's automatic checkpoint, which counts a text value as
// 16 bytes of its log (LocalTableStorage::EstimatedSize, v1.5), does not
// come for big ones: beside another write transaction, when no
// checkpoint can run, 2,048 changes of 100 KB at a 128 MiB memory_limit
// ran it out half way, and the next move at its first group, at every
// try.
func (s *Sink) distributeTables(ctx context.Context, only string, skip []string) (int64, map[string]error, error) {
	failed := map[string]error{}
	var moved int64
	retried := false
	for {
		n, more, table, err := s.distributeOnce(ctx, only, skip)
		switch {
		case err == nil:
			moved += n
			if !more {
				return moved, failed, nil
			}
			s.checkpointMoved(ctx)
			retried = false
			continue
		case isOutOfMemory(err) && !retried && ctx.Err() == nil && s.checkpointMoved(ctx):
			retried = true
			continue
		case table == "" || isFatal(err) || isOutOfMemory(err) || ctx.Err() != nil:
			return moved, failed, err
		}
		failed[table] = err
		if only != "" {
			return moved, failed, nil
		}
		skip = append(skip, table)
	}
}

// checkpointMoved checkpoints the database for distributeTables, saying
// whether it did. One it cannot make (another write transaction is open:
// a merge's; DuckDB refuses rather than waits) is no error of the move:
// its next group may then run out of memory, and is tried again after
// the next checkpoint that can be made, at the latest at the next move.
func (s *Sink) checkpointMoved(ctx context.Context) bool {
	if _, err := s.db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		s.log.Debug("could not checkpoint between two groups of moved changes", "err", err)
		return false
	}
	return true
}

// moveBudget is how many bytes of landed rows (as staged) a move's
// transaction takes, given DuckDB's memory_limit (0: DuckDB's default,
// of which nothing is known here, taken as tracelake's 256 MiB): at most
// a quarter of it in all (group), and at most a sixteenth in any
// moveRun rows that follow each other in table and landing order (run);
// a first row bigger alone.
//
// DuckDB's JSON functions hold about four times the bytes of the rows of
// the vector they read (up to moveRun rows, in that order: a table's
// insert, what the rows reached), until its end: until 2026-12-07 a move
// took every landed row, and 24 rows of 12 MB landed between two moves
// ran the default 256 MiB out at every try, no table's changes (the small
// ones' neither) moving again. A group's total is bounded as the log
// between two checkpoints is (checkpointThresholdFor): a checkpoint pins
// the new values of the commits since the last. Small rows are cut by the
// total only: each group commits, and may checkpoint, every table it
// wrote (about as long as its inserts take with 1,000 tables), so
// groups are no smaller than memory needs.
func moveBudget(memoryLimit int64) (group, run int64) {
	if memoryLimit <= 0 {
		memoryLimit = 256 << 20
	}
	return max(16<<20, memoryLimit/4), max(4<<20, memoryLimit/16)
}

// moveRun is the count of rows a run of moveBudget counts: DuckDB's
// vector size (STANDARD_VECTOR_SIZE).
const moveRun = 2048

// distributeOnce runs one move transaction of the landed rows of table
// only ("": of every table but skip's): all of them when they fit both
// budgets of moveBudget, else the longest prefix in table and landing
// order (rowid) that does (at least one row), more then
// saying whether rows are left. Each group is a whole move (the rows
// inserted typed, what they reached recorded, deleted from the landing
// table), so that a move stopped between two (killed, out of memory)
// leaves every row in the landing table or in its changelog table, once;
// and the groups take each table's rows in the order they landed, so
// what a group leaves landed of a table follows what it moved, as it
// would had no move cut it (the merges hold their watermarks at the
// changes still landed). On a table's failed insert it returns the
// table. The rows to move are copied once, sorted and numbered by table
// (tl_moving: a table's rows are contiguous, so that each table's insert
// reads its own rows, not the whole landing table, whatever the count of
// tables).
func (s *Sink) distributeOnce(ctx context.Context, only string, skip []string) (moved int64, more bool, table string, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, "", fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	which := "log_table = " + sqltext.String(only)
	if only == "" {
		out := make([]string, len(skip))
		for i, t := range skip {
			out[i] = sqltext.String(t)
		}
		which = fmt.Sprintf("log_table NOT IN (%s)", strings.Join(append(out, "''"), ", "))
	}
	total, run := moveBudget(s.opt.MemoryLimit)
	landed, biggest, rows, err := s.landedBytes(ctx, tx, which)
	if err != nil {
		return 0, false, "", err
	}
	group := fmt.Sprintf(`SELECT rowid AS rid, log_table, "row" FROM %s WHERE %s`, s.tables.landing, which)
	// No run passes its budget when the whole does not, or when no
	// moveRun rows of the biggest's bytes would: the common case, many
	// small rows, is one group, not sized row by row.
	big := biggest*moveRun > run
	if landed > total || landed > run && big {
		// The rows before the first (after the first row) that passes
		// either budget, the cut, found by the bytes read beside the
		// rows' places, not the rows; then read by conditions DuckDB
		// applies in its scan of the landing table (on the table's name
		// and the rowid), the tables before the cut's whole and the
		// cut's table's rows before it, in the order (the collation's)
		// the window sorted them: only the group's values are read. Read
		// by a join with their rowids, as until 2026-12-07, every landed
		// row's value was, and 2,048 rows of 100 KB at a 128 MiB
		// memory_limit ran it out after 486, every later try at once.
		var cutTable string
		var cutRow int64
		err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT log_table, rid FROM (
	SELECT rowid AS rid, log_table, row_number() OVER (ORDER BY log_table, rowid) AS rn,
		sum(bytes) OVER (ORDER BY log_table, rowid ROWS UNBOUNDED PRECEDING) AS upto,
		sum(bytes) OVER (ORDER BY log_table, rowid ROWS %[5]d PRECEDING) AS near
	FROM %[1]s WHERE %[2]s)
WHERE rn > 1 AND (upto > %[3]d OR near > %[4]d) ORDER BY rn LIMIT 1`, s.tables.landing, which, total, run, moveRun-1)).Scan(&cutTable, &cutRow)
		switch {
		case errors.Is(err, sql.ErrNoRows): // every row fits
		case err != nil:
			return 0, false, "", fmt.Errorf("size a group of the landed rows of %s: %w", s.tables.landing, err)
		default:
			group = fmt.Sprintf(`SELECT rowid AS rid, log_table, "row" FROM %[1]s WHERE %[2]s AND log_table < %[3]s
UNION ALL SELECT rowid AS rid, log_table, "row" FROM %[1]s WHERE %[2]s AND log_table = %[3]s AND rowid < %[4]d`,
				s.tables.landing, which, sqltext.String(cutTable), cutRow)
		}
	}
	var reads []string
	if big {
		// Big rows are copied as read before they are sorted: DuckDB's
		// sort of rows read from the landing table holds the buffers
		// their values were read into, with the values of the rows of
		// their vectors that the conditions left out (a group of 81
		// rows of 100 KB, 8 MB, ran a 128 MiB memory_limit out). Small
		// rows are not copied twice.
		reads = append(reads, "CREATE TEMP TABLE tl_group AS "+group)
		group = `SELECT rid, log_table, "row" FROM tl_group`
	}
	// Each row's keys (k) and count of members not null (n) are read
	// here, each by a statement of its own, not beside json_transform in
	// the tables' inserts: each JSON function of a statement parses the
	// row into an arena of its own, held until the statement ends, and a
	// 12 MB row parsed by json_transform and json_keys at once ran a 128
	// MiB memory_limit out (64 MiB asked with 110 MiB in use) at every
	// try. They are read once the rows are sorted, so that the vectors
	// they read hold rows that follow each other in the order the
	// budgets count (read for the whole landing table in one statement,
	// as one release did, c0d1ee4, they held every big row's parse at
	// once).
	reads = append(reads, fmt.Sprintf(`CREATE TEMP TABLE tl_moving AS
SELECT *, json_keys("row") AS k, CASE WHEN NOT %s THEN len(k) END AS n
FROM (SELECT dense_rank() OVER (ORDER BY log_table) AS tid, rid, log_table, "row" FROM (%s) ORDER BY tid, rid)`, hasNullMember, group),
		fmt.Sprintf(`UPDATE tl_moving SET n = %s WHERE n IS NULL`, nonNullMembers))
	if big {
		reads = append(reads, "DROP TABLE tl_group")
	}
	for _, q := range reads {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, false, "", fmt.Errorf("read the landed rows of %s: %w", s.tables.landing, err)
		}
	}
	var taken int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tl_moving").Scan(&taken); err != nil {
		return 0, false, "", fmt.Errorf("count the landed rows to move: %w", err)
	}
	more = taken < rows
	tables, err := movingTables(ctx, tx)
	if err != nil || len(tables) == 0 {
		return 0, false, "", err
	}
	for tid, table := range tables {
		q, err := s.distributeSQL(ctx, tx, table)
		if err != nil {
			return 0, false, table, err
		}
		r, err := tx.ExecContext(ctx, q, tid, table)
		if err != nil {
			return 0, false, table, fmt.Errorf("move its landed rows: %w", err)
		}
		if n, err := r.RowsAffected(); err == nil {
			moved += n
		}
	}
	if err := s.recordReach(ctx, tx); err != nil {
		return 0, false, "", err
	}
	for _, q := range []string{fmt.Sprintf("DELETE FROM %s WHERE rowid IN (SELECT rid FROM tl_moving)", s.tables.landing), "DROP TABLE tl_moving"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, false, "", fmt.Errorf("delete the moved rows from %s: %w", s.tables.landing, err)
		}
	}
	if s.beforeMoveCommit != nil {
		s.beforeMoveCommit(ctx)
	}
	if err := tx.Commit(); err != nil {
		if ctx.Err() != nil {
			// database/sql rolls the transaction back when its context
			// ends, and Commit may then say only that it is done.
			err = ctx.Err()
		}
		return 0, false, "", fmt.Errorf("commit the move of landed rows: %w", err)
	}
	if more {
		s.log.Debug("moved a group of landed changes into their changelog tables; more follow", "rows", moved, "landed_bytes", landed)
	}
	return moved, more, "", nil
}

// landedBytes is the bytes, the biggest row's bytes and the count of the
// landed rows of which (a condition on log_table), read from their bytes
// column. Rows an older release landed (bytes null) are measured first,
// in tx: the rows read once, then not again.
func (s *Sink) landedBytes(ctx context.Context, tx *sql.Tx, which string) (bytes, biggest, rows int64, err error) {
	var unsized int64
	q := fmt.Sprintf(`SELECT coalesce(sum(bytes), 0)::BIGINT, coalesce(max(bytes), 0), count(*), count(*) - count(bytes) FROM %s WHERE %s`, s.tables.landing, which)
	if err := tx.QueryRowContext(ctx, q).Scan(&bytes, &biggest, &rows, &unsized); err != nil {
		return 0, 0, 0, fmt.Errorf("size the landed rows of %s: %w", s.tables.landing, err)
	}
	if unsized == 0 {
		return bytes, biggest, rows, nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE %s SET bytes = strlen("row") WHERE bytes IS NULL`, s.tables.landing)); err != nil {
		return 0, 0, 0, fmt.Errorf("measure the rows an older release landed in %s: %w", s.tables.landing, err)
	}
	return s.landedBytes(ctx, tx, which)
}

// movingTables are tl_moving's tables by their number there.
func movingTables(ctx context.Context, tx *sql.Tx) (map[int64]string, error) {
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT tid, log_table FROM tl_moving")
	if err != nil {
		return nil, fmt.Errorf("list the tables of the landed rows: %w", err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var tid int64
		var t string
		if err := rows.Scan(&tid, &t); err != nil {
			return nil, fmt.Errorf("list the tables of the landed rows: %w", err)
		}
		out[tid] = t
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables of the landed rows: %w", err)
	}
	return out, nil
}

// distributeSQL is the insert of table's rows of tl_moving (its number
// and its name are the statement's parameters), typed as the changelog table's columns are. A
// row is read as read_ndjson reads a staged file with those columns: a
// column a row leaves out is null; a value its column's type does not
// take fails the statement, as does a key the table has no column for
// (json_transform says neither: it gives null; the row's count of keys
// that are not null, tl_moving's n, must be its count of non-null
// columns).
//
// A table the cache lacks was gone when this process read the catalog
// (dropped by hand before a restart): its columns are read from the
// catalog again, so that it takes its changes once it is mended; still
// gone, it is an error of its own.
//
// A column with a default (the source's, sink.TableRows.Defaults: the
// changelog table's DEFAULT, defaults by name) reads it in a row that
// does not hold the column, a change from before the source added it;
// a row of a change after holds its null as null.
func (s *Sink) distributeSQL(ctx context.Context, tx *sql.Tx, table string) (string, error) {
	s.routedMu.RLock()
	have, defaults := s.routed[table], s.routedDefaults[table]
	s.routedMu.RUnlock()
	if len(have) == 0 {
		again, err := s.routedColumnsOf(ctx, tx, table)
		if err != nil {
			return "", err
		}
		if have = again[table]; len(have) == 0 {
			return "", fmt.Errorf("changelog table %s is not there (dropped by hand?): its changes wait in %s until it is", table, s.tables.landing)
		}
		if defaults, err = ColumnDefaults(ctx, tx, unquotedRouted(s.opt.Table, table)); err != nil {
			return "", err
		}
		// The catalog's, committed: true whether this move commits or not.
		s.routedMu.Lock()
		s.routed[table] = have
		if len(defaults) > 0 {
			s.routedDefaults[table] = defaults
		}
		s.routedMu.Unlock()
	}
	names := slices.Sorted(maps.Keys(have))
	structure := make(map[string]string, len(names))
	sel := make([]string, len(names))
	present := make([]string, len(names))
	for i, name := range names {
		c := readColumn{Name: name, Type: have[name], Infinite: true}
		if l, ok := logicalOf(c.Type); ok {
			c.Logical = l.Type
		}
		read, expr := c.read("r." + sqltext.Ident(name))
		structure[name] = read
		sel[i] = expr + " AS " + sqltext.Ident(name)
		present[i] = "(r." + sqltext.Ident(name) + " IS NOT NULL)::INTEGER"
		if def, ok := defaults[name]; ok {
			// k, the row's keys (tl_moving's), read once: a path looked
			// up per column parses the row again each time.
			sel[i] = fmt.Sprintf(`CASE WHEN list_contains(k, %s) THEN %s ELSE %s END AS %s`, sqltext.String(name), expr, def, sqltext.Ident(name))
		}
	}
	shape, _ := json.Marshal(structure) // a map of strings: never fails
	return fmt.Sprintf(`INSERT INTO %s BY NAME SELECT %s FROM (SELECT json_transform("row", %s) AS r, k, n, "row" FROM tl_moving WHERE tid = $1)
WHERE CASE WHEN n = %s THEN true ELSE error('a landed row of ' || $2 || ' holds a value its column''s type does not take, or a column the table lacks: ' || left("row", 500)) END`,
		s.routedName(table), strings.Join(sel, ", "), sqltext.String(string(shape)), strings.Join(present, " + ")), nil
}

// hasNullMember is the SQL of whether a landed row may hold a member
// that is null: one without ":null" in its text holds none, and its
// count of keys is its count of members not null.
const hasNullMember = `contains("row", ':null')`

// nonNullMembers is the SQL of the count of the members that are not
// null of a landed row that may hold some (hasNullMember): a row holds
// the nulls of columns with a default (pipeline.ChangelogDecoder), which
// its structure (json_structure) types "NULL", at the cost of reading
// the row again. The structure is the row without its values (a few
// bytes a member), read again as a map: a merge patch into {} (which
// leaves the nulls out, RFC 7386), read by json_keys, as until
// 2026-12-07, built the row again, and a 12 MB row ran a 128 MiB
// memory_limit out.
const nonNullMembers = `len(list_filter(map_values(json_transform(json_structure("row"), '"MAP(VARCHAR, JSON)"')), v -> v::VARCHAR <> '"NULL"'))`

// readRoutedDefaults reads the column defaults of the changelog tables
// (table → column → the default's SQL) from the catalog, in q's snapshot:
// those a load gave columns the source added with a default
// (ensureRouted). Read with the routed tables (readRouted), cached.
func (s *Sink) readRoutedDefaults(ctx context.Context, q Querier) (map[string]map[string]string, error) {
	schemaName, _ := splitTable(s.opt.Table)
	rows, err := q.QueryContext(ctx, fmt.Sprintf(`SELECT c.table_name, c.column_name, c.column_default FROM duckdb_columns() c JOIN %s r ON c.table_name = r.log_table
WHERE c.database_name = current_database() AND c.schema_name = ? AND c.column_default IS NOT NULL`, s.tables.routes), schemaName)
	if err != nil {
		return nil, fmt.Errorf("read the column defaults of the changelog tables: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]string{}
	for rows.Next() {
		var table, column, def string
		if err := rows.Scan(&table, &column, &def); err != nil {
			return nil, fmt.Errorf("read the column defaults of the changelog tables: %w", err)
		}
		if out[table] == nil {
			out[table] = map[string]string{}
		}
		out[table][column] = def
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the column defaults of the changelog tables: %w", err)
	}
	return out, nil
}

// recordReach moves what each moved table reached, per partition, past
// its moved rows (tl_moving), in one statement. The last source time is
// of changes taken from the source's log: a snapshot row (op r) is read
// beside it, stamped with the time of the read, and says nothing of how
// far the log was sent (done marks go by it). A last source time further
// past its load than ReachedPastLoad, a misread time, is replaced by the
// load's rather than kept as the greater.
func (s *Sink) recordReach(ctx context.Context, tx *sql.Tx) error {
	q := fmt.Sprintf(`MERGE INTO %[1]s AS o USING (
	SELECT log_table, c[1] AS topic, c[2]::INTEGER AS "partition", max(c[3]::BIGINT) + 1 AS next_offset,
		make_timestamp(min(c[4]::BIGINT)) AS first_t, make_timestamp(max(c[4]::BIGINT) FILTER (WHERE c[5] IS DISTINCT FROM 'r')) AS last_t
	FROM (SELECT log_table, json_extract_string("row", ['$.%[2]s', '$.%[3]s', '$.%[4]s', '$.%[5]s', '$.%[6]s']) AS c FROM tl_moving)
	GROUP BY ALL) AS n
ON o.log_table = n.log_table AND o.topic = n.topic AND o."partition" = n."partition"
WHEN MATCHED THEN UPDATE SET next_offset = greatest(o.next_offset, n.next_offset),
	first_source_time = coalesce(least(o.first_source_time, n.first_t), o.first_source_time, n.first_t),
	last_source_time = CASE WHEN o.last_source_time > o.loaded_at + INTERVAL (%[7]d) MICROSECONDS THEN coalesce(n.last_t, o.last_source_time)
		ELSE coalesce(greatest(o.last_source_time, n.last_t), o.last_source_time, n.last_t) END, loaded_at = $1
WHEN NOT MATCHED THEN INSERT VALUES (n.log_table, n.topic, n."partition", n.next_offset, n.first_t, n.last_t, $1)`,
		s.tables.reached, schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn, cdc.SourceTimeColumn, cdc.OpColumn,
		ReachedPastLoad.Microseconds())
	if _, err := tx.ExecContext(ctx, q, time.Now().UTC()); err != nil {
		return fmt.Errorf("record what the moved rows reached in %s: %w", s.tables.reached, err)
	}
	return nil
}

// countLanded counts the landed rows in range r: the load's own (nothing
// past the fence is older, and no distribution runs during a load).
func (s *Sink) countLanded(ctx context.Context, tx *sql.Tx, r sink.Range) (int64, error) {
	var n int64
	q := fmt.Sprintf(`SELECT count(*) FROM (SELECT %s FROM %s) WHERE kpartition = $1 AND ktopic = $2 AND koffset BETWEEN $3 AND $4`,
		landedCoordinates, s.tables.landing)
	if err := tx.QueryRowContext(ctx, q, r.Partition, r.Topic, r.First, r.Last).Scan(&n); err != nil {
		return 0, fmt.Errorf("count loaded rows of %s: %w", s.tables.landing, err)
	}
	return n, nil
}
