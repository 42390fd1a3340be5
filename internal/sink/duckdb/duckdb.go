// Package duckdb is the embedded DuckDB sink: batches are staged as NDJSON
// files on local disk and one load inserts the rows of many files, their
// dead-letter rows and their ledger rows in one transaction.
package duckdb

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // registers the "duckdb" driver

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Options configure a Sink.
type Options struct {
	Path     string // database file
	StageDir string // staged files; created if absent
	Table    string // raw table (raw mode) or the user's table (transform mode)
	// Transform loads each JSON object as a row of the user's existing Table
	// instead of a raw row.
	Transform bool
	// Typed, when set, is the declared table whose rows the batches carry
	// (OTLP spans or logs): Table is created with its columns and loaded
	// fenced by its coordinates, as the raw table is.
	Typed *schema.Table
	// Derived, with a Typed table, is the table of the batches' Derived
	// rows (genai_operations), named DerivedTable: created with its
	// columns and loaded in the transaction of the rows it comes from,
	// fenced by the same coordinates.
	Derived      *schema.Table
	DerivedTable string
	// Routed makes the sink a sink.Router: the batches' rows are routed
	// tables' (Batch.Routed, database change capture), each created on
	// first sight and registered in <Table>_routes; Table itself is not
	// created, only its dead-letter and ledger tables.
	Routed bool
	// DistributeEvery bounds how long routed rows wait in the landing
	// table before a load's end moves them into their changelog tables
	// (see Landing); 0: DefaultDistributeEvery.
	DistributeEvery time.Duration
	// Zstd compresses staged files.
	Zstd bool
	// MemoryLimit (bytes) and Threads bound DuckDB; 0 keeps its defaults
	// (Threads 0 with a MemoryLimit or BesidePipeline: see threadsFor).
	MemoryLimit int64
	Threads     int
	// BesidePipeline says a pipeline reads, checks and stages records in
	// this process while DuckDB loads them (tracelake run, the demo):
	// with Threads 0, DuckDB leaves it one core.
	BesidePipeline bool
	// JSONCompression is how the JSON columns of the tables the sink
	// creates are stored; "" is JSONAuto.
	JSONCompression JSONCompression
	// MustExist refuses a Path where no file is (ErrNoDatabase), for
	// those that only read what was loaded there: opening creates an
	// empty database (and StageDir) otherwise, and a mistyped path
	// answered empty and left both behind.
	MustExist bool
	Log       *slog.Logger
}

