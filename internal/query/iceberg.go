package query

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Iceberg reads Iceberg tables from their catalog, for a process that
// ingests nothing (`tracelake serve`): a query's tables are scanned from
// the files of their current snapshot, straight from the warehouse (a
// directory or S3), into an in-memory DuckDB of the reader's own that
// runs the query over the scans as they stream; no table is copied first.
//
// Each reference of a query to a table is a scan of its own, planned
// before the query runs: of the columns the query names (all for a *),
// and of the rows its predicates keep where that is certain (a WHERE or
// inner join's comparisons of a column with constants: =, <, <=, >, >=,
// IN, BETWEEN, on string, integer and timestamp columns, constants that
// may be casts and consistent functions, and parameters). For a tenant,
// a table with a tenant_id column is scanned for the tenant's rows alone:
// the other tenants' rows never reach the query's database (and its view
// filters tenant_id again). From those predicates Iceberg skips the files
// that cannot hold a row: by partition (tenant, day of the event time:
// the typed tables are partitioned so) and by the column bounds the
// manifests keep; the rows of the files it reads are filtered as read.
//
// Freshness: the tables' metadata is loaded from the catalog when the
// reader opens and again every IcebergOptions.Refresh (default 5 s), so a
// query sees what was committed at most Refresh (plus a catalog load)
// before it starts, and each table as one snapshot throughout. Tables are
// loaded one by one: a query over two tables may see each at a different
// commit (tracelake commits a derived table before its source, and the
// dead-letter table on its own). Replicas of the reader (serve processes
// behind one address) each refresh on their own clock, so two queries on
// two replicas may differ by up to Refresh; a client that must see its own
// writes waits Refresh after they are committed.
//
// The query's database is a sandbox: in memory, with access to files,
// the network and extensions off and its configuration locked when it is
// opened, so that even a query the checker should have refused can read
// nothing but what was registered for it.
type Iceberg struct {
	cat        catalog.Catalog
	decl       []IcebergTable
	opt        IcebergOptions
	db         *sql.DB
	names      *checker        // the functions and types a query may name
	consistent map[string]bool // scalar functions whose constant calls may be pushed
	template   string          // json_serialize_sql of SELECT NULL, for evaluating constants
	shared     []string
	slots      chan struct{}

	mu     sync.RWMutex
	tables map[string]*icebergTable // by lower-cased name; absent until the catalog has it

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	scanned func(rows int64) // tests: told of each batch a scan hands on
	// mem allocates what a scan adds to its batches (see scanReader.wrap):
	// held while DuckDB holds the batch.
	mem memory.Allocator
}

// IcebergTable is a table the reader serves.
type IcebergTable struct {
	Name string           // the name queries use
	ID   table.Identifier // the catalog's
	// Columns are the columns this release declares the table with, each
	// with its DuckDB type (the DuckDB sink's duckdb.Column). A JSON column, a string in Iceberg, is read
	// as JSON, as the DuckDB sink types it (record_metadata, attributes).
	// A declared column the table does not have yet reads NULL: a table
	// last written by an older release's loader, which gains the column
	// when a loader of this release starts, answers this release's
	// queries (the Grafana APIs name observed_time_unix_nano) instead of
	// failing them all until then.
	Columns []schema.SinkColumn
}

// IcebergOptions configure an Iceberg reader.
type IcebergOptions struct {
	// Shared are tables without a tenant_id column that every tenant may
	// read whole (the price table). Every other table without tenant_id
	// is the operator's alone.
	Shared []string
	// Refresh is how often the tables' metadata is loaded again from the
	// catalog: how stale a query may be. Default 5 s.
	Refresh time.Duration
	// MaxConcurrent bounds the queries running at once; more wait.
	// Default 4.
	MaxConcurrent int
	// Timeout bounds each query, from its start to its last batch read;
	// 0 for none.
	Timeout time.Duration
	// ScanConcurrency is how many files one scan decodes at once; a scan
	// holds up to that many files' batches while it returns them in
	// order. Default 4.
	ScanConcurrency int
	// BatchRows is the most rows of a batch a scan hands to DuckDB: what
	// a query holds of a table at once is about a batch per DuckDB thread
	// and per file decoded ahead. Default 16384.
	BatchRows int
	// Threads is how many threads DuckDB runs the queries on, all queries
	// together. Default DuckDB's: one per core.
	Threads int
	// OnScan, if set, is told of each scan a query plans, before it reads
	// (tests, benchmarks, logs).
	OnScan func(ScanStats)
	// Log reports refresh failures. Default slog.Default().
	Log *slog.Logger
}

