// Package verify compares Kafka's offsets with the sink's ledger and tables:
// per partition the watermarks, ledger ranges, rows in the main and
// dead-letter tables, gaps, overlaps, duplicates and lag.
package verify

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Partition is the report of one partition.
type Partition struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Low           int64  `json:"kafka_low"`      // -1 when Kafka was not asked
	High          int64  `json:"kafka_high"`     // -1 when Kafka was not asked
	LedgerRanges  int    `json:"ledger_ranges"`  // ledger rows
	LedgerFirst   int64  `json:"ledger_first"`   // -1 when none
	LedgerNext    int64  `json:"ledger_next"`    // last loaded offset + 1, -1 when none
	LedgerRecords int64  `json:"ledger_records"` // records + dlq_records of the ledger
	Rows          int64  `json:"rows"`           // main-table rows (raw mode)
	DLQRows       int64  `json:"dlq_rows"`       // dead-letter rows
	Gaps          int64  `json:"gaps"`           // offsets missing between or before ledger ranges
	// Missing lists the first gaps as offset ranges ("100-149"): records
	// deleted by retention before they were loaded stay here for good.
	Missing    []string `json:"missing,omitempty"`
	Overlaps   int64    `json:"overlaps"`   // offsets covered by more than one ledger range
	Duplicates int64    `json:"duplicates"` // offsets (rows of a message: offset, index) stored more than once (main ∪ dead-letter)
	// DuplicateRanges lists the first ledger ranges holding rows stored
	// more than once ("0-9"; for rows no range covers, their offsets; on
	// Iceberg, which has no ranges, the offsets held more than once).
	DuplicateRanges []string `json:"duplicate_ranges,omitempty"`
	// MissingRows are rows of a message missing between its others: an
	// index below the largest stored of its message that no row has
	// (Iceberg, which has no ledger to count rows against; a message's
	// last rows missing cannot be seen there).
	MissingRows int64 `json:"missing_rows,omitempty"`
	Lag         int64 `json:"lag"` // high watermark − ledger next (or Start), -1 unknown
	// Start is where loading a partition nothing is loaded of yet starts:
	// the group's committed offset (a run commits a partition's start
	// before reading it; with start_offset latest, the end when it
	// began), from which Lag counts. nil: something is loaded, or no
	// offset is committed.
	Start *int64 `json:"committed_start,omitempty"`
	// Skipped are the offsets from Kafka's low watermark to the first one
	// loaded when loading did not start at the log start on purpose
	// (start_offset latest, or a committed offset it resumed from): not a
	// problem, shown so a reader knows the table starts later.
	Skipped       int64 `json:"skipped,omitempty"`
	CountMismatch bool  `json:"count_mismatch"` // ledger counts differ from table rows
	// Unstored are records a ledger range counts that no row in its
	// offsets stands for (raw mode: a range's distinct rows below its
	// count), summed over the ranges; Unloaded are rows in a range beyond
	// its count, and Uncovered rows at offsets no ledger range covers:
	// rows no load wrote. A record deleted and another row stored
	// elsewhere keep the partition's count; these do not.
	Unstored  int64 `json:"unstored_records,omitempty"`
	Unloaded  int64 `json:"unloaded_rows,omitempty"`
	Uncovered int64 `json:"uncovered_rows,omitempty"`
	// RangeMismatches lists the first ranges whose rows differ from
	// their count ("0-9: 10 counted, 9 stored"), and the offsets of
	// uncovered rows.
	RangeMismatches []string `json:"range_mismatches,omitempty"`
	// Abandoned are positions of the OTLP receivers' own sequence that a
	// load failed with after committing some of its tables (Iceberg): the
	// requests there were refused for their clients to retry, and hold
	// nothing; not a gap.
	Abandoned int64 `json:"abandoned,omitempty"`
	// PastLogEnd: the ledger reaches past Kafka's log end (see
	// Report.CheckLogEnds).
	PastLogEnd bool `json:"past_log_end,omitempty"`
	// TopicIDChanged: the ledger was loaded from a topic of another id
	// than the one Kafka has under its name (see Report.CheckTopicIDs).
	TopicIDChanged bool `json:"topic_id_changed,omitempty"`
	// PastPosition are rows at offsets their table's position (Iceberg)
	// has not reached, or of a partition it has none for: no load wrote
	// them, and a load of those offsets would store them again (the
	// ledger sinks' Uncovered). PastOffsets says where ("main table
	// 15-17").
	PastPosition int64    `json:"rows_past_position,omitempty"`
	PastOffsets  []string `json:"past_position_offsets,omitempty"`
	// StoredAbandoned are abandoned positions that hold rows: their
	// requests were refused and sent again by their clients, so stored
	// twice (abandoning deletes what the failed load committed there).
	// StoredAbandonedOffsets says where ("dead-letter table 3-5").
	StoredAbandoned        int64    `json:"abandoned_with_rows,omitempty"`
	StoredAbandonedOffsets []string `json:"abandoned_with_rows_offsets,omitempty"`
}

// Report is the result of a verification.
type Report struct {
	Partitions []Partition `json:"partitions"`
	OK         bool        `json:"ok"`
	Problems   []string    `json:"problems,omitempty"`
	// Models are the merge models' progress; informative, never a failure.
	Models []ModelProgress `json:"models,omitempty"`
	// Copies are an OpenTelemetry table's rows stored more than once
	// (client retries) and what its deduplicating model kept; informative.
	Copies *Copies `json:"copies,omitempty"`
	// Derived is the check of a table derived in the loads of the main
	// table's rows (genai_operations).
	Derived *Derived `json:"derived,omitempty"`
	// Signals are the reports of the other signals' tables a load-mode
	// run takes (otlp.signals), each checked as the main one; OK and
	// Problems above include theirs.
	Signals []SignalReport `json:"signals,omitempty"`
	// fromStart is start_offset earliest: partitions are checked from
	// their log start (Run, FromStored), the committed starts of those
	// nothing is loaded of too (AddStarts).
	fromStart bool
}

// SignalReport is the report of one more signal's tables.
type SignalReport struct {
	Signal string `json:"signal"`
	Table  string `json:"table"`
	*Report
}

// AddSignal adds the report of another signal's tables: r is OK only if
// it is too, and its problems are r's, named by its table.
func (r *Report) AddSignal(signal, table string, o *Report) {
	r.Signals = append(r.Signals, SignalReport{signal, table, o})
	if !o.OK {
		r.OK = false
		for _, p := range o.Problems {
			r.Problems = append(r.Problems, table+": "+p)
		}
	}
}