// Sink loads into one DuckDB database file. DuckDB allows one process per
// file, so every writer of the tables is in this process and a mutex around
// loads makes the ledger check and the insert atomic together.
type Sink struct {
	opt    Options
	db     *sql.DB
	ownsDB bool // false for a sink opened Beside another
	log    *slog.Logger
	loadMu sync.Mutex
	// lastLoaded is the last loaded offset per partition (-1: none), filled
	// from the ledger on first use and advanced by each load; see fence.
	lastLoaded map[sink.TopicPartition]int64
	tables     tables
	zstd       sink.Zstd
	// rawJSON is the USING COMPRESSION clause of the raw table's JSON
	// columns, set by Prepare (rawJSONStorage).
	rawJSON string
	// columns of the user's table, read by Prepare in transform mode and
	// again by a load that finds the table changed (userTableSQL, its
	// CREATE statement when read).
	userTableSQL string
	userColumns  []userColumn
	userKeys     []userKey
	userChecks   []userCheck
	userFKs      []userForeignKey
	// aheadSlot holds a token while a load reads ahead or holds what it
	// read: one at a time (see readAhead).
	aheadSlot chan struct{}
	// routed are the routed tables and their columns (name → type),
	// read by Prepare and kept by the loads (Options.Routed); routedMu
	// guards it against the decoders reading it (RoutedColumns).
	routedMu sync.RWMutex
	routed   map[string]map[string]string
	// routedDefaults are the column defaults of each routed table
	// (column → the default's SQL), read with routed (readRouted) and kept
	// by the loads as routed is (routedDefaultsAdded, those of the load in
	// progress), guarded by routedMu: a move reads them there, not in the
	// catalog (whose duckdb_columns() lists every table's columns: ~30 ms
	// a move among 1,000 tables).
	routedDefaults, routedDefaultsAdded map[string]map[string]string
	// routedSources are the routed tables' source tables (the
	// registry's), guarded by routedMu too; routedCreated those the load
	// in progress created (or whose servers it grew: growServers), the
	// cache's once it commits.
	routedSources, routedCreated map[string]sink.SourceTable
	// routedAdded are the routed tables the load in progress created or
	// grew, with all their columns: the cache's once it commits.
	routedAdded map[string]map[string]string
	// checkpointAfterCommit: the load in progress gave a column a
	// default DuckDB cannot replay from its log (defaultLiteral), so the
	// database is checkpointed as soon as it commits.
	checkpointAfterCommit bool
	// routedStale says that a transaction that may have created, grown
	// or widened routed tables reported an error: it may have committed
	// all the same (a reply lost), and its retry, fenced by the ledger,
	// loads nothing and so adds nothing to the cache. The cache is read
	// from the catalog again before the next load, move or replay
	// (freshRouted). Guarded by loadMu.
	routedStale bool
	// landedSince is when the oldest rows landed since the last move
	// landed (zero: none); landingFailed are the tables whose rows could
	// not be moved, with the reason and their next try. moveTimer, while
	// set, moves at moveAt, when a move is due, if no load does first
	// (distributeIfDue); closed stops it for good. Guarded by loadMu.
	landedSince   time.Time
	moveTook      time.Duration // the last move's main pass
	landingFailed map[string]landingFailure
	moveTimer     *time.Timer
	moveAt        time.Time
	closed        bool
	// unmoved is landingFailed's tables and errors as of the last move,
	// for mergers (Unmoved), which do not wait for the loads.
	unmoved atomic.Pointer[map[string]error]
	// beforeMoveCommit, when set (by tests), is called with the move's
	// context before each of its groups commits (see distributeOnce): a
	// move stopped there, between two groups.
	beforeMoveCommit func(context.Context)
	// readAheadDone, when set (by tests), is called after a load waiting
	// for the lock read its files ahead.
	readAheadDone func()
	// replyLost, when set (by tests), is called after each load
	// transaction commits; its error is the load's, as if the commit's
	// reply were lost: the load committed, and says it failed.
	replyLost func() error
	// loading signals the loads in flight into db, this sink's and those
	// of the sinks Beside it (one per database).
	loading *Loading
}

type tables struct {
	main, dlq, ledger string
	derived           string // "" without Options.Derived
	routes            string // registry of routed tables, "" without Options.Routed
	// reached is, per routed table and partition, the offset past the
	// last record loaded that routed a row there (<Table>_routes_reached):
	// what a merger compares with its watermarks to find the tables with
	// new rows in one query, whatever the count of tables.
	reached string
	// schemaTopics are the topics that carried a Debezium server's
	// schema change messages (<Table>_routes_schema_topics).
	schemaTopics string
	// landing holds the routed rows loaded and not yet distributed
	// (<Table>_landing, see Landing).
	landing string
	// mainTopic is the SQL expression of a main-table row's topic (raw
	// and typed tables; the user's table in transform mode has none).
	mainTopic string
}

// Open opens (or creates) the database file and the stage directory.
func Open(opt Options) (*Sink, error) {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.MustExist {
		// Other errors of Stat (a directory not readable) are left to
		// the open, which says them.
		if _, err := os.Stat(opt.Path); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("open duckdb: %w at %s", ErrNoDatabase, opt.Path)
		}
	}
	if err := os.MkdirAll(opt.StageDir, 0o755); err != nil {
		return nil, fmt.Errorf("create stage directory %s: %w", opt.StageDir, err)
	}
	if dir := filepath.Dir(opt.Path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create directory for %s: %w", opt.Path, err)
		}
	}
	if opt.Threads > 0 && opt.MemoryLimit > 0 && int64(opt.Threads)*threadMemory > opt.MemoryLimit {
		opt.Log.Warn("sink.duckdb.threads leaves less than 64 MiB of memory_limit per thread: a load reading as many staged files as threads can run out of memory",
			"threads", opt.Threads, "memory_limit_mib", opt.MemoryLimit>>20)
	}
	db, err := sql.Open("duckdb", opt.Path+dsnSettings(opt))
	if err != nil {
		return nil, openError(opt.Path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, openError(opt.Path, err)
	}
	s, err := newSink(opt, db, newLoading())
	if err != nil {
		db.Close()
		return nil, err
	}
	s.ownsDB = true
	return s, nil
}