// ScanStats describe one scan of a table for a query.
type ScanStats struct {
	Table   string   // the name queries use
	Filter  string   // the row filter Iceberg applied, as it prints it
	Columns []string // the columns read
	Files   int      // data files read: those left after pruning
	Bytes   int64    // their size
	Rows    int64    // their rows, before the row filter
}

// refreshTimeout bounds one refresh of the tables.
const refreshTimeout = time.Minute

// tenantColumn is the column that says whose a row is.
const tenantColumn = "tenant_id"

// boundedStrings are the string columns whose values are short by
// construction — ids of a fixed length in hex, a tenant (at most 150
// bytes), a Kafka topic name (at most 249), an OpenTelemetry enum — the
// only string columns whose predicates are pushed to Iceberg. A value of
// more than 4096 bytes makes arrow-go's Parquet writer drop its column
// chunk's max or min (parquet/file/column_writer.go ApplyStatSizeLimits),
// after which iceberg-go bounds the file by its other row groups
// (table/internal/parquet_files.go skips the chunk) and, reading, prunes
// the row group as one whose max is "" (table/evaluators.go
// TestRowGroup): a pushed predicate on a column of free text (a span's
// name, a status message, a log body) lost the rows with or beside a long
// value, in every file already written as well.
var boundedStrings = map[string]bool{tenantColumn: true, "trace_id": true, "span_id": true, "parent_span_id": true,
	schema.TopicColumn: true, "kind": true, "status_code": true}

// shortValues says whether column, of Iceberg type t, holds values
// Parquet keeps statistics of: any that is not a string, and the strings
// of boundedStrings.
func shortValues(t iceberggo.Type, column string) bool {
	_, isString := t.(iceberggo.StringType)
	return !isString || boundedStrings[column]
}

// icebergTable is a served table as last loaded.
type icebergTable struct {
	decl   IcebergTable
	tbl    *table.Table
	fields map[string]iceberggo.NestedField // by lower-cased name
	json   map[string]bool                  // lower-cased
	// absent are the declared columns the table's schema lacks, in
	// their declared order, read as NULL (IcebergTable.Columns).
	absent   []schema.SinkColumn
	tenanted bool
}