// Derived is what a derived table holds against the main table: each of
// its rows carries the coordinates of the row it comes from, which must be
// there, once, and be that row (the same identity: a span's ids).
type Derived struct {
	Table      string `json:"table"`
	Rows       int64  `json:"rows"`
	Duplicates int64  `json:"duplicates"` // rows whose coordinates another row has too
	Orphans    int64  `json:"orphans"`    // rows with no main-table row at their coordinates
	// Mismatched are rows whose coordinates hold a main-table row of
	// another identity: stored at a position later given to another
	// source row (the OTLP receivers' sequence reusing a failed load's).
	Mismatched int64 `json:"mismatched"`
	// Missing are main-table rows that derive a row (GenAI spans, by
	// Sources.Derives) with no derived row of their identity at their
	// coordinates; MissingAt lists the first ("t/0 offset 7 index 1").
	Missing   int64    `json:"missing"`
	MissingAt []string `json:"missing_at,omitempty"`
	// DeadLettered are such rows whose derived row the dead-letter table
	// holds, refused by the sink: not missing.
	DeadLettered int64 `json:"dead_lettered,omitempty"`
	// Unmarked are rows whose main-table row derives none (by
	// Sources.Derives: an operation of a span that is no GenAI
	// operation); UnmarkedAt lists the first.
	Unmarked   int64    `json:"unmarked"`
	UnmarkedAt []string `json:"unmarked_at,omitempty"`
}

// DerivedCheckSQL is the query of CheckDerived (DuckDB and Databend
// alike): rows, rows whose coordinates another row has too, rows with no
// main-table row at their coordinates, and rows whose main-table row there
// has other values of the columns ids (both tables have them).
func DerivedCheckSQL(derived, main string, ids []string) string {
	key, id := coordinatesSQL(), identitySQL(ids)
	return fmt.Sprintf(`SELECT count(*), count(*) - count(DISTINCT d.k), count(CASE WHEN m.k IS NULL THEN 1 END), `+
		`count(CASE WHEN m.k IS NOT NULL AND s.k IS NULL THEN 1 END) `+
		`FROM (SELECT %[1]s AS k, %[2]s AS id FROM %[3]s) AS d `+
		`LEFT JOIN (SELECT DISTINCT %[1]s AS k FROM %[4]s) AS m ON m.k = d.k `+
		`LEFT JOIN (SELECT DISTINCT %[1]s AS k, %[2]s AS id FROM %[4]s) AS s ON s.k = d.k AND s.id = d.id`,
		key, id, derived, main)
}

// coordinatesSQL is a row's coordinates as one text, the key a derived
// row shares with its main-table row.
func coordinatesSQL() string {
	return fmt.Sprintf(`%s || '/' || CAST(%s AS VARCHAR) || '/' || CAST(%s AS VARCHAR) || '/' || CAST(%s AS VARCHAR)`,
		schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn, schema.IndexColumn)
}

// identitySQL is the values of the columns ids as one text ("" for a
// null), joined by '/' (deadLetterOf reads a row's in Go alike).
func identitySQL(ids []string) string {
	id := "''"
	for i, c := range ids {
		if i > 0 {
			id += ` || '/'`
		}
		id += fmt.Sprintf(` || coalesce(CAST(%s AS VARCHAR), '')`, sqltext.Ident(c))
	}
	return id
}

// CheckDerived checks the derived table against the main table (quoted
// names; both declared tables with coordinates and the columns ids, which
// name a row's source), and the main-table rows src names against the
// derived table, and adds what is wrong to the report's problems.
func (r *Report) CheckDerived(ctx context.Context, q Querier, name, derived, main string, ids []string, src Sources) error {
	rows, err := q.QueryText(ctx, DerivedCheckSQL(derived, main, ids))
	if err != nil {
		return fmt.Errorf("check %s: %w", name, err)
	}
	if len(rows) != 1 || len(rows[0]) != 4 {
		return fmt.Errorf("check %s: %d rows answered, want one of four columns", name, len(rows))
	}
	d := &Derived{Table: name}
	for i, p := range []*int64{&d.Rows, &d.Duplicates, &d.Orphans, &d.Mismatched} {
		if *p, err = strconv.ParseInt(rows[0][i], 10, 64); err != nil {
			return fmt.Errorf("check %s: %w", name, err)
		}
	}
	if src.Derives != "" {
		if err := checkSources(ctx, q, d, derived, main, ids, src); err != nil {
			return fmt.Errorf("check the rows %s derives from: %w", name, err)
		}
		if err := checkUnmarked(ctx, q, d, derived, main, ids, src); err != nil {
			return fmt.Errorf("check the rows %s derives from none: %w", name, err)
		}
	}
	r.Derived = d
	if d.Missing > 0 {
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d GenAI spans without their operation (%s): deleted or never written "+
			"(tracelake merge --rebuild %s derives them again)", name, d.Missing, strings.Join(d.MissingAt, ", "), name))
	}
	if d.Unmarked > 0 {
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d rows whose span is no GenAI operation (%s): written by no rule of this mapper, "+
			"their tokens and cost counted beside the operations' (tracelake merge --rebuild %s derives the table again)",
			name, d.Unmarked, strings.Join(d.UnmarkedAt, ", "), name))
	}
	if d.Duplicates > 0 {
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d rows stored twice (the same source row's coordinates)", name, d.Duplicates))
	}
	if d.Orphans > 0 {
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d rows whose source row is not in the main table", name, d.Orphans))
	}
	if d.Mismatched > 0 {
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d rows whose coordinates hold another source row in the main table (%s differ)",
			name, d.Mismatched, strings.Join(ids, ", ")))
	}
	return nil
}

// Copies are the copies an OpenTelemetry table holds: a client that
// retries after a lost answer sends a request twice (OTLP has no request
// id). They are not a loading error; the <table>_dedup model keeps one.
type Copies struct {
	Table      string `json:"table"`
	Rows       int64  `json:"rows"`
	Identities int64  `json:"identities"`  // distinct spans, log records or points
	Target     string `json:"dedup_table"` // the model's table
	Kept       int64  `json:"dedup_rows"`
	Pending    int64  `json:"pending_rows"` // rows the model has not merged yet
}

// ModelProgress is how far a model has merged its raw table.
type ModelProgress struct {
	Model   string `json:"model"`
	Pending int64  `json:"pending_raw_rows"` // raw rows past the model's watermark
}

