package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Load inserts the rows of all files, their dead-letter rows and one ledger
// row per partition in one transaction. Rows at or below a partition's
// ledger position are skipped (a former owner of the partition loaded them),
// and so are rows an earlier file of the same load covers (a partition
// read again), so loading the same offsets twice never doubles a row.
//
// A load that runs out of DuckDB's memory_limit is loaded again as two
// loads of half the files each (down to one file): a limit that is hit
// slows loading down instead of stopping it. If the second half fails,
// the retry of the whole load leaves the first half's files out (the
// ledger covers them).
func (s *Sink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	return s.LoadReporting(ctx, files, nil)
}

// LoadReporting is Load calling committing (when not nil) before each
// transaction's commit, once its rows are inserted: the sink is a
// sink.CommitReporter.
func (s *Sink) LoadReporting(ctx context.Context, files []sink.File, committing func()) (_ sink.Loaded, err error) {
	if len(files) == 0 {
		return sink.Loaded{}, nil
	}
	// In flight from here, waiting for the lock included: a waiting load
	// reads its files ahead, and begins the moment the one before ends.
	defer s.loading.begin()()
	var ahead *readAhead
	if !s.loadMu.TryLock() {
		// Another load holds the lock, most of its time committing: read
		// this load's files meanwhile (see readAhead), unless another
		// waiting load already does. Its table is dropped after the lock
		// is given up.
		select {
		case s.aheadSlot <- struct{}{}:
			ahead = s.readAhead(ctx, files)
			defer func() { ahead.close(); <-s.aheadSlot }()
			if s.readAheadDone != nil {
				s.readAheadDone()
			}
		default:
		}
		s.loadMu.Lock()
	}
	defer s.loadMu.Unlock()
	defer func() {
		if err != nil && isFatal(err) {
			err = fmt.Errorf("%w: %w", sink.ErrFatal, err)
		}
	}()
	loaded, err := s.loadHalving(ctx, files, committing, ahead)
	if err == nil && s.opt.Routed {
		s.distributeIfDue(ctx)
	}
	return loaded, err
}

func (s *Sink) loadHalving(ctx context.Context, files []sink.File, committing func(), ahead *readAhead) (sink.Loaded, error) {
	loaded, err := s.loadOnce(ctx, files, committing, ahead)
	if err == nil || !isOutOfMemory(err) || len(files) == 1 {
		return loaded, err
	}
	s.log.Warn("a load ran out of sink.duckdb.memory_limit; loading its files in two halves", "files", len(files), "err", err)
	first, err := s.loadHalving(ctx, files[:len(files)/2], committing, nil)
	if err != nil {
		return sink.Loaded{}, err
	}
	second, err := s.loadHalving(ctx, files[len(files)/2:], committing, nil)
	if err != nil {
		return sink.Loaded{}, err
	}
	return sink.Loaded{LoadID: first.LoadID + " " + second.LoadID, Ranges: append(first.Ranges, second.Ranges...)}, nil
}

// loadOnce loads files in one transaction. Called with loadMu held.
func (s *Sink) loadOnce(ctx context.Context, files []sink.File, committing func(), ahead *readAhead) (sink.Loaded, error) {
	if err := s.freshRouted(ctx); err != nil {
		return sink.Loaded{}, err
	}
	fence, err := s.fence(ctx, files)
	if err != nil {
		return sink.Loaded{}, err
	}
	// One plan per run of files that overlap nowhere, each fenced past the
	// runs before it: a file re-reading offsets an earlier file of this
	// load covers adds none of them (sink.Runs).
	runs := sink.Runs(files)
	plans := make([]loadPlan, len(runs))
	for i, run := range runs {
		plans[i] = newLoadPlan(run, fence, s.tables.mainTopic)
		if !plans[i].exact {
			s.log.Debug("load overlaps the ledger or an earlier file of the load; skipping rows already loaded", "files", len(run))
		}
		for _, f := range run {
			sink.Advance(fence, f.Ranges)
		}
	}
	if len(plans) == 1 {
		plans[0].ahead = ahead // read from all the files, as the plan reads them
	}
	// The same for every attempt of these files: an attempt whose commit
	// landed, its reply lost, is told from another load by it (ownRanges).
	// The halves of a load halved (loadHalving) are loads of their own.
	loadID := sink.LoadIdentity(files)
	loaded, err := s.loadTx(ctx, plans, loadID, false, committing)
	if err != nil && isJSONError(err) && !s.opt.Transform && s.opt.Typed == nil {
		// Our validator accepted a value DuckDB's JSON parser rejects. Load
		// again, sending such rows to the dead-letter table instead of
		// stalling the partition on a load that can never succeed.
		s.log.Warn("a value was rejected by DuckDB's JSON parser; loading again with a per-row check", "err", err)
		loaded, err = s.loadTx(ctx, plans, loadID, true, committing)
	}
	if err != nil {
		// A commit that reported an error may have landed all the same:
		// the next load of these partitions reads their positions from
		// the ledger again instead of trusting what was cached.
		for _, f := range files {
			for _, r := range f.Ranges {
				delete(s.lastLoaded, r.TopicPartition)
			}
		}
		// So may the columns it created, added or widened, which its
		// retry, finding its rows in the ledger, does not add again.
		s.routedStale = s.opt.Routed
		return sink.Loaded{}, fmt.Errorf("load %d files into %s: %w", len(files), s.opt.Table, err)
	}
	for _, r := range loaded.Ranges {
		s.lastLoaded[r.TopicPartition] = max(s.lastLoaded[r.TopicPartition], r.Last)
	}
	s.Discard(files)
	return loaded, nil
}