// NewIceberg reads tables from cat. A table the catalog does not have yet
// is served from the first refresh that finds it.
func NewIceberg(ctx context.Context, cat catalog.Catalog, tables []IcebergTable, opt IcebergOptions) (*Iceberg, error) {
	if opt.Refresh <= 0 {
		opt.Refresh = 5 * time.Second
	}
	if opt.MaxConcurrent <= 0 {
		opt.MaxConcurrent = 4
	}
	if opt.ScanConcurrency <= 0 {
		opt.ScanConcurrency = 4
	}
	if opt.BatchRows <= 0 {
		opt.BatchRows = 16384
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	names := map[string]bool{}
	for _, t := range tables {
		lower := foldName(t.Name)
		if names[lower] {
			return nil, fmt.Errorf("table %s declared twice", t.Name)
		}
		names[lower] = true
	}
	// Settings given when the database opens, locked: a query cannot turn
	// them back (SET is refused anyway). Without insertion order to keep,
	// a streaming result reads its scans only a bounded way ahead of the
	// client; with it, DuckDB read a scan of an Arrow stream whole before
	// the first batch (TestIcebergReadStreamsAndAFailureLaterIsTheReadsError).
	// A query without ORDER BY gets its rows in no particular order, as
	// SQL has it.
	dsn := "?enable_external_access=false&autoinstall_known_extensions=false&autoload_known_extensions=false&lock_configuration=true&preserve_insertion_order=false"
	if opt.Threads > 0 {
		dsn += fmt.Sprintf("&threads=%d", opt.Threads)
	}
	db, err := sql.Open("duckdb", dsn)
	if err != nil {
		return nil, fmt.Errorf("open the query database: %w", err)
	}
	ic := &Iceberg{cat: cat, decl: slices.Clone(tables), opt: opt, mem: memory.DefaultAllocator, db: db, shared: lowerAll(opt.Shared), slots: make(chan struct{}, opt.MaxConcurrent),
		tables: map[string]*icebergTable{}, stop: make(chan struct{}), done: make(chan struct{})}
	if err := ic.prepare(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := ic.refresh(ctx); err != nil {
		db.Close()
		return nil, err
	}
	go ic.refreshLoop()
	return ic, nil
}

// prepare lists the functions and makes the constants' template.
func (ic *Iceberg) prepare(ctx context.Context) error {
	types, err := allowedTypes(ctx, ic.db)
	if err != nil {
		return err
	}
	functions, err := allowedFunctions(ctx, ic.db, types)
	if err != nil {
		return err
	}
	ic.names = &checker{functions: functions, types: types}
	if ic.consistent, err = functionSet(ctx, ic.db, `SELECT lower(function_name) FROM duckdb_functions()
		WHERE function_type = 'scalar' GROUP BY 1 HAVING bool_and(stability = 'CONSISTENT')`); err != nil {
		return err
	}
	if err := ic.db.QueryRowContext(ctx, "SELECT json_serialize_sql('SELECT NULL')::VARCHAR").Scan(&ic.template); err != nil {
		return fmt.Errorf("parse a constant: %w", err)
	}
	return nil
}

// Close stops the refreshes and closes the query database; queries still
// streaming fail.
func (ic *Iceberg) Close() error {
	var err error
	ic.closeOnce.Do(func() {
		close(ic.stop)
		<-ic.done
		err = ic.db.Close()
	})
	return err
}

// refreshLoop loads the tables every Refresh until Close.
func (ic *Iceberg) refreshLoop() {
	defer close(ic.done)
	t := time.NewTicker(ic.opt.Refresh)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-ic.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-ic.stop:
			return
		case <-t.C:
			// A catalog that hangs holds up the refreshes, not the queries.
			rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
			err := ic.refresh(rctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				ic.opt.Log.Warn("refresh the iceberg tables; queries read them as last loaded", "err", err)
			}
		}
	}
}

// refresh loads each table's current metadata. A table the catalog does
// not have is left out, and forgotten if it was loaded before (dropped):
// a catalog's "no such table" is its answer, not a failure, and a reader
// opened now would not serve it either (kept, it answered the dropped
// table's last rows for as long as the process ran, or failed on the
// files a purge deleted). One that fails to load is kept as last loaded,
// and the failure returned. A table whose metadata
// did not change since it was last loaded is kept as it was: a loaded
// table carries iceberg-go's cache of decoded manifest lists, which a
// fresh load starts empty, so every query after each refresh (every 5 s
// by default) would decode them again.
func (ic *Iceberg) refresh(ctx context.Context) error {
	var errs []error
	for _, decl := range ic.decl {
		tbl, err := ic.cat.LoadTable(ctx, decl.ID)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			ic.mu.Lock()
			delete(ic.tables, foldName(decl.Name))
			ic.mu.Unlock()
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("load table %s: %w", strings.Join(decl.ID, "."), err))
			continue
		}
		ic.mu.RLock()
		last := ic.tables[foldName(decl.Name)]
		ic.mu.RUnlock()
		if last != nil && unchanged(last.tbl, tbl) {
			continue
		}
		t := &icebergTable{decl: decl, tbl: tbl, fields: map[string]iceberggo.NestedField{}, json: map[string]bool{}}
		for _, f := range tbl.Schema().Fields() {
			t.fields[foldName(f.Name)] = f
		}
		for _, c := range decl.Columns {
			if c.Type == "JSON" {
				t.json[foldName(c.Name)] = true
			}
			if _, ok := t.fields[foldName(c.Name)]; !ok {
				t.absent = append(t.absent, c)
			}
		}
		_, t.tenanted = t.fields[tenantColumn]
		ic.mu.Lock()
		ic.tables[foldName(decl.Name)] = t
		ic.mu.Unlock()
	}
	return errors.Join(errs...)
}

// unchanged reports whether table now has the metadata it had when last
// was loaded. Its content decides, not its location: a catalog may answer
// no location (REST's metadata-location is optional), the same "" after
// every commit.
func unchanged(last, now *table.Table) bool {
	return last.MetadataLocation() == now.MetadataLocation() && last.Metadata().Equals(now.Metadata())
}