// Tables names what to check.
type Tables struct {
	Main, DLQ, Ledger string // quoted names
	// Raw says the main table is a raw table with koffset/kpartition (in
	// transform mode only the ledger and the dead-letter table are checked
	// row by row).
	Raw bool
	// Topic is the SQL expression of a raw row's topic, in the sink's
	// dialect: record_metadata->>'topic' (DuckDB) or
	// record_metadata:topic::VARCHAR (Databend), or the column of a
	// declared table.
	Topic string
	// Index is the column of a row's index among the rows of its message
	// (a declared table: an OTLP message holds many spans), "" when each
	// message is one row. A row is then stored twice when its (offset,
	// index) is, a dead letter when its (offset, value) is.
	Index string
}

// Querier runs a query and returns its rows as text, NULL as "": the
// DuckDB sink through database/sql (SQLQuerier), the Databend sink
// through its HTTP client.
type Querier interface {
	QueryText(ctx context.Context, q string) ([][]string, error)
}

// SQLQuerier runs queries on a database/sql handle.
type SQLQuerier struct {
	// DB is a database, or a transaction whose one snapshot every query
	// of a check reads (a database loads meanwhile).
	DB interface {
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
}

// QueryText implements Querier.
func (s SQLQuerier) QueryText(ctx context.Context, q string) ([][]string, error) {
	rows, err := s.DB.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = v.String
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// maxReads bounds Run's attempts to read the ledger and the tables with
// no load committing in between.
const maxReads = 10

// Run builds the report. marks may be nil when Kafka is unreachable;
// fromStart says partitions should be covered from their low watermark
// (start_offset earliest), so an uncovered head counts as a gap.
//
// The ledger and the tables are read by several queries. Where they do
// not share one snapshot (Databend: each statement reads the latest
// committed version of each table, even inside BEGIN, session_catalog.rs
// get_table), a load committing between them makes the rows outnumber the
// ledger read before it. A load commits its rows with its ledger rows,
// and ledger rows are only added, so Run reads the ledger's size again
// after the counts: unchanged, no load committed in between and the
// figures agree; changed, it reads everything again.
func Run(ctx context.Context, db Querier, t Tables, marks map[sink.TopicPartition]kafka.Watermarks, fromStart bool) (*Report, error) {
	for attempt := 1; ; attempt++ {
		rep, read, err := run(ctx, db, t, marks, fromStart)
		if err != nil {
			return nil, err
		}
		now, err := ledgerSize(ctx, db, t.Ledger)
		if err != nil {
			return nil, err
		}
		if now == read {
			return rep, nil
		}
		if attempt == maxReads {
			return nil, fmt.Errorf("the ledger %s changed while the tables were counted, %d times in a row (loads committing meanwhile): try again", t.Ledger, attempt)
		}
	}
}

// ledgerState is how many rows a ledger has and the records they count:
// what a load committing changes.
type ledgerState struct{ rows, records int64 }

// ledgerSize reads the ledger's state.
func ledgerSize(ctx context.Context, db Querier, ledger string) (ledgerState, error) {
	// DuckDB sums BIGINTs as a HUGEINT, which database/sql cannot scan
	// into text: cast back (a ledger's records fit an int64).
	res, err := db.QueryText(ctx, fmt.Sprintf(`SELECT count(*), CAST(coalesce(sum(records + dlq_records), 0) AS BIGINT) FROM %s`, ledger))
	if err != nil {
		return ledgerState{}, fmt.Errorf("read ledger %s: %w", ledger, err)
	}
	if len(res) != 1 || len(res[0]) != 2 {
		return ledgerState{}, fmt.Errorf("read ledger %s: %d rows answered, want one of two columns", ledger, len(res))
	}
	var s ledgerState
	for i, p := range []*int64{&s.rows, &s.records} {
		if *p, err = strconv.ParseInt(res[0][i], 10, 64); err != nil {
			return ledgerState{}, fmt.Errorf("read ledger %s: %w", ledger, err)
		}
	}
	return s, nil
}

// run builds the report from one read of each table, and returns the
// state of the ledger it read.
func run(ctx context.Context, db Querier, t Tables, marks map[sink.TopicPartition]kafka.Watermarks, fromStart bool) (*Report, ledgerState, error) {
	parts := newPartitions(marks)
	get := parts.get

	var read ledgerState
	ranges := map[rangeKey]*ledgerRange{} // raw mode: each range's count, to compare with its rows
	ledger, err := db.QueryText(ctx, fmt.Sprintf(
		`SELECT topic, "partition", first_offset, last_offset, records + dlq_records FROM %s ORDER BY topic, "partition", first_offset, last_offset`, t.Ledger))
	if err != nil {
		return nil, read, fmt.Errorf("read ledger %s: %w", t.Ledger, err)
	}
	for _, row := range ledger {
		tp, nums, err := parseRow(row, 3)
		if err != nil {
			return nil, read, fmt.Errorf("read ledger %s: %w", t.Ledger, err)
		}
		first, last, n := nums[0], nums[1], nums[2]
		read.rows++
		read.records += n
		p := get(tp)
		switch {
		case p.LedgerNext < 0:
			p.LedgerFirst = first
		case first > p.LedgerNext:
			p.Gaps += first - p.LedgerNext
			p.missing(p.LedgerNext, first-1)
		case first < p.LedgerNext:
			p.Overlaps += min(p.LedgerNext, last+1) - first
		}
		p.LedgerNext = max(p.LedgerNext, last+1)
		p.LedgerRanges++
		p.LedgerRecords += n
		if t.Raw {
			// Two rows of one first offset (a range written twice) are
			// overlaps already; their rows are compared with their sum.
			k := rangeKey{tp, first}
			if r := ranges[k]; r != nil {
				r.records += n
				r.last = max(r.last, last)
			} else {
				ranges[k] = &ledgerRange{last: last, records: n}
			}
		}
	}

	// scan reads rows of topic, partition, count, distinct count.
	scan := func(q string, apply func(p *Partition, rows, distinct int64)) error {
		res, err := db.QueryText(ctx, q)
		if err != nil {
			return err
		}
		for _, row := range res {
			tp, nums, err := parseRow(row, 2)
			if err != nil {
				return err
			}
			apply(get(tp), nums[0], nums[1])
		}
		return nil
	}
	if !t.Raw {
		if err := scan(fmt.Sprintf(`SELECT topic, "partition", count(*), count(DISTINCT "offset") FROM %s GROUP BY 1, 2`, t.DLQ),
			func(p *Partition, rows, distinct int64) {
				// The user's table has no offsets to check; the dead-letter
				// table has. Its rows are not compared with the ledger's
				// ranges: a replay moves dead letters into the user's
				// table without moving the ledger's dlq_records count.
				p.DLQRows = rows
				p.Duplicates = rows - distinct
			}); err != nil {
			return nil, read, fmt.Errorf("count %s: %w", t.DLQ, err)
		}
	} else if err := countRanges(ctx, db, t, ranges, get); err != nil {
		return nil, read, err
	}

	rep := finish(parts, t.Raw, fromStart)
	if !t.Raw {
		// The user's table has no offsets, but its row count must reach
		// what the ledger says was loaded into it: fewer rows were deleted
		// after loading, or never written.
		res, err := db.QueryText(ctx, fmt.Sprintf(`SELECT count(*) FROM %s`, t.Main))
		if err != nil {
			return nil, read, fmt.Errorf("count %s: %w", t.Main, err)
		}
		var stored int64
		if len(res) == 1 && len(res[0]) == 1 {
			stored, _ = strconv.ParseInt(res[0][0], 10, 64)
		}
		if loaded, _ := rep.Totals(); stored < loaded {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s holds %d rows; the ledger counts %d loaded into it", t.Main, stored, loaded))
			rep.OK = false
		}
	}
	return rep, read, nil
}

// rangeKey names a ledger range by its partition and first offset.
type rangeKey struct {
	tp    sink.TopicPartition
	first int64
}

// ledgerRange is a ledger range's count and the distinct rows stored at
// its offsets.
type ledgerRange struct {
	last, records, stored int64
}

// RangeCountSQL is the query of the rows of the main and the dead-letter
// table (raw mode) per ledger range: topic, partition, the range's first
// offset (-1 for rows at offsets no range covers), rows, distinct rows
// (offsets; with t.Index a row's (offset, index), a dead letter's
// (offset, value)), main-table rows, and the least and greatest offset.
//
// Each row is given the range whose first offset is the greatest at or
// below its own, and is in it if the ranges so far reach its offset: the
// ledger's ranges and the rows are one stream ordered by offset (a range
// before the rows at its first offset, equal rows next to each other),
// read with running maxima (a window sorts, and spills to disk, so memory
// stays bounded; a join on the range's bounds would be a hash join on the
// partition checking every range of it for every row). A row is one more
// distinct when it differs from the one before. Databend reads it as
// DuckDB does: max over a ROWS frame and lag (tests/sqllogictests/suites/
// query/window_function/window_basic.test, expr_in_window.test), a
// window's partitions spilled to disk (window_partition_spill.test).
//
// A declared table's row is its (offset, index); a dead letter its offset
// and value: a message that did not decode, or one row of a message the
// database rejected (Databend) beside the rows it took. In raw mode an
// offset in both tables is a row stored twice.
func RangeCountSQL(t Tables) string {
	key, dead := "koffset", `"offset"`
	if t.Index != "" {
		key = fmt.Sprintf(`CAST(koffset AS VARCHAR) || '/' || CAST(%s AS VARCHAR)`, t.Index)
		dead = `CAST("offset" AS VARCHAR) || '/dead/' || coalesce(CAST("value" AS VARCHAR), '')`
	}
	const order = `PARTITION BY topic, p ORDER BY o, m, k`
	return fmt.Sprintf(`SELECT topic, p, CASE WHEN o <= reach THEN start ELSE -1 END AS r, count(*), `+
		`count(CASE WHEN prev IS NULL OR prev <> k THEN 1 END), count(CASE WHEN m = 1 THEN 1 END), min(o), max(o) FROM (`+
		`SELECT topic, p, o, m, k, `+
		`max(lo) OVER (%[1]s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS start, `+
		`max(hi) OVER (%[1]s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS reach, `+
		`lag(k) OVER (%[1]s) AS prev FROM (`+
		`SELECT %[2]s AS topic, kpartition AS p, koffset AS o, 1 AS m, %[3]s AS k, -1 AS lo, -1 AS hi FROM %[4]s `+
		`UNION ALL SELECT topic, "partition", "offset", 0, %[5]s, -1, -1 FROM %[6]s `+
		`UNION ALL SELECT topic, "partition", first_offset, -1, NULL, first_offset, last_offset FROM %[7]s) AS e) AS w `+
		`WHERE m >= 0 GROUP BY 1, 2, 3`, order, t.Topic, key, t.Main, dead, t.DLQ, t.Ledger)
}

// countRanges counts the main and dead-letter tables' rows (raw mode) per
// partition and per ledger range (ranges, read from the ledger), and
// notes in each partition the rows stored twice, the records of a range
// with no row, the rows beyond a range's count and those outside every
// range.
func countRanges(ctx context.Context, db Querier, t Tables, ranges map[rangeKey]*ledgerRange, get func(sink.TopicPartition) *Partition) error {
	res, err := db.QueryText(ctx, RangeCountSQL(t))
	if err != nil {
		return fmt.Errorf("count %s and %s per ledger range: %w", t.Main, t.DLQ, err)
	}
	for _, row := range res {
		tp, nums, err := parseRow(row, 6)
		if err != nil {
			return fmt.Errorf("count %s and %s per ledger range: %w", t.Main, t.DLQ, err)
		}
		first, rows, distinct, main, lo, hi := nums[0], nums[1], nums[2], nums[3], nums[4], nums[5]
		p := get(tp)
		p.Rows += main
		p.DLQRows += rows - main
		p.Duplicates += rows - distinct
		if r := ranges[rangeKey{tp, first}]; first >= 0 && r != nil {
			r.stored += distinct
			if rows > distinct {
				p.DuplicateRanges = appendBounded(p.DuplicateRanges, fmt.Sprintf("%d-%d", first, r.last))
			}
			continue
		}
		if rows > distinct {
			p.DuplicateRanges = appendBounded(p.DuplicateRanges, fmt.Sprintf("%d-%d", lo, hi))
		}
		// (A range unknown here was committed after the ledger was read:
		// Run reads everything again.)
		p.Uncovered += distinct
		p.mismatch(fmt.Sprintf("offsets %d-%d: rows outside the ranges", lo, hi))
	}
	keys := slices.Collect(maps.Keys(ranges))
	slices.SortFunc(keys, func(a, b rangeKey) int {
		return cmp.Or(cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition), cmp.Compare(a.first, b.first))
	})
	for _, k := range keys {
		r := ranges[k]
		if r.stored == r.records {
			continue
		}
		p := get(k.tp)
		if r.stored < r.records {
			p.Unstored += r.records - r.stored
		} else {
			p.Unloaded += r.stored - r.records
		}
		p.mismatch(fmt.Sprintf("%d-%d: %d counted, %d stored", k.first, r.last, r.records, r.stored))
	}
	return nil
}

// mismatch notes a range whose rows differ from its count.
func (p *Partition) mismatch(what string) {
	p.RangeMismatches = appendBounded(p.RangeMismatches, what)
}

// appendBounded appends what to a report's list of the first maxMissing
// places, and "…" once past them.
func appendBounded(list []string, what string) []string {
	switch {
	case len(list) < maxMissing:
		return append(list, what)
	case len(list) == maxMissing:
		return append(list, "…")
	}
	return list
}

// CheckLogEnds fails the report for every partition whose ledger reaches
// past the end of Kafka's log: the topic was deleted and recreated, or
// its log truncated (an unclean leader election). The ledger's offsets
// then name records of the old log, and the new log's records up to the
// ledger's position are not loaded, so the lag is negative and nothing
// else in the report looks wrong. The watermarks the report was built
// with were read before the ledger, and a run loading meanwhile may have
// moved the ledger past them: fresh reads them again, after the ledger
// (a log end only grows), only when some partition looks past its end.
func (r *Report) CheckLogEnds(fresh func() map[sink.TopicPartition]kafka.Watermarks) {
	var marks map[sink.TopicPartition]kafka.Watermarks
	for i := range r.Partitions {
		p := &r.Partitions[i]
		// TopicIDChanged: reported once, by its id, as the run says it
		// (verify checks the ids with each table's report, before this).
		if p.High < 0 || p.LedgerNext <= p.High || p.TopicIDChanged {
			continue
		}
		if marks == nil {
			if marks = fresh(); marks == nil {
				return // Kafka cannot answer now: nothing to compare with
			}
		}
		m, ok := marks[sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		if !ok || p.LedgerNext <= m.High {
			continue
		}
		p.PastLogEnd = true
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s/%d: the ledger reaches offset %d, past the end of Kafka's log (%d): the topic was deleted and recreated, or its log truncated; "+
			"the ledger's offsets name records of the old log and the new log's records are not loaded (load it into a new table)",
			p.Topic, p.Partition, p.LedgerNext-1, m.High))
	}
	slices.Sort(r.Problems)
}