// isFatal reports a DuckDB error after which the database instance is
// invalidated: every later statement fails until it is reopened. (Seen when
// an automatic checkpoint runs out of memory_limit: DuckDB says the COMMIT
// is durable but the instance is gone; the ledger, committed with the rows,
// keeps the retry after a restart from loading them twice.)
func isFatal(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "FATAL Error") || strings.Contains(msg, "database has been invalidated")
}

// isOutOfMemory reports DuckDB running out of its memory_limit in an
// insert ("Out of Memory Error") or in the COMMIT ("Failed to commit:
// failed to pin block of size …"): ordinary errors, the transaction is
// rolled back and the database stays (unlike a fatal error, see isFatal;
// should a commit have landed all the same, the ledger fences its rows:
// a failed load's partitions are read from it again, loadOnce).
func isOutOfMemory(err error) bool {
	msg := err.Error()
	return !isFatal(err) && (strings.Contains(msg, "Out of Memory Error") ||
		strings.Contains(msg, "failed to pin block") || strings.Contains(msg, "could not allocate block"))
}

func isJSONError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "JSON") && (strings.Contains(msg, "Malformed") || strings.Contains(msg, "Conversion"))
}

// fence returns the last loaded offset of every partition in the files
// that has one. This process is the only writer of the file, so positions
// read once from the ledger are kept up to date by the loads themselves
// and the ledger is not scanned per load. Called with loadMu held.
func (s *Sink) fence(ctx context.Context, files []sink.File) (map[sink.TopicPartition]int64, error) {
	var missing []sink.TopicPartition
	for _, f := range files {
		for _, r := range f.Ranges {
			if _, ok := s.lastLoaded[r.TopicPartition]; !ok && !slices.Contains(missing, r.TopicPartition) {
				missing = append(missing, r.TopicPartition)
			}
		}
	}
	if len(missing) > 0 {
		next, err := s.Positions(ctx, missing)
		if err != nil {
			return nil, err
		}
		for _, tp := range missing {
			s.lastLoaded[tp] = -1 // nothing loaded yet
			if n, ok := next[tp]; ok {
				s.lastLoaded[tp] = n - 1
			}
		}
	}
	fence := make(map[sink.TopicPartition]int64)
	for _, f := range files {
		for _, r := range f.Ranges {
			if last := s.lastLoaded[r.TopicPartition]; last >= 0 {
				fence[r.TopicPartition] = last
			}
		}
	}
	return fence, nil
}

// loadPlan is what one load inserts: files, the per-partition ranges after
// the fence, and the SQL filter that skips fenced rows ("" when none are).
type loadPlan struct {
	rowFiles, dlqFiles []string
	derivedFiles       []string
	routed             []sink.RoutedFile
	schemaTopics       []sink.SchemaTopic // Debezium schema change topics seen
	ranges             []sink.Range       // merged per partition, fenced
	exact              bool               // ranges' counts are exact (nothing fenced)
	rawFilter          string             // WHERE condition on raw files, "" for all rows
	dlqFilter          string             // WHERE condition on DLQ files
	maxLine            int
	files              int
	// ahead, when set, holds the rows of the files read before the load
	// (see readAhead): the load inserts them from there, filtered alike.
	ahead *readAhead
}