// scope is the tables s reads, as last loaded, by lower-cased name.
func (ic *Iceberg) scope(s tenancy.Scope) map[string]*icebergTable {
	ic.mu.RLock()
	defer ic.mu.RUnlock()
	out := map[string]*icebergTable{}
	for name, t := range ic.tables {
		if s.All || t.tenanted || slices.Contains(ic.shared, name) {
			out[name] = t
		}
	}
	return out
}

// Query implements Reader.
func (ic *Iceberg) Query(ctx context.Context, s tenancy.Scope, q string, params ...any) (array.RecordReader, error) {
	ctx, cancel := bounded(ctx, ic.opt.Timeout)
	sess, text, _, err := ic.open(ctx, s, q, params, true)
	if err != nil {
		cancel()
		return nil, err
	}
	sess.cleanup = append(sess.cleanup, cancel)
	return sess.run(ctx, text, params)
}

// Schema implements Reader: the query runs over scans of no file, with
// no row (and NULL for each parameter), for its schema.
func (ic *Iceberg) Schema(ctx context.Context, s tenancy.Scope, q string) (*arrow.Schema, error) {
	sess, text, params, err := ic.open(ctx, s, q, nil, false)
	if err != nil {
		return nil, err
	}
	return sess.schema(ctx, text, params)
}

// Parameters says the type of each parameter of q as DuckDB infers it
// over scans of no file (flightsql.Parameters: JDBC binds by it), as the
// DuckDB reader does.
func (ic *Iceberg) Parameters(ctx context.Context, s tenancy.Scope, q string) (*arrow.Schema, error) {
	sess, text, n, err := ic.open(ctx, s, q, nil, false)
	if err != nil {
		return nil, err
	}
	defer sess.close()
	return sess.parameters(ctx, text, n)
}

// Tables implements Reader.
func (ic *Iceberg) Tables(ctx context.Context, s tenancy.Scope) ([]Table, error) {
	sess, err := openSession(ctx, ic.db, ic.slots, s)
	if err != nil {
		return nil, err
	}
	defer sess.close()
	tables := ic.scope(s)
	names := make([]string, 0, len(tables))
	for name := range tables {
		names = append(names, name)
	}
	slices.Sort(names)
	prefix, err := viewPrefix()
	if err != nil {
		return nil, err
	}
	out := make([]Table, 0, len(names))
	for i, name := range names {
		t := tables[name]
		rp := &refPlan{tableRef: tableRef{table: name}, view: fmt.Sprintf("%s%d", prefix, i), all: true}
		if err := ic.bind(ctx, sess, s, t, rp, nil, false, false); err != nil {
			return nil, err
		}
		var schema *arrow.Schema
		err := sess.arrow(ctx, "SELECT * FROM "+sqltext.Ident(rp.view)+" LIMIT 0", nil, func(rr array.RecordReader) {
			schema = rr.Schema()
		})
		if err != nil {
			return nil, fmt.Errorf("columns of %s: %w", t.decl.Name, err)
		}
		out = append(out, Table{Name: t.decl.Name, Schema: schema})
	}
	return out, nil
}

// viewPrefix names the views of one query: unguessable, so that no other
// query's can be named even by one the checker let through.
func viewPrefix() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "tracelake_" + hex.EncodeToString(b) + "_", nil
}

// open checks q for s on a session of its own and binds each of its table
// references to a view of a scan of its own (with no file unless scan),
// params the values of q's parameters (pushed with the constants). It
// returns the session, the query to run and its number of parameters.
func (ic *Iceberg) open(ctx context.Context, s tenancy.Scope, q string, params []any, scan bool) (*session, string, int, error) {
	sess, err := openSession(ctx, ic.db, ic.slots, s)
	if err != nil {
		return nil, "", 0, err
	}
	text, n, err := ic.plan(ctx, sess, s, q, params, scan)
	if err != nil {
		sess.close()
		return nil, "", 0, err
	}
	return sess, text, n, nil
}