// LoadedKafkaPartitions are the partitions of Kafka topics (not the
// OTLP receivers' sequences) the ledger has loads of.
func (r *Report) LoadedKafkaPartitions() []sink.TopicPartition {
	var out []sink.TopicPartition
	for _, p := range r.Partitions {
		if p.LedgerNext >= 0 && !strings.HasPrefix(p.Topic, sink.SequenceTopicPrefix) {
			out = append(out, sink.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		}
	}
	return out
}

// CheckTopicIDs fails the report for every partition whose ledger
// recorded (recorded: per partition, its furthest load's) another topic
// id than Kafka has for the topic now (current, asked only then; nil when
// Kafka cannot answer): the topic was deleted and recreated, and even a
// new log that reaches past the ledger (CheckLogEnds cannot tell) holds
// other records at the ledger's offsets. A partition is reported once,
// by whichever of this and CheckLogEnds runs first.
func (r *Report) CheckTopicIDs(recorded map[sink.TopicPartition]string, current func() map[string]string) {
	if len(recorded) == 0 {
		return
	}
	ids := current()
	for i := range r.Partitions {
		p := &r.Partitions[i]
		was, ok := recorded[sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		// High < 0: a partition Kafka's watermarks do not have, as
		// CheckLogEnds skips it. A topic recreated with fewer partitions
		// leaves the old one's rows of those gone in the ledger: no new
		// log of theirs is left unloaded, and the run, never assigned
		// them, never names them.
		if !ok || p.High < 0 || ids[p.Topic] == "" || ids[p.Topic] == was || p.PastLogEnd {
			continue
		}
		p.TopicIDChanged = true
		r.OK = false
		r.Problems = append(r.Problems, fmt.Sprintf("%s/%d: the ledger was loaded from topic id %s, and the topic now has id %s: the topic was deleted and recreated; "+
			"the ledger's offsets name records of the old log and the new log's records below offset %d are not loaded (load it into a new table)",
			p.Topic, p.Partition, was, ids[p.Topic], p.LedgerNext))
	}
	slices.Sort(r.Problems)
}

// AddStarts reads, for the partitions Kafka knows and nothing is loaded
// of yet, the group's committed offsets (committed, asked only then;
// they must have been read before the ledger, see below):
// where their loading starts, and their lag counts from. Without it such
// a partition's lag read unknown under start_offset latest, though the
// run had said where it starts.
//
// Below that start nothing will be loaded: the run resumes there. With
// start_offset earliest a run commits a partition's start at its log
// start, which only grows, so a start above the log start skipped the
// records between (a new table loaded in an old table's group, a group
// shared with another table's loader, offsets reset forward): a gap, as
// a ledger beginning past the log start is (finish). Before, they were
// neither a gap nor lag, and verify passed on records the table will
// never hold. With latest they are skipped on purpose, as there. An
// offset read after the ledger may be the commit of the partition's
// first load, landed since: read before, it is a start, or the ledger
// holds its load.
func (r *Report) AddStarts(committed func() map[sink.TopicPartition]int64) {
	var starts map[sink.TopicPartition]int64
	for i := range r.Partitions {
		p := &r.Partitions[i]
		if p.LedgerNext >= 0 || p.High < 0 || ownSequence(p.Topic) {
			continue
		}
		if starts == nil {
			if starts = committed(); starts == nil {
				return // Kafka cannot answer now
			}
		}
		at, ok := starts[sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}]
		if !ok || at > p.High {
			// Past the log's end, the offset is of an old log (the
			// topic recreated, or its log truncated): the run stops
			// on it rather than load from there, so it starts nothing.
			continue
		}
		p.Start = &at
		// Nothing below the log start is to load (see finish).
		p.Lag = max(p.High-max(at, p.Low, 0), 0)
		if p.Low < 0 || at <= p.Low {
			continue
		}
		if !r.fromStart {
			p.Skipped = at - p.Low
			continue
		}
		p.addGap(p.Low, at-1)
		r.OK = false
		// Worded as finish words a gap: the text below the table says
		// nothing is loaded and where loading starts.
		r.Problems = append(r.Problems, fmt.Sprintf("%s/%d: %d offsets missing (gap: %s)", p.Topic, p.Partition, p.Gaps, strings.Join(p.Missing, ", ")))
	}
	slices.Sort(r.Problems)
}

// maxMissing bounds the gap ranges a partition's report lists.
const maxMissing = 10

// missing notes the gap first..last.
func (p *Partition) missing(first, last int64) {
	switch {
	case len(p.Missing) < maxMissing:
		p.Missing = append(p.Missing, fmt.Sprintf("%d-%d", first, last))
	case len(p.Missing) == maxMissing:
		p.Missing = append(p.Missing, "…")
	}
}

// partitions are the report's partitions being built.
type partitions map[sink.TopicPartition]*Partition

// newPartitions starts the partitions Kafka knows, with their watermarks.
func newPartitions(marks map[sink.TopicPartition]kafka.Watermarks) partitions {
	ps := partitions{}
	for tp, m := range marks {
		p := ps.get(tp)
		p.Low, p.High = m.Low, m.High
	}
	return ps
}

// get returns the partition, starting it if absent.
func (ps partitions) get(tp sink.TopicPartition) *Partition {
	p, ok := ps[tp]
	if !ok {
		p = &Partition{Topic: tp.Topic, Partition: tp.Partition, Low: -1, High: -1, LedgerFirst: -1, LedgerNext: -1, Lag: -1}
		ps[tp] = p
	}
	return p
}

// finish turns per-partition findings into the report: gaps before the
// first loaded offset, lag, count checks and the problems.
func finish(parts partitions, raw, fromStart bool) *Report {
	rep := &Report{OK: true, fromStart: fromStart}
	for _, p := range parts {
		switch {
		case ownSequence(p.Topic):
			if p.LedgerFirst > 0 {
				p.addGap(0, p.LedgerFirst-1) // its first positions' rows and ledger ranges are gone
			}
		case p.Low >= 0 && p.High > p.Low && p.LedgerFirst > p.Low:
			if fromStart {
				p.Gaps += p.LedgerFirst - p.Low // never loaded from the start
				p.missing(p.Low, p.LedgerFirst-1)
			} else {
				p.Skipped = p.LedgerFirst - p.Low
			}
		}
		if p.High >= 0 {
			// What is still to load: nothing below the log start is
			// (retention deleted it; a gap if it was never loaded).
			p.Lag = p.High - max(p.LedgerNext, p.Low, 0)
			if p.LedgerNext < 0 && !fromStart {
				p.Lag = -1
			}
		}
		if p.LedgerNext >= 0 && p.Low > p.LedgerNext {
			// Retention deleted records past where loading stands,
			// never loaded: lost (the run reports them too once it
			// reads the partition again).
			p.addGap(p.LedgerNext, p.Low-1)
		}
		if raw {
			p.CountMismatch = p.Rows+p.DLQRows != p.LedgerRecords
		} else {
			p.Rows = p.LedgerRecords - p.DLQRows
		}
		rep.Partitions = append(rep.Partitions, *p)
		name := fmt.Sprintf("%s/%d", p.Topic, p.Partition)
		if p.Gaps > 0 {
			where := ""
			if len(p.Missing) > 0 {
				where = ": " + strings.Join(p.Missing, ", ")
			}
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d offsets missing (gap%s)", name, p.Gaps, where))
		}
		if p.Overlaps > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d offsets in overlapping ledger ranges", name, p.Overlaps))
		}
		if p.Duplicates > 0 {
			where := ""
			if len(p.DuplicateRanges) > 0 {
				where = " (in " + strings.Join(p.DuplicateRanges, ", ") + ")"
			}
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d offsets stored more than once%s", name, p.Duplicates, where))
		}
		if p.MissingRows > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d rows of messages missing (an index below a stored row's of its message)", name, p.MissingRows))
		}
		if p.CountMismatch {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: ledger counts %d records, tables hold %d", name, p.LedgerRecords, p.Rows+p.DLQRows))
		}
		ranges := ""
		if len(p.RangeMismatches) > 0 {
			ranges = " (" + strings.Join(p.RangeMismatches, "; ") + ")"
		}
		if p.Unstored > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d records counted by their ledger range not stored%s", name, p.Unstored, ranges))
		}
		if p.Unloaded > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d rows in ledger ranges beyond what their loads wrote%s", name, p.Unloaded, ranges))
		}
		if p.Uncovered > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d rows at offsets no ledger range covers, no load wrote them%s", name, p.Uncovered, ranges))
		}
		if p.StoredAbandoned > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: rows at %d abandoned positions, whose requests were refused and sent again by their clients: stored twice (%s)",
				name, p.StoredAbandoned, strings.Join(p.StoredAbandonedOffsets, "; ")))
		}
		if p.PastPosition > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %d rows at or past their table's position (or of a partition it has none for), no load wrote them; a load of those offsets would store them again (%s)",
				name, p.PastPosition, strings.Join(p.PastOffsets, "; ")))
		}
	}
	slices.SortFunc(rep.Partitions, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	slices.Sort(rep.Problems)
	rep.OK = len(rep.Problems) == 0
	return rep
}

