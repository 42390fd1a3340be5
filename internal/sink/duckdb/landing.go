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

// landingColumns are the landing table's columns.
var landingColumns = []Column{{"log_table", "VARCHAR"}, {"row", "VARCHAR"}}

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
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s SELECT log_table, "row" FROM %s`, s.tables.landing, src)); err != nil {
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
// table but skip's) in one transaction. A table whose insert fails is
// left out and the transaction run again without it (DuckDB aborts a
// transaction at its first error); such tables are returned with their
// errors. An error that is no table's (the database's, memory, the
// context) ends it.
func (s *Sink) distributeTables(ctx context.Context, only string, skip []string) (int64, map[string]error, error) {
	failed := map[string]error{}
	for {
		moved, table, err := s.distributeOnce(ctx, only, skip)
		switch {
		case err == nil:
			return moved, failed, nil
		case table == "" || isFatal(err) || isOutOfMemory(err) || ctx.Err() != nil:
			return 0, failed, err
		}
		failed[table] = err
		if only != "" {
			return 0, failed, nil
		}
		skip = append(skip, table)
	}
}

// distributeOnce runs one distribution transaction of the landed rows of
// table only ("": of every table but skip's); on a table's failed insert
// it returns the table. The rows to move are copied once, sorted and
// numbered by table (tl_moving: a table's rows are contiguous, so that
// each table's insert reads its own rows, not the whole landing table,
// whatever the count of tables).
func (s *Sink) distributeOnce(ctx context.Context, only string, skip []string) (moved int64, table string, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, "", fmt.Errorf("begin: %w", err)
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
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`CREATE TEMP TABLE tl_moving AS
SELECT dense_rank() OVER (ORDER BY log_table) AS tid, log_table, "row" FROM %s WHERE %s ORDER BY tid`, s.tables.landing, which)); err != nil {
		return 0, "", fmt.Errorf("read the landed rows of %s: %w", s.tables.landing, err)
	}
	tables, err := movingTables(ctx, tx)
	if err != nil || len(tables) == 0 {
		return 0, "", err
	}
	for tid, table := range tables {
		q, err := s.distributeSQL(ctx, tx, table)
		if err != nil {
			return 0, table, err
		}
		r, err := tx.ExecContext(ctx, q, tid, table)
		if err != nil {
			return 0, table, fmt.Errorf("move its landed rows: %w", err)
		}
		if n, err := r.RowsAffected(); err == nil {
			moved += n
		}
	}
	if err := s.recordReach(ctx, tx); err != nil {
		return 0, "", err
	}
	for _, q := range []string{fmt.Sprintf("DELETE FROM %s WHERE log_table IN (SELECT log_table FROM tl_moving)", s.tables.landing), "DROP TABLE tl_moving"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, "", fmt.Errorf("delete the moved rows from %s: %w", s.tables.landing, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, "", fmt.Errorf("commit the move of landed rows: %w", err)
	}
	return moved, "", nil
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
// that are not null, nonNullMembers, must be its count of non-null
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
			// k, the row's keys, read once: a path looked up per column
			// parses the row again each time.
			sel[i] = fmt.Sprintf(`CASE WHEN list_contains(k, %s) THEN %s ELSE %s END AS %s`, sqltext.String(name), expr, def, sqltext.Ident(name))
		}
	}
	shape, _ := json.Marshal(structure) // a map of strings: never fails
	return fmt.Sprintf(`INSERT INTO %s BY NAME SELECT %s FROM (SELECT json_transform("row", %s) AS r, json_keys("row") AS k, "row" FROM tl_moving WHERE tid = $1)
WHERE CASE WHEN %s = %s THEN true ELSE error('a landed row of ' || $2 || ' holds a value its column''s type does not take, or a column the table lacks: ' || left("row", 500)) END`,
		s.routedName(table), strings.Join(sel, ", "), sqltext.String(string(shape)), nonNullMembers, strings.Join(present, " + ")), nil
}

// nonNullMembers is the SQL of the count of a landed row's members that
// are not null: a row holds the nulls of columns with a default
// (pipeline.ChangelogDecoder), which the merge patch into {} leaves out
// (RFC 7386), at the cost of reading the row again (about twice the
// count of its keys); a row without ":null" in its text holds none.
const nonNullMembers = `CASE WHEN contains("row", ':null') THEN len(json_keys(json_merge_patch('{}', "row"))) ELSE len(k) END`

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