// Beside opens a sink of other tables (opt.Table and what goes with it)
// in s's database, for a process that loads several tables into one file
// (DuckDB lets one process open it): the two load apart, each with its
// own ledger, lock and stage directory (opt.StageDir, not s's: Prepare
// removes the files it finds there), and closing it leaves the database
// to s. opt's Path, MemoryLimit and Threads are s's.
func (s *Sink) Beside(opt Options) (*Sink, error) {
	if opt.Log == nil {
		opt.Log = s.log
	}
	if err := os.MkdirAll(opt.StageDir, 0o755); err != nil {
		return nil, fmt.Errorf("create stage directory %s: %w", opt.StageDir, err)
	}
	if sqltext.Name(opt.Table) == s.tables.main || opt.StageDir == s.opt.StageDir {
		// Prepare removes what it finds in its stage directory.
		return nil, fmt.Errorf("BUG: a second sink of table %s or stage directory %s in one database", opt.Table, opt.StageDir)
	}
	opt.Path, opt.MemoryLimit, opt.Threads = s.opt.Path, s.opt.MemoryLimit, s.opt.Threads
	return newSink(opt, s.db, s.loading)
}

// newSink is a sink of opt's tables in db, whose loads in flight loading
// signals.
func newSink(opt Options, db *sql.DB, loading *Loading) (*Sink, error) {
	if opt.Typed != nil && opt.Transform {
		return nil, errors.New("BUG: a typed table in transform mode")
	}
	s := &Sink{
		opt:        opt,
		db:         db,
		log:        opt.Log,
		lastLoaded: map[sink.TopicPartition]int64{},
		aheadSlot:  make(chan struct{}, 1),
		loading:    loading,
		tables: tables{
			main:      sqltext.Name(opt.Table),
			dlq:       sqltext.Name(opt.Table + "_dlq"),
			ledger:    sqltext.Name(opt.Table + "_ledger"),
			mainTopic: "(record_metadata->>'topic')",
		},
	}
	if opt.Typed != nil && opt.Routed {
		return nil, errors.New("BUG: a typed table and routed tables")
	}
	if opt.Typed != nil || opt.Routed {
		s.tables.mainTopic = schema.TopicColumn
	}
	if opt.Routed {
		s.tables.routes = sqltext.Name(s.RoutesTable())
		s.tables.reached = sqltext.Name(opt.Table + RoutesReached)
		s.tables.schemaTopics = sqltext.Name(opt.Table + RoutesSchemaTopics)
		s.tables.landing = sqltext.Name(opt.Table + Landing)
		s.opt.DistributeEvery = cmp.Or(s.opt.DistributeEvery, DefaultDistributeEvery)
		s.routed, s.routedAdded = map[string]map[string]string{}, map[string]map[string]string{}
		s.routedDefaults, s.routedDefaultsAdded = map[string]map[string]string{}, map[string]map[string]string{}
		s.routedSources, s.routedCreated = map[string]sink.SourceTable{}, map[string]sink.SourceTable{}
		s.landingFailed = map[string]landingFailure{}
	}
	if (opt.Derived != nil) != (opt.Typed != nil && opt.DerivedTable != "") {
		return nil, errors.New("BUG: a derived table needs a typed table and a name")
	}
	if opt.Derived != nil {
		s.tables.derived = sqltext.Name(opt.DerivedTable)
	}
	return s, nil
}

// Table is the sink's table (Options.Table): with routed tables, the
// stem of the names of the tables that keep them.
func (s *Sink) Table() string { return s.opt.Table }

// DB exposes the database for queries (verify, sql).
func (s *Sink) DB() *sql.DB { return s.db }

// MemoryLimit is DuckDB's memory_limit in bytes as configured, 0 for
// DuckDB's default.
func (s *Sink) MemoryLimit() int64 { return s.opt.MemoryLimit }