// RecordsFunc returns, per partition, the offsets from span.First through
// span.Last that hold a committed data record in Kafka (kafka.DataRecords).
type RecordsFunc func(spans map[sink.TopicPartition]sink.Run) (map[sink.TopicPartition]*sink.Offsets, error)

// FromStored builds the report of a sink without ledger ranges (Iceberg):
// next is where each partition resumes, raw and dlq the offsets stored in
// each table. An offset from the first stored one up to next that is in
// neither table is a gap if Kafka holds a committed record there (asked
// through records) or can no longer say (below its log start, or past its
// end on a topic recreated shorter than the positions): offsets of
// a transactional producer's markers and aborted records hold nothing to
// store. Without records (or if Kafka cannot answer) every such offset
// counts as a gap. The abandoned positions (the sink's record of them)
// hold nothing and are no gap.
func FromStored(marks map[sink.TopicPartition]kafka.Watermarks, next map[sink.TopicPartition]int64,
	raw, dlq map[sink.TopicPartition]*sink.Offsets, abandoned map[sink.TopicPartition][]sink.Run, fromStart bool, records RecordsFunc) *Report {
	parts := newPartitions(marks)
	get := parts.get
	for tp, n := range next {
		get(tp).LedgerNext = n
	}
	stored := map[sink.TopicPartition]bool{}
	for tp, offs := range raw {
		get(tp).Rows = offs.Count()
		stored[tp] = true
	}
	for tp, offs := range dlq {
		get(tp).DLQRows = offs.Count()
		stored[tp] = true
	}
	held := map[sink.TopicPartition]*sink.Offsets{} // abandoned positions, covered as rows are
	for tp, runs := range abandoned {
		held[tp] = &sink.Offsets{}
		for _, r := range runs {
			for o := r.First; o <= r.Last; o++ {
				held[tp].Add(o)
			}
			get(tp).Abandoned += r.Last - r.First + 1
		}
		stored[tp] = true
	}
	for _, t := range []struct {
		name   string
		stored map[sink.TopicPartition]*sink.Offsets
	}{{"main table", raw}, {"dead-letter table", dlq}} {
		for tp, offs := range t.stored {
			if offs == nil {
				continue
			}
			p := get(tp)
			if offs.PastPosition > 0 {
				p.PastPosition += offs.PastPosition
				p.PastOffsets = append(p.PastOffsets, fmt.Sprintf("%s %d-%d", t.name, offs.PastFirst, offs.PastLast))
			}
			if held[tp] == nil {
				continue
			}
			rows, _ := sink.Coverage(offs)
			gone, _ := sink.Coverage(held[tp])
			if in := intersect(rows, gone); len(in) > 0 {
				for _, r := range in {
					p.StoredAbandoned += r.Last - r.First + 1
				}
				p.StoredAbandonedOffsets = append(p.StoredAbandonedOffsets, fmt.Sprintf("%s %d-%d", t.name, in[0].First, in[len(in)-1].Last))
			}
		}
	}
	holes := map[sink.TopicPartition][]sink.Run{}
	for tp := range stored {
		p := get(tp)
		_, dups := sink.Coverage(raw[tp], dlq[tp])
		// A message's rows beyond its first are not in the runs: the
		// scan counted those stored twice and missing by their index.
		for _, offs := range []*sink.Offsets{raw[tp], dlq[tp]} {
			if offs != nil {
				p.Duplicates += offs.RepeatedRows
				p.MissingRows += offs.MissingRows
			}
		}
		// A row at an abandoned position is reported above, and not
		// counted again as stored twice.
		union, _ := sink.Coverage(raw[tp], dlq[tp], held[tp])
		// A message's later rows show it stored even where its first row,
		// the one its offset is counted by, is gone (a user's delete of
		// one span): what is stored begins at the least offset of any
		// row, so that a first row missing below every other message's is
		// a hole, as one between two stored messages is. From the first
		// offset of union alone, the partition's first message's went
		// unseen once Kafka's log start was past it.
		first, known := int64(0), len(union) > 0
		if known {
			first = union[0].First
		}
		if o, ok := raw[tp].LeastRow(); ok && (!known || o < first) {
			first, known = o, true
		}
		if !known {
			// Sets without a row: nothing is known stored, as for a
			// position with nothing stored below it (below), so a hole
			// from the log start.
			delete(stored, tp)
			continue
		}
		p.Duplicates += dups
		for _, d := range sink.Repeated(raw[tp], dlq[tp]) {
			p.DuplicateRanges = appendBounded(p.DuplicateRanges, fmt.Sprintf("%d-%d", d.First, d.Last))
		}
		p.LedgerRecords = p.Rows + p.DLQRows
		if p.LedgerNext < 0 {
			// No position: the main table's rows are past it (reported
			// above), the dead-letter table's those of a load still
			// committing (its main commit follows), so none says where
			// loading began (LedgerFirst stays none): the offsets below
			// them are still to load, the partition's lag.
			continue
		}
		holes[tp] = missingRuns(first, union, p.LedgerNext)
		// The head ends at the position at most: rows past it (no load
		// wrote them) are reported as such, and say nothing of where
		// loading began; the offsets between are still to load. So
		// where the head is taken from (the hole below, or finish's
		// count of the offsets skipped or missing below it) stops there
		// too, a position at the log start or at 0 included.
		p.LedgerFirst = min(first, p.LedgerNext)
		switch {
		case ownSequence(tp.Topic) && p.LedgerFirst > 0:
			holes[tp] = append([]sink.Run{{First: 0, Last: p.LedgerFirst - 1}}, holes[tp]...)
			p.LedgerFirst = 0
		case fromStart && p.Low >= 0 && p.High > p.Low && p.LedgerFirst > p.Low:
			// Never loaded from the log start: a hole like the others
			// (its first offsets may be an aborted transaction).
			holes[tp] = append([]sink.Run{{First: p.Low, Last: p.LedgerFirst - 1}}, holes[tp]...)
			p.LedgerFirst = p.Low
		}
	}
	for tp, n := range next {
		// A position with nothing stored below it: every offset read
		// from the log start up to it is a hole (of aborted records and
		// markers only, or lost). Without fromStart where reading began
		// is not known, as for the head of a partition with rows.
		p := get(tp)
		switch {
		case stored[tp]:
		case ownSequence(tp.Topic) && n > 0:
			holes[tp] = []sink.Run{{First: 0, Last: n - 1}}
			p.LedgerFirst = 0
		case fromStart && p.Low >= 0 && n > p.Low:
			holes[tp] = []sink.Run{{First: p.Low, Last: n - 1}}
			p.LedgerFirst = p.Low
		}
	}
	data := map[sink.TopicPartition][]sink.Run{}
	if records != nil {
		data = recordsIn(parts, holes, records)
	}
	for tp, hs := range holes {
		p := parts.get(tp)
		d, asked := data[tp]
		if !asked {
			for _, h := range hs {
				p.addGap(h.First, h.Last)
			}
			continue
		}
		for _, h := range hs {
			if h.First < p.Low { // retention took it: lost, or a marker nobody can tell now
				p.addGap(h.First, min(h.Last, p.Low-1))
			}
			if h.Last >= p.High { // past the log end (a recreated topic): nobody can tell now either
				p.addGap(max(h.First, p.Low, p.High), h.Last)
			}
		}
		for _, g := range intersect(hs, d) { // Kafka's records are all from Low up to High
			p.addGap(g.First, g.Last)
		}
	}
	return finish(parts, true, fromStart)
}