func (ic *Iceberg) plan(ctx context.Context, sess *session, s tenancy.Scope, q string, params []any, scan bool) (string, int, error) {
	tables := ic.scope(s)
	for name, t := range tables {
		sess.tables[name] = t.decl.Name
	}
	c, _, n, err := sess.check(ctx, ic.names, q)
	if err != nil {
		return "", 0, err
	}
	prefix, err := viewPrefix()
	if err != nil {
		return "", 0, err
	}
	columns := func(tableName, column string) (bool, bool) {
		t := tables[tableName]
		f, ok := t.fields[column]
		if !ok {
			// An absent declared column is named (its view reads NULL
			// there) and pushes nothing.
			return t.absentHas(column), false
		}
		return true, !t.json[column] && pushable(f.Type) && shortValues(f.Type, column)
	}
	plans := planRefs(c, prefix, columns, ic.consistent)
	var vals []constValue
	exprs := 0
	for _, rp := range plans {
		for _, p := range rp.preds {
			exprs += len(p.constants())
		}
	}
	// The predicates are pushed when their constants evaluated, or when
	// they have none (IS NULL): nil values of some constants are none
	// pushed.
	push := scan && exprs == 0
	if scan && exprs > 0 {
		// A constant that does not evaluate (1/0, a parameter without its
		// value) pushes nothing; the query reports it.
		vals, _ = sess.constants(ctx, ic.template, plans, params)
		push = vals != nil
	}
	for _, rp := range plans {
		var n int
		for _, p := range rp.preds {
			n += len(p.constants())
		}
		var mine []constValue
		pushed := push && len(vals) >= n
		if pushed {
			mine, vals = vals[:n], vals[n:]
		}
		if err := ic.bind(ctx, sess, s, tables[rp.table], rp, mine, pushed, scan); err != nil {
			return "", 0, err
		}
	}
	js, err := json.Marshal(c.doc)
	if err != nil {
		return "", 0, err
	}
	// The text that runs names the scans' views, and nothing else.
	views := make([]string, len(plans))
	for i, rp := range plans {
		views[i] = rp.view
	}
	if err := ic.nameViews(ctx, sess, s, tables, plans, prefix); err != nil {
		return "", 0, err
	}
	if err := sess.queryNames(ctx, q, n); err != nil {
		return "", 0, err
	}
	sess.checker = c.again(views...)
	text, _, err := sess.printChecked(ctx, string(js), sess.checker.again(), sess.names == nil)
	if err != nil {
		return "", 0, err
	}
	return text, n, nil
}

// nameViews makes, for each table plans read, a view named as the table
// over a scan of it of no file, every column: the query as sent binds
// there, and DuckDB names its columns as it would over the table itself
// (session.names; the text that runs names the scans' views, which a
// column holding a subquery is named by). Nothing runs over them: the
// checker of the text that runs admits the scans' views alone.
func (ic *Iceberg) nameViews(ctx context.Context, sess *session, s tenancy.Scope, tables map[string]*icebergTable, plans []*refPlan, prefix string) error {
	done := map[string]bool{}
	for _, rp := range plans {
		if done[rp.table] {
			continue
		}
		done[rp.table] = true
		t := tables[rp.table]
		named := &refPlan{tableRef: tableRef{table: rp.table}, view: fmt.Sprintf("%sname%d", prefix, len(done)), all: true}
		if err := ic.bind(ctx, sess, s, t, named, nil, false, false); err != nil {
			return err
		}
		q := fmt.Sprintf("CREATE TEMP VIEW %s AS SELECT * FROM %s", sqltext.Ident(t.decl.Name), sqltext.Ident(named.view))
		if _, err := sess.conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("make the view naming %s: %w", t.decl.Name, err)
		}
	}
	return nil
}