// Loading signals the loads in flight into the database, this sink's and
// those of every sink Beside it: readers of DB give way to them.
func (s *Sink) Loading() *Loading { return s.loading }

// Close closes the database, unless the sink was opened Beside another.
// A load or move in progress ends first; landed rows stay for the next
// process to move.
func (s *Sink) Close() error {
	s.loadMu.Lock()
	s.closed = true
	if s.moveTimer != nil {
		s.moveTimer.Stop()
	}
	s.loadMu.Unlock()
	if !s.ownsDB {
		return nil
	}
	return s.db.Close()
}

// ReleasesRows makes the sink a sink.RowsReleaser: Stage writes the rows
// to files and keeps nothing of them.
func (s *Sink) ReleasesRows() {}

// Stage writes the batch's rows (and dead-letter rows) to files named after
// the batch. Rewriting the same batch yields the same files.
func (s *Sink) Stage(_ context.Context, b *sink.Batch) (sink.File, error) {
	f := sink.File{Name: b.Name(), Ranges: b.Ranges, MaxLine: b.MaxLine}
	write := func(suffix string, data []byte) (string, error) {
		if len(data) == 0 {
			return "", nil
		}
		path := filepath.Join(s.opt.StageDir, f.Name+suffix)
		if s.opt.Zstd {
			path += ".zst"
		}
		n, err := s.writeFile(path, data)
		f.Bytes += n
		return path, err
	}
	var err error
	if f.RowsPath, err = write(s.rowsExt(), b.Rows); err != nil {
		return sink.File{}, err
	}
	if f.DLQPath, err = write(".dlq.ndjson", b.DLQ); err != nil {
		return sink.File{}, err
	}
	if len(b.Derived) > 0 && s.opt.Derived == nil {
		return sink.File{}, sink.ErrNoDerivedTable
	}
	if f.DerivedPath, err = write(".derived.ndjson", b.Derived); err != nil {
		return sink.File{}, err
	}
	if len(b.Routed) > 0 && !s.opt.Routed {
		return sink.File{}, errors.New("BUG: routed rows for a sink without routed tables")
	}
	if len(b.Routed) > 0 {
		buf := landingBuffers.Get().(*[]byte)
		defer landingBuffers.Put(buf)
		if *buf, err = appendLandingRows((*buf)[:0], b.Routed); err != nil {
			return sink.File{}, err
		}
		path, err := write(landingExt, *buf)
		if err != nil {
			return sink.File{}, err
		}
		for _, t := range b.Routed {
			f.Routed = append(f.Routed, sink.RoutedFile{Table: t.Table, Source: t.Source, Columns: t.Columns, Defaults: t.Defaults, Path: path})
		}
	}
	if len(b.SchemaTopics) > 0 && s.opt.Routed {
		f.SchemaTopics = slices.Clone(b.SchemaTopics)
	}
	return f, nil
}

// rawRowsExt names staged raw rows: envelope.AppendDelimitedRow's lines
// (envelope.ValueVerbatim), not NDJSON.
const rawRowsExt = ".rows"

// rowsExt names the staged rows of this sink's main table: raw rows are
// delimited lines (rawRowsExt), transform and typed rows NDJSON.
func (s *Sink) rowsExt() string {
	if s.opt.Transform || s.opt.Typed != nil {
		return ".ndjson"
	}
	return rawRowsExt
}

func (s *Sink) writeFile(path string, data []byte) (int64, error) {
	var n int64
	write := func(body []byte) error {
		n = int64(len(body))
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return fmt.Errorf("stage %s: %w", path, err)
		}
		return nil
	}
	if !s.opt.Zstd {
		return n, write(data)
	}
	err := s.zstd.Compress(data, write)
	return n, err
}

// Discard removes staged files that will not be loaded.
func (s *Sink) Discard(files []sink.File) {
	for _, f := range files {
		paths := []string{f.RowsPath, f.DLQPath, f.DerivedPath}
		for _, r := range f.Routed {
			paths = append(paths, r.Path)
		}
		for _, p := range paths {
			if p != "" {
				if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
					s.log.Warn("remove staged file", "path", p, "err", err)
				}
			}
		}
	}
}