// ownSequence reports whether topic is the ledger topic of the OTLP
// receivers' own sequence (otlp.mode load, directload.Topic): no Kafka log holds it to ask
// where it starts, and none is needed, as a receiver's first load takes
// position 0 whatever kafka.start_offset says (a failed load's positions
// are taken again or recorded as abandoned). So it is checked from 0: its
// first positions' rows gone (an Iceberg data file removed, a ledger's
// first ranges deleted with their rows) are a gap, not a later start.
func ownSequence(topic string) bool { return strings.HasPrefix(topic, sink.SequenceTopicPrefix) }

// intersect returns the offsets in both a and b (each sorted and
// disjoint), in one pass: a transactional topic has a hole per
// transaction, so a pass per hole would be quadratic.
func intersect(a, b []sink.Run) []sink.Run {
	var out []sink.Run
	for i, j := 0, 0; i < len(a) && j < len(b); {
		if lo, hi := max(a[i].First, b[j].First), min(a[i].Last, b[j].Last); lo <= hi {
			out = append(out, sink.Run{First: lo, Last: hi})
		}
		if a[i].Last < b[j].Last {
			i++
		} else {
			j++
		}
	}
	return out
}

// addGap counts the offsets first through last as missing.
func (p *Partition) addGap(first, last int64) {
	p.Gaps += last - first + 1
	p.missing(first, last)
}