// bind makes rp's view: a scan of t for s (of no file unless scan), with
// rp's predicates pushed if push, vals the values of their expressions.
func (ic *Iceberg) bind(ctx context.Context, sess *session, s tenancy.Scope, t *icebergTable, rp *refPlan, vals []constValue, push, scan bool) error {
	tenant := !s.All && t.tenanted
	// The table's columns the query names, in the table's order.
	var cols []string
	for _, f := range t.tbl.Schema().Fields() {
		lower := foldName(f.Name)
		if rp.all || rp.columns[lower] || tenant && lower == tenantColumn {
			cols = append(cols, f.Name)
		}
	}
	if len(cols) == 0 {
		// count(*): one column to count the rows of.
		cols = append(cols, t.tbl.Schema().Fields()[0].Name)
	}
	// The scan reads cols and, where some file may hold none of them, a
	// column every file holds: the view takes cols alone.
	read := cols
	if guard, ok := guardColumn(t.tbl, cols); ok {
		read = append(slices.Clone(cols), guard)
	}
	var filters []iceberggo.BooleanExpression
	if tenant {
		filters = append(filters, iceberggo.EqualTo(iceberggo.Reference(t.fields[tenantColumn].Name), s.Tenant))
	}
	if push {
		for _, p := range rp.preds {
			n := len(p.constants())
			pv := vals[:n]
			vals = vals[n:]
			if e, ok := icebergPred(t.fields, p, pv); ok {
				filters = append(filters, e)
			}
		}
	}
	filter := and(filters)
	newScan := func(read []string) *table.Scan {
		return t.tbl.Scan(table.WithRowFilter(filter), table.WithSelectedFields(read...),
			table.WithMaxConcurrency(ic.opt.ScanConcurrency), table.WithArrowBatchSize(ic.opt.BatchRows))
	}
	sc := newScan(read)
	var tasks []table.FileScanTask
	if scan {
		var err error
		if tasks, err = sc.PlanFiles(ctx); err != nil {
			sc.Close()
			return fmt.Errorf("plan the scan of %s: %w", t.decl.Name, err)
		}
		if len(read) == len(cols) {
			// The schemas the metadata lists say every file holds one of
			// cols, but a schema may be gone (another engine's expiry
			// removes those no snapshot names) while files written with
			// it stay: the files' own metrics tell. The tasks, planned
			// from the same filter, are read by the scan with the guard.
			if guard, ok := fileGuardColumn(t.tbl.Schema(), cols, tasks); ok {
				sc.Close()
				read = append(slices.Clone(cols), guard)
				sc = newScan(read)
			}
		}
		if ic.opt.OnScan != nil {
			st := ScanStats{Table: t.decl.Name, Filter: filter.String(), Columns: read}
			// iceberg-go splits a large file into tasks of its row groups
			// (read.split.target-size): count each file once.
			files := map[string]bool{}
			for _, task := range tasks {
				if path := task.File.FilePath(); !files[path] {
					files[path] = true
					st.Files++
					st.Bytes += task.File.FileSizeBytes()
					st.Rows += task.File.Count()
				}
			}
			ic.opt.OnScan(st)
		}
	}
	// With no task, ReadTasks opens no file: it gives the schema.
	arrowSchema, seq, err := sc.ReadTasks(ctx, tasks)
	if err != nil {
		sc.Close()
		return fmt.Errorf("read the scan of %s: %w", t.decl.Name, err)
	}
	sess.cleanup = append(sess.cleanup, func() { sc.Close() })
	if !scan {
		seq = nil
	}
	rr := newScanReader(t.decl.Name, arrowSchema, seq, scan, ic.mem, ic.scanned)
	sess.scans = append(sess.scans, rr)
	scanView := rp.view + "_scan"
	err = sess.register(rr, scanView)
	rr.Release() // the registered stream holds it
	if err != nil {
		return err
	}
	sel := make([]string, len(cols))
	for i, c := range cols {
		field := "struct_extract(" + structColumn + ", " + sqltext.String(c) + ")"
		if t.json[foldName(c)] {
			field = "CAST(" + field + " AS JSON)"
		}
		sel[i] = field + " AS " + sqltext.Ident(c)
	}
	for _, c := range t.absent {
		if rp.all || rp.columns[foldName(c.Name)] {
			sel = append(sel, "CAST(NULL AS "+c.Type+") AS "+sqltext.Ident(c.Name))
		}
	}
	where := ""
	if tenant {
		// Again, in case a scan ever let another tenant's row through.
		where = " WHERE " + TenantIs("struct_extract("+structColumn+", "+sqltext.String(t.fields[tenantColumn].Name)+")", s.Tenant)
	}
	// A reference a recursive CTE repeats is read into a table, once.
	kind := "VIEW"
	if rp.inRecursive && scan {
		kind = "TABLE"
	}
	q := fmt.Sprintf("CREATE TEMP %s %s AS SELECT %s FROM main.%s%s", kind, sqltext.Ident(rp.view), strings.Join(sel, ", "), sqltext.Ident(scanView), where)
	if _, err := sess.conn.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("make the view of %s: %w", t.decl.Name, err)
	}
	return nil
}

// absentHas says whether column (lower-cased) is a declared column t
// lacks.
func (t *icebergTable) absentHas(column string) bool {
	return slices.ContainsFunc(t.absent, func(c schema.SinkColumn) bool { return foldName(c.Name) == column })
}