// CleanStage removes files left in the stage directory by an earlier process
// (killed before their load): their records were not committed anywhere and
// will be read from Kafka again.
func (s *Sink) CleanStage() error {
	entries, err := os.ReadDir(s.opt.StageDir)
	if err != nil {
		return fmt.Errorf("read stage directory %s: %w", s.opt.StageDir, err)
	}
	removed := 0
	for _, e := range entries {
		if name := strings.TrimSuffix(e.Name(), ".zst"); strings.HasSuffix(name, ".ndjson") || strings.HasSuffix(name, rawRowsExt) || strings.HasSuffix(name, landingExt) {
			if err := os.Remove(filepath.Join(s.opt.StageDir, e.Name())); err != nil {
				return fmt.Errorf("remove stale staged file: %w", err)
			}
			removed++
		}
	}
	if removed > 0 {
		s.log.Info("removed stale staged files", "dir", s.opt.StageDir, "files", removed)
	}
	return nil
}

// ErrLocked is in the error Open returns (errors.Is) when another process
// has the database file open: DuckDB allows one process per file, and a
// running `tracelake run` holds it for as long as it runs. The command
// that tried can go through that process instead (its local socket).
var ErrLocked = errors.New("another process has the file open")

// ErrNoDatabase is in the error Open returns (errors.Is) when
// Options.MustExist and no file is at Options.Path.
var ErrNoDatabase = errors.New("no database")

// openError wraps a failure to open path, with ErrLocked when the cause
// is another process holding the file.
func openError(path string, err error) error {
	if strings.Contains(err.Error(), "Could not set lock") {
		return fmt.Errorf("open duckdb %s: %w: %w", path, ErrLocked, err)
	}
	return fmt.Errorf("open duckdb %s: %w", path, err)
}

// dsnSettings renders the DuckDB settings of opt as DSN parameters.
//
// max_vacuum_tasks=0 stops DuckDB's checkpoint from merging small row
// groups into bigger ones. It merges by row count (up to three row groups of
// 122,880 rows) and holds the strings of the rows it rewrites in memory, so
// with large values a merge needs memory in proportion to the table: with
// ~1 MB values and a 256 MiB memory_limit the automatic checkpoint failed
// and invalidated the database once the table passed the limit (DuckDB's
// RowGroupCollection::ScheduleVacuumTasks, v1.5). Without merges a row group
// is written per checkpoint (a load of the default size, or 1 MiB of
// smaller loads: see checkpointThreshold below); rows of fully deleted row
// groups are still dropped (that is not a vacuum task).
//
// checkpoint_threshold (checkpointThreshold) makes a load of the default
// size checkpoint in its own commit: DuckDB checkpoints a commit when its
// write-ahead log plus the commit's estimated size (its rows times their
// fixed widths, ~90 bytes a raw row, strings not counted) pass the
// threshold, and a commit it checkpoints anyway of at least
// auto_checkpoint_skip_wal_threshold (100,000 bytes by default) is written
// to the database file only, not to the log first
// (DuckTransactionManager::CommitTransaction, v1.5).
// With the default 16 MB every other load of ~20,000 rows went through the
// log and was written twice. Smaller loads (a quiet topic) still gather
// in the log until it holds checkpointThreshold, so their row groups hold
// about that much or more (a row group per load of the default size, one
// per two such loads before). See docs/BENCHMARKS.md, "checkpoint_per_load".
//
// The allocator settings make DuckDB hand freed memory back to the system
// after each task and in the background instead of keeping up to 128 MB of
// it: with them the peak RSS of 600,000 ~1 KB spans fell by ~180 MB at the
// same speed (docs/BENCHMARKS.md, "2026-12-01, bounded memory").
func dsnSettings(opt Options) string {
	v := url.Values{}
	v.Set("max_vacuum_tasks", "0")
	v.Set("checkpoint_threshold", strconv.Itoa(checkpointThresholdFor(opt)>>10)+"KiB")
	v.Set("allocator_flush_threshold", "16MiB")
	// With JSONZstd a new database file is written in a storage format
	// that compresses strings with zstd (an existing file keeps the
	// format it was created with, see zstdStorage). In such a file
	// DuckDB's own pick would be zstd for strings of 4 KiB and more on
	// average, whose scans need a vector of them in one buffer within
	// memory_limit (see JSONZstd): never picked, as in the older format.
	if opt.JSONCompression == JSONZstd {
		v.Set("storage_compatibility_version", zstdStorageVersion)
	}
	v.Set("zstd_min_string_length", strconv.FormatUint(math.MaxUint32, 10))
	v.Set("allocator_background_threads", "true")
	// The extensions tracelake uses are built in; nothing a statement
	// names (a type, a function) downloads or loads another into the
	// process (the read path refuses such names too).
	v.Set("autoinstall_known_extensions", "false")
	v.Set("autoload_known_extensions", "false")
	if opt.MemoryLimit > 0 {
		v.Set("memory_limit", strconv.FormatInt(opt.MemoryLimit>>20, 10)+"MiB")
	}
	if threads := threadsFor(opt); threads > 0 {
		v.Set("threads", strconv.Itoa(threads))
	}
	return "?" + v.Encode()
}