// newLoadPlan plans the load of files; topic is the SQL expression of a
// main-table row's topic.
func newLoadPlan(files []sink.File, fence map[sink.TopicPartition]int64, topic string) loadPlan {
	fenced := sink.Fence(files, fence)
	p := loadPlan{exact: fenced.Exact, files: len(files), ranges: fenced.Ranges}
	for _, f := range files {
		// What the records showed of the topics holds however many of
		// them load now.
		p.schemaTopics = append(p.schemaTopics, f.SchemaTopics...)
		if f.Overlap(fence) == sink.OverlapAll {
			continue // loaded before: not read at all (it may be gone)
		}
		if f.RowsPath != "" {
			p.rowFiles = append(p.rowFiles, f.RowsPath)
		}
		if f.DLQPath != "" {
			p.dlqFiles = append(p.dlqFiles, f.DLQPath)
		}
		if f.DerivedPath != "" {
			p.derivedFiles = append(p.derivedFiles, f.DerivedPath)
		}
		p.routed = append(p.routed, f.Routed...)
		p.maxLine = max(p.maxLine, f.MaxLine)
	}
	var rawConds, dlqConds []string
	for _, r := range fenced.Skip {
		rawConds = append(rawConds, fmt.Sprintf("(kpartition = %d AND %s = %s AND koffset <= %d)",
			r.Partition, topic, sqltext.String(r.Topic), r.Last))
		dlqConds = append(dlqConds, fmt.Sprintf(`("partition" = %d AND topic = %s AND "offset" <= %d)`,
			r.Partition, sqltext.String(r.Topic), r.Last))
	}
	if len(rawConds) > 0 {
		p.rawFilter = "NOT (" + strings.Join(rawConds, " OR ") + ")"
		p.dlqFilter = "NOT (" + strings.Join(dlqConds, " OR ") + ")"
	}
	return p
}

const (
	dlqReadColumns = `columns = {topic: 'VARCHAR', "partition": 'INTEGER', "offset": 'BIGINT', "key": 'VARCHAR', "value": 'VARCHAR', error: 'VARCHAR', stage: 'VARCHAR', headers: 'JSON', create_time: 'VARCHAR'}`
	// dlqInsertColumns are the dead-letter table's columns as the loads
	// insert them, by name: a table grown by an older release has headers
	// and create_time after add_time, as one created now does, but a
	// column list does not depend on that.
	dlqInsertColumns = `(topic, "partition", "offset", "key", "value", error, stage, add_time, headers, create_time)`
)

// readNDJSON is the table function reading staged files. The line limit
// follows the longest staged line so a 4 MiB message never fails a load.
func readNDJSON(files []string, columns string, maxLine int) string {
	limit := max(16<<20, 2*maxLine+1024)
	return fmt.Sprintf("read_ndjson(%s, %s, format = 'newline_delimited', maximum_object_size = %d)",
		fileList(files), columns, limit)
}