// fileGuardColumn is, like guardColumn, a column for a scan of cols to
// read beside them, found from the data files of tasks rather than from
// the table's schemas: when a file's column metrics (its value counts, or
// column sizes: iceberg-go writes them for every column a file holds, and
// so do other engines unless told not to) name none of cols, the guard is a column of the current
// schema that every such file's metrics name, of a fixed width if one is,
// then the oldest. A file without metrics tells nothing and is left to
// guardColumn.
func fileGuardColumn(current *iceberggo.Schema, cols []string, tasks []table.FileScanTask) (string, bool) {
	ids := make([]int, 0, len(cols))
	for _, c := range cols {
		if f, ok := current.FindFieldByName(c); ok {
			ids = append(ids, f.ID)
		}
	}
	var common map[int]bool // the field ids every file lacking cols holds
	seen := map[string]bool{}
	for _, task := range tasks {
		path := task.File.FilePath()
		if seen[path] {
			continue
		}
		seen[path] = true
		held := task.File.ValueCounts()
		if len(held) == 0 {
			held = task.File.ColumnSizes()
		}
		if len(held) == 0 || slices.ContainsFunc(ids, func(id int) bool { _, ok := held[id]; return ok }) {
			continue
		}
		if common == nil {
			common = map[int]bool{}
			for id := range held {
				common[id] = true
			}
			continue
		}
		for id := range common {
			if _, ok := held[id]; !ok {
				delete(common, id)
			}
		}
	}
	var best iceberggo.NestedField
	found, bestFixed := false, false
	for _, f := range current.Fields() {
		if _, ok := f.Type.(iceberggo.PrimitiveType); !ok || !common[f.ID] {
			continue
		}
		fixed := true
		switch f.Type.(type) {
		case iceberggo.StringType, iceberggo.BinaryType:
			fixed = false
		}
		if !found || fixed && !bestFixed || fixed == bestFixed && f.ID < best.ID {
			best, found, bestFixed = f, true, fixed
		}
	}
	if !found || slices.Contains(cols, best.Name) {
		return "", false
	}
	return best.Name, true
}

// guardColumn is a column for a scan of cols to read beside them when a
// data file of tbl may hold none of cols: one written before they were
// added to the table (a raw table's event_time, added at start to a table
// created before it; schema evolution gives the files written before a
// column null in it). iceberg-go v0.7.0 fails such a file where it should
// read its rows with the columns null: it asks the Parquet reader for no
// column at all, and that refuses ("no leaf column readers matched col
// indices": table/arrow_scanner.go prepareToRead, arrow-go
// parquet/pqarrow/file_reader.go). A file is written with all the columns
// of the table's schema of the time, and the table's metadata keeps every
// schema it had: when each of them has one of cols, every file holds one.
// Otherwise the guard is the column of the current schema that the most of
// them have (every one, for a column the table was created with),
// preferring one of a fixed width (cheaper to read than a string), then
// the oldest.
func guardColumn(tbl *table.Table, cols []string) (string, bool) {
	current := tbl.Schema()
	ids := make([]int, 0, len(cols))
	for _, c := range cols {
		if f, ok := current.FindFieldByName(c); ok {
			ids = append(ids, f.ID)
		}
	}
	schemas := tbl.Metadata().Schemas()
	covered := func(sc *iceberggo.Schema) bool {
		for _, id := range ids {
			if _, ok := sc.FindFieldByID(id); ok {
				return true
			}
		}
		return false
	}
	if !slices.ContainsFunc(schemas, func(sc *iceberggo.Schema) bool { return !covered(sc) }) {
		return "", false
	}
	var best iceberggo.NestedField
	bestHeld, bestFixed := -1, false
	for _, f := range current.Fields() {
		if _, ok := f.Type.(iceberggo.PrimitiveType); !ok {
			continue
		}
		held := 0
		for _, sc := range schemas {
			if _, ok := sc.FindFieldByID(f.ID); ok {
				held++
			}
		}
		fixed := true
		switch f.Type.(type) {
		case iceberggo.StringType, iceberggo.BinaryType:
			fixed = false
		}
		if held > bestHeld || held == bestHeld && (fixed && !bestFixed || fixed == bestFixed && f.ID < best.ID) {
			best, bestHeld, bestFixed = f, held, fixed
		}
	}
	if bestHeld < 0 || slices.Contains(cols, best.Name) {
		return "", false
	}
	return best.Name, true
}