// missingRuns are the offsets from first up to next that union (sorted
// disjoint runs, none below first) leaves out.
func missingRuns(first int64, union []sink.Run, next int64) []sink.Run {
	var out []sink.Run
	from := first
	for _, u := range union {
		if to := min(u.First, next); from < to {
			out = append(out, sink.Run{First: from, Last: to - 1})
		}
		from = max(from, u.Last+1)
	}
	if from < next {
		out = append(out, sink.Run{First: from, Last: next - 1})
	}
	return out
}

// recordsIn asks Kafka which offsets of the holes from the log start up
// to the log end hold committed records, per partition; a partition left
// out was not asked (or Kafka could not answer). The read stops below the
// log end (High, the last stable offset): kafka.DataRecords waits for a
// record at each span's last offset, and past the end of a log recreated
// shorter than the positions none comes until its timeout, which then
// leaves every partition unanswered.
func recordsIn(parts partitions, holes map[sink.TopicPartition][]sink.Run, records RecordsFunc) map[sink.TopicPartition][]sink.Run {
	spans := map[sink.TopicPartition]sink.Run{}
	for tp, hs := range holes {
		p := parts.get(tp)
		if len(hs) == 0 || p.Low < 0 {
			continue
		}
		if r := (sink.Run{First: max(hs[0].First, p.Low), Last: min(hs[len(hs)-1].Last, p.High-1)}); r.First <= r.Last {
			spans[tp] = r
		}
	}
	out := map[sink.TopicPartition][]sink.Run{}
	if len(spans) == 0 {
		return out
	}
	found, err := records(spans)
	if err != nil {
		slog.Warn("Kafka cannot tell which missing offsets are transaction markers; each counts as a gap", "err", err)
		return out
	}
	for tp := range spans {
		out[tp], _ = sink.Coverage(found[tp])
	}
	return out
}