// fileList is the SQL list of the files' paths.
func fileList(files []string) string {
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = sqltext.String(f)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// readRawRows is the table function reading staged raw rows, the
// delimited lines of envelope.AppendDelimitedRow: no quoting, so every
// field, the value's bytes among them, is read as it was written. The
// line limit follows the longest staged line, as readNDJSON's does; the
// reader's buffer must be larger than a line.
func readRawRows(files []string, maxLine int) string {
	return readDelimited(files, `{uuid: 'VARCHAR', koffset: 'BIGINT', kpartition: 'INTEGER', raw_data: 'VARCHAR', raw_text: 'VARCHAR', record_metadata: 'VARCHAR'}`, maxLine)
}

// readDelimited is the table function reading staged lines of fields
// ended by envelope.FieldSeparator, as columns (a DuckDB struct of column
// names and types): no quoting, every field read as it was written.
func readDelimited(files []string, columns string, maxLine int) string {
	limit := max(2<<20, 2*maxLine+1024)
	return fmt.Sprintf(`read_csv(%s, columns = %s, `+
		`delim = %s, quote = '', escape = '', header = false, auto_detect = false, new_line = '\n', max_line_size = %d, buffer_size = %d)`,
		fileList(files), columns, sqltext.String(string(rune(envelope.FieldSeparator))), limit, max(32<<20, 2*limit))
}

// rawSource is the SQL of the staged raw rows of files with their value
// and metadata in the columns' places (the fence's filter reads
// record_metadata as JSON).
func rawSource(files []string, maxLine int) string {
	return fmt.Sprintf(`(SELECT uuid, koffset, kpartition, %s AS raw_data, record_metadata::JSON AS record_metadata FROM %s)`,
		rawValue, readRawRows(files, maxLine))
}

// rawValue is the SQL expression of a staged raw row's value: the
// value field, or the quoted-value field's string for a value with line
// breaks, NULL for neither (a tombstone).
const rawValue = `coalesce(raw_data, json_extract_string(raw_text, '$'))`

func where(conds ...string) string {
	var keep []string
	for _, c := range conds {
		if c != "" {
			keep = append(keep, c)
		}
	}
	if len(keep) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(keep, " AND ")
}

// loadTx runs one load transaction: the plans' rows in order, then the
// ledger rows of all of them, recorded as loadID's. With checkJSON, rows
// whose raw_data DuckDB cannot parse go to the dead-letter table (stage
// load). committing (when not nil) is called before the commit.
func (s *Sink) loadTx(ctx context.Context, plans []loadPlan, loadID string, checkJSON bool, committing func()) (sink.Loaded, error) {
	now := time.Now().UTC()
	var tx *sql.Tx
	var err error
	if ahead := plans[0].ahead; ahead != nil {
		tx, err = ahead.conn.BeginTx(ctx, nil)
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return sink.Loaded{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op

	// What this transaction creates or adds to routed tables reaches the
	// cache only once it commits.
	clear(s.routedAdded)
	clear(s.routedCreated)
	clear(s.routedDefaultsAdded)
	s.checkpointAfterCommit = false
	var ranges, own []sink.Range
	files := 0
	for _, p := range plans {
		if !p.exact && own == nil {
			// Rows were fenced: by this load's own earlier attempt?
			if own, err = s.ownRanges(ctx, tx, loadID); err != nil {
				return sink.Loaded{}, err
			}
		}
		transformed, err := s.insertFiles(ctx, tx, p, checkJSON, now)
		if err != nil {
			return sink.Loaded{}, err
		}
		loaded := p.ranges
		if !p.exact || checkJSON || s.opt.Transform {
			if loaded, err = s.countLoaded(ctx, tx, p, transformed); err != nil {
				return sink.Loaded{}, err
			}
		}
		ranges = append(ranges, loaded...)
		files += p.files
	}
	if err := s.insertLedger(ctx, tx, ranges, loadID, files, now); err != nil {
		return sink.Loaded{}, err
	}
	if committing != nil {
		committing()
	}
	if err := tx.Commit(); err != nil {
		return sink.Loaded{}, fmt.Errorf("commit: %w", err)
	}
	if s.replyLost != nil {
		if err := s.replyLost(); err != nil {
			return sink.Loaded{}, fmt.Errorf("commit: %w", err)
		}
	}
	s.keepRouted()
	return sink.Loaded{LoadID: loadID, Ranges: ranges, Own: own}, nil
}

// LoadedAs implements sink.LoadFinder.
func (s *Sink) LoadedAs(ctx context.Context, loadID string) ([]sink.Range, error) {
	return s.ownRanges(ctx, s.db, loadID)
}

// ownRanges are the ledger rows recorded as loadID's (sink.Loaded.Own):
// an earlier attempt of the same files committed them. Never nil. q is
// the load's transaction, or the database.
func (s *Sink) ownRanges(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, loadID string) ([]sink.Range, error) {
	rows, err := q.QueryContext(ctx, fmt.Sprintf(`SELECT topic, "partition", first_offset, last_offset, records, dlq_records FROM %s WHERE load_id = $1`, s.tables.ledger), loadID)
	if err != nil {
		return nil, fmt.Errorf("read the ledger rows of load %s: %w", loadID, err)
	}
	defer rows.Close()
	own := []sink.Range{}
	for rows.Next() {
		var r sink.Range
		if err := rows.Scan(&r.Topic, &r.Partition, &r.First, &r.Last, &r.Records, &r.DLQ); err != nil {
			return nil, fmt.Errorf("read the ledger rows of load %s: %w", loadID, err)
		}
		own = append(own, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the ledger rows of load %s: %w", loadID, err)
	}
	return own, nil
}

// keepRouted adds what a committed transaction created or added to routed
// tables to the cache, and checkpoints the database if the transaction
// gave a column a default its log cannot replay (checkpointAfterCommit):
// until then a kill -9 leaves a database DuckDB cannot open. A checkpoint
// that fails (another transaction running) leaves it to the next one.
func (s *Sink) keepRouted() {
	if s.checkpointAfterCommit {
		s.checkpointAfterCommit = false
		if _, err := s.db.Exec("CHECKPOINT"); err != nil {
			s.log.Warn("checkpoint after a column's default that DuckDB's log cannot replay failed; a crash before the next checkpoint leaves a database DuckDB cannot open", "err", err)
		}
	}
	if len(s.routedAdded) > 0 || len(s.routedCreated) > 0 || len(s.routedDefaultsAdded) > 0 {
		s.routedMu.Lock()
		maps.Copy(s.routed, s.routedAdded)
		maps.Copy(s.routedSources, s.routedCreated)
		for table, defaults := range s.routedDefaultsAdded {
			d := maps.Clone(s.routedDefaults[table])
			if d == nil {
				d = map[string]string{}
			}
			maps.Copy(d, defaults)
			s.routedDefaults[table] = d
		}
		s.routedMu.Unlock()
	}
}

// insertFiles inserts the rows of the plan's files into the main table (raw
// or transformed) and the dead-letter table. In transform mode it returns
// the rows inserted per partition.
func (s *Sink) insertFiles(ctx context.Context, tx *sql.Tx, p loadPlan, checkJSON bool, now time.Time) (map[sink.TopicPartition]int64, error) {
	var transformed map[sink.TopicPartition]int64
	var err error
	if len(p.rowFiles) > 0 {
		switch {
		case s.opt.Transform:
			transformed, err = s.insertTransformed(ctx, tx, p, now)
		case s.opt.Typed != nil:
			err = s.insertTyped(ctx, tx, s.tables.main, s.opt.Typed, p.rowFiles, p)
		default:
			err = s.insertRaw(ctx, tx, p, checkJSON, now)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(p.derivedFiles) > 0 {
		// The rows derived from this load's rows, fenced by the same
		// coordinates (each carries its source row's).
		if err := s.insertTyped(ctx, tx, s.tables.derived, s.opt.Derived, p.derivedFiles, p); err != nil {
			return nil, fmt.Errorf("%s: %w", s.opt.DerivedTable, err)
		}
	}
	if len(p.routed) > 0 {
		if err := s.insertRouted(ctx, tx, p, now); err != nil {
			return nil, err
		}
	}
	if len(p.schemaTopics) > 0 {
		if err := s.insertSchemaTopics(ctx, tx, p.schemaTopics, now); err != nil {
			return nil, err
		}
	}
	if len(p.dlqFiles) > 0 {
		// create_time is envelope.DLQCreateTime's RFC 3339 in UTC ("Z"),
		// which DuckDB's cast reads as that instant.
		q := fmt.Sprintf(`INSERT INTO %s %s SELECT topic, "partition", "offset", from_base64("key"), from_base64("value"), error, stage, $1,
			headers, TRY_CAST(create_time AS TIMESTAMP) FROM %s%s`,
			s.tables.dlq, dlqInsertColumns, readNDJSON(p.dlqFiles, dlqReadColumns, p.maxLine), where(p.dlqFilter))
		if _, err := tx.ExecContext(ctx, q, now); err != nil {
			return nil, fmt.Errorf("insert dead-letter rows: %w", err)
		}
	}
	return transformed, nil
}

func (s *Sink) insertRaw(ctx context.Context, tx *sql.Tx, p loadPlan, checkJSON bool, now time.Time) error {
	src := rawSource(p.rowFiles, p.maxLine)
	if p.ahead != nil && !checkJSON {
		src = p.ahead.table // the same columns, read before the load
	}
	valid := ""
	if checkJSON {
		valid = "(raw_data IS NULL OR json_valid(raw_data))"
		// The record's headers and time come from its record_metadata
		// (envelope.AppendMetadata: no headers field when it has none).
		q := fmt.Sprintf(`INSERT INTO %s %s SELECT record_metadata->>'topic', kpartition, koffset,
			CASE WHEN record_metadata->>'key_encoding' = 'base64' THEN from_base64(record_metadata->>'key') ELSE encode(record_metadata->>'key') END,
			encode(raw_data), 'DuckDB cannot parse the value as JSON', '%s', $1,
			coalesce(record_metadata->'headers', '[]'), TRY_CAST(record_metadata->>'create_time' AS TIMESTAMP) FROM %s%s`,
			s.tables.dlq, dlqInsertColumns, envelope.StageLoad, src, where(p.rawFilter, "NOT "+valid))
		if _, err := tx.ExecContext(ctx, q, now); err != nil {
			return fmt.Errorf("insert rejected rows into %s: %w", s.tables.dlq, err)
		}
	}
	q := fmt.Sprintf(`INSERT INTO %s SELECT uuid, koffset, kpartition, raw_data::JSON, record_metadata, $1 FROM %s%s`,
		s.tables.main, src, where(p.rawFilter, valid))
	if _, err := tx.ExecContext(ctx, q, now); err != nil {
		return fmt.Errorf("insert rows: %w", err)
	}
	return nil
}

// insertTyped inserts the rows of declared table t from files into target
// (Options.Typed, Options.Derived), or from the rows read ahead (see
// readAhead) when there are any.
func (s *Sink) insertTyped(ctx context.Context, tx *sql.Tx, target string, t *schema.Table, files []string, p loadPlan) error {
	src := typedSource(t, files, p.maxLine)
	if p.ahead != nil && t == s.opt.Typed {
		src = p.ahead.table // the same columns, read before the load
	}
	// By name: a table created by an older release has the columns added
	// since at its end (AddColumns), and may keep columns no longer declared.
	q := fmt.Sprintf(`INSERT INTO %s BY NAME SELECT * FROM %s%s`, target, src, where(p.rawFilter))
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("insert rows: %w", err)
	}
	return nil
}

// typedSource is the SQL of the staged rows of declared table t in files,
// its columns in order (see ndjsonSource).
func typedSource(t *schema.Table, files []string, maxLine int) string {
	cols := t.AllColumns()
	read := make([]readColumn, len(cols))
	for i, c := range cols {
		read[i] = readColumn{Name: c.Name, Logical: c.Type, Type: typeNames[c.Type]}
	}
	return ndjsonSource(read, files, maxLine)
}

// readColumn is a column of staged NDJSON rows: its logical type (how the
// rows hold it) and its type in the table.
type readColumn struct {
	Name    string
	Logical schema.Type
	Type    string
	// Infinite: a Timestamp's values may be schema.TimestampInfinity or
	// TimestampNegativeInfinity (changelog rows: PostgreSQL's infinite
	// dates and timestamps), which make_timestamp refuses.
	Infinite bool
}

// ndjsonSource is the SQL of the staged rows in files with the columns
// cols: timestamps read from microseconds, decimals from their exact
// text.
func ndjsonSource(cols []readColumn, files []string, maxLine int) string {
	read := make([]string, len(cols))
	sel := make([]string, len(cols))
	for i, c := range cols {
		name := sqltext.Ident(c.Name)
		typ, expr := c.read(name)
		sel[i] = name
		if expr != name {
			sel[i] = expr + " AS " + name
		}
		read[i] = name + ": " + sqltext.String(typ)
	}
	return fmt.Sprintf("(SELECT %s FROM %s)", strings.Join(sel, ", "),
		readNDJSON(files, "columns = {"+strings.Join(read, ", ")+"}", maxLine))
}

// read is how c is read from a staged row's JSON: the type to read its
// value as, and the SQL of the column's value from at, the value read:
// timestamps from microseconds, decimals from their exact text.
func (c readColumn) read(at string) (typ, expr string) {
	switch {
	case c.Logical == schema.Timestamp && c.Infinite:
		return "BIGINT", fmt.Sprintf("CASE %[1]s WHEN %[2]d THEN 'infinity'::TIMESTAMP WHEN %[3]d THEN '-infinity'::TIMESTAMP ELSE make_timestamp(%[1]s) END",
			at, schema.TimestampInfinity, schema.TimestampNegativeInfinity)
	case c.Logical == schema.Timestamp:
		return "BIGINT", "make_timestamp(" + at + ")"
	case c.Logical == schema.Decimal && c.Type != "VARCHAR":
		return "VARCHAR", "CAST(" + at + " AS " + c.Type + ")"
	}
	return c.Type, at
}

// countLoaded counts, per partition, the rows this load inserted into the
// main and dead-letter tables (the tables have no rows past the fence but
// this load's). It runs only when the fence, the JSON check or transform
// rejections made the staged counts inexact. In transform mode the user's
// table has no coordinates; the counts come from insertTransformed.
func (s *Sink) countLoaded(ctx context.Context, tx *sql.Tx, p loadPlan, transformed map[sink.TopicPartition]int64) ([]sink.Range, error) {
	out := make([]sink.Range, 0, len(p.ranges))
	for _, r := range p.ranges {
		var raw, dlq int64
		var err error
		if s.opt.Transform {
			raw = transformed[r.TopicPartition]
		} else if len(p.rowFiles) > 0 {
			q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE kpartition = $1 AND %s = $2 AND koffset BETWEEN $3 AND $4`, s.tables.main, s.tables.mainTopic)
			if err := tx.QueryRowContext(ctx, q, r.Partition, r.Topic, r.First, r.Last).Scan(&raw); err != nil {
				return nil, fmt.Errorf("count loaded rows: %w", err)
			}
		} else if len(p.routed) > 0 {
			if raw, err = s.countLanded(ctx, tx, r); err != nil {
				return nil, err
			}
		} else {
			raw = r.Records
		}
		q := fmt.Sprintf(`SELECT count(*) FROM %s WHERE "partition" = $1 AND topic = $2 AND "offset" BETWEEN $3 AND $4`, s.tables.dlq)
		if err := tx.QueryRowContext(ctx, q, r.Partition, r.Topic, r.First, r.Last).Scan(&dlq); err != nil {
			return nil, fmt.Errorf("count loaded dead-letter rows: %w", err)
		}
		r.Records, r.DLQ = raw, dlq
		out = append(out, r)
	}
	return out, nil
}

func (s *Sink) insertLedger(ctx context.Context, tx *sql.Tx, ranges []sink.Range, loadID string, files int, now time.Time) error {
	if len(ranges) == 0 {
		return nil
	}
	var b strings.Builder
	// By name: topic_id came later, and a ledger grown at Prepare has it
	// last, as a new one does.
	fmt.Fprintf(&b, `INSERT INTO %s (topic, "partition", first_offset, last_offset, records, dlq_records, topic_id, load_id, files, loaded_at) VALUES `, s.tables.ledger)
	args := make([]any, 0, len(ranges)*7+3)
	args = append(args, loadID, files, now)
	for i, r := range ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		n := len(args)
		b.WriteString("($" + strconv.Itoa(n+1) + ", $" + strconv.Itoa(n+2) + ", $" + strconv.Itoa(n+3) + ", $" +
			strconv.Itoa(n+4) + ", $" + strconv.Itoa(n+5) + ", $" + strconv.Itoa(n+6) + ", $" + strconv.Itoa(n+7) + ", $1, $2, $3)")
		var id any // NULL when unknown: not checked
		if r.TopicID != "" {
			id = r.TopicID
		}
		args = append(args, r.Topic, r.Partition, r.First, r.Last, r.Records, r.DLQ, id)
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("insert ledger rows: %w", err)
	}
	return nil
}

// ReplaceDerived replaces every row of the derived table (Options.Derived)
// with the rows of files (NDJSON, as Batch.Derived), in one transaction:
// readers see the old rows or the new, never a mix or none. Loads wait
// for it.
func (s *Sink) ReplaceDerived(ctx context.Context, files []string, maxLine int) (int64, error) {
	if s.opt.Derived == nil {
		return 0, errors.New("no derived table is configured")
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+s.tables.derived); err != nil {
		return 0, fmt.Errorf("empty %s: %w", s.opt.DerivedTable, err)
	}
	if len(files) > 0 {
		if err := s.insertTyped(ctx, tx, s.tables.derived, s.opt.Derived, files, loadPlan{maxLine: maxLine}); err != nil {
			return 0, fmt.Errorf("%s: %w", s.opt.DerivedTable, err)
		}
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+s.tables.derived).Scan(&n); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