// checkpointThreshold is DuckDB's checkpoint_threshold (see dsnSettings):
// a load of more than ~12,000 raw rows checkpoints in its commit.
const checkpointThreshold = 1 << 20

// routedCheckpointThreshold is checkpoint_threshold with routed tables
// (database change capture): a checkpoint writes every table of the
// database, and a load of a thousand changelog tables checkpointed at
// 1 MiB took seconds more each load as tables grew ("2026-12-04,
// cdc_tables"); the log holds up to this much between checkpoints.
const routedCheckpointThreshold = 256 << 20

// checkpointThresholdFor is opt's checkpoint_threshold: with routed
// tables routedCheckpointThreshold, but no more than a quarter of
// memory_limit. A checkpoint pins the new values it writes, those of
// every commit since the last, in memory at once: 256 MiB of them (21
// dead letters of 12 MB changes) could not be pinned within a 256 MiB
// limit, and the commit that was to checkpoint them failed, and again at
// each retry of its load.
func checkpointThresholdFor(opt Options) int {
	if !opt.Routed {
		return checkpointThreshold
	}
	if opt.MemoryLimit > 0 {
		return int(min(routedCheckpointThreshold, max(checkpointThreshold, opt.MemoryLimit/4)))
	}
	return routedCheckpointThreshold
}

// threadMemory is the share of memory_limit each DuckDB thread needs to
// read staged files: DuckDB's JSON reader holds a buffer of twice
// maximum_object_size per reading thread for the whole scan, and that
// option only raises its 16 MiB default, never lowers it (DuckDB's
// JSONScanGlobalState and json_multi_file_info.cpp, v1.5): 32 MiB a
// thread, plus the rows it parses.
const threadMemory = 64 << 20

// threadsFor is the number of DuckDB threads (0: DuckDB's default, one
// per core): the configured number, else one per core, but one core
// fewer beside a pipeline and no more than memory_limit holds.
//
// One per core on a 16-core machine under the default 256 MiB limit took
// 512 MiB of read buffers, and every load (even one file, loaded in halves
// down to one) ran out of memory. Beside the pipeline, DuckDB's threads on
// every core only fought the pipeline's reading and staging for them: on
// 2 cores one thread loaded as fast with ~20% less CPU per record
// (docs/BENCHMARKS.md, "early_release").
func threadsFor(opt Options) int {
	if opt.Threads > 0 {
		return opt.Threads
	}
	if !opt.BesidePipeline && opt.MemoryLimit <= 0 {
		return 0
	}
	cores := int64(runtime.NumCPU())
	if opt.BesidePipeline {
		cores--
	}
	if opt.MemoryLimit > 0 {
		cores = min(cores, opt.MemoryLimit/threadMemory)
	}
	return int(max(1, cores))
}

// TopicExpr is the SQL expression of a raw row's topic.
const TopicExpr = "record_metadata->>'topic'"

// TableNames are the quoted names of the sink's tables, for queries.
type TableNames struct{ Main, DLQ, Ledger string }

// Tables returns the quoted names of the main, dead-letter and ledger tables.
func (s *Sink) Tables() TableNames {
	return TableNames{Main: s.tables.main, DLQ: s.tables.dlq, Ledger: s.tables.ledger}
}