// parseRow reads topic, partition and n integers from a text row.
func parseRow(row []string, n int) (sink.TopicPartition, []int64, error) {
	if len(row) != n+2 {
		return sink.TopicPartition{}, nil, fmt.Errorf("want %d columns, got %d", n+2, len(row))
	}
	p, err := strconv.ParseInt(row[1], 10, 32)
	if err != nil {
		return sink.TopicPartition{}, nil, fmt.Errorf("partition %q: %w", row[1], err)
	}
	nums := make([]int64, n)
	for i := range nums {
		if nums[i], err = strconv.ParseInt(row[i+2], 10, 64); err != nil {
			return sink.TopicPartition{}, nil, fmt.Errorf("column %d %q: %w", i+3, row[i+2], err)
		}
	}
	return sink.TopicPartition{Topic: row[0], Partition: int32(p)}, nums, nil
}

// Totals sums rows over partitions.
func (r *Report) Totals() (rows, dlq int64) {
	for _, p := range r.Partitions {
		rows += p.Rows
		dlq += p.DLQRows
	}
	return rows, dlq
}

// WriteText prints the report as a table followed by the problems.
func (r *Report) WriteText(w io.Writer) {
	r.writeTables(w)
	for _, s := range r.Signals {
		fmt.Fprintf(w, "\n%s (%s):\n", s.Table, s.Signal)
		s.writeTables(w)
		s.writeVerdict(w)
	}
	if len(r.Signals) > 0 {
		fmt.Fprintln(w)
	}
	r.writeVerdict(w)
}

// writeTables writes what r found of its tables.
func (r *Report) writeTables(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "topic\tpartition\tkafka low\tkafka high\tskipped\tledger ranges\tledger next\trows\tdlq\tgaps\toverlaps\tduplicates\tlag\t")
	num := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return fmt.Sprint(n)
	}
	for _, p := range r.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n", p.Topic, p.Partition, num(p.Low), num(p.High),
			p.Skipped, p.LedgerRanges, num(p.LedgerNext), p.Rows, p.DLQRows, p.Gaps, p.Overlaps, p.Duplicates, num(p.Lag))
	}
	tw.Flush()
	for _, p := range r.Partitions {
		if p.Start != nil {
			fmt.Fprintf(w, "%s/%d: nothing loaded yet; loading starts at offset %d (its committed start)\n", p.Topic, p.Partition, *p.Start)
		}
		if p.Abandoned > 0 {
			fmt.Fprintf(w, "%s/%d: %d positions abandoned (a load failed after committing some of its tables; its requests were refused for their clients to retry)\n",
				p.Topic, p.Partition, p.Abandoned)
		}
	}
	for _, m := range r.Models {
		state := "merged up to the raw table"
		if m.Pending > 0 {
			state = fmt.Sprintf("%d raw rows not merged yet", m.Pending)
		}
		fmt.Fprintf(w, "model %s: %s\n", m.Model, state)
	}
	if c := r.Copies; c != nil {
		fmt.Fprintf(w, "%s: %d rows, %d distinct (%d copies of a row stored again, e.g. by client retries); %s holds %d",
			c.Table, c.Rows, c.Identities, c.Rows-c.Identities, c.Target, c.Kept)
		if c.Pending > 0 {
			fmt.Fprintf(w, ", %d rows not merged yet (tracelake merge)", c.Pending)
		}
		fmt.Fprintln(w)
	}
	if d := r.Derived; d != nil {
		fmt.Fprintf(w, "%s: %d rows, %d stored twice, %d without their source row, %d at another source row's coordinates, %d of source rows that derive none, %d source rows without theirs",
			d.Table, d.Rows, d.Duplicates, d.Orphans, d.Mismatched, d.Unmarked, d.Missing)
		if d.DeadLettered > 0 {
			fmt.Fprintf(w, " (%d more in the dead-letter table)", d.DeadLettered)
		}
		fmt.Fprintln(w)
	}
}

// writeVerdict writes r's verdict: OK, or its problems.
func (r *Report) writeVerdict(w io.Writer) {
	rows, dlq := r.Totals()
	if r.OK {
		fmt.Fprintf(w, "OK: %d partitions, %d rows, %d dead-letter rows, no gaps, no duplicates\n", len(r.Partitions), rows, dlq)
		return
	}
	fmt.Fprintf(w, "FAILED: %s\n", strings.Join(r.Problems, "; "))
}
