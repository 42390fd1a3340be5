package query

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	bindings "github.com/duckdb/duckdb-go-bindings"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// DuckDB reads a DuckDB database that another part of the process may be
// loading: each query runs on a connection of its own, in its own
// transaction, so it sees the loads committed when it started and
// nothing after (DuckDB's MVCC), and never holds up a load's commit.
//
// A scope bound to one tenant reads through views: on the query's
// connection, every tenant-scoped table the query names is shadowed by a
// temporary view of the same name holding the tenant's rows alone (DuckDB
// resolves an unqualified name in the temporary schema first), and the
// checker admits unqualified names only, of the tables the scope reads.
// The connection is closed after the query, never handed back to the
// pool where the loads would find the views.
type DuckDB struct {
	db      *sql.DB
	shared  []string
	names   *checker // the functions and types a query may name
	slots   chan struct{}
	timeout time.Duration
	catalog catalogCache
	yield   yielder
}

// DuckDBOptions configure a DuckDB reader.
type DuckDBOptions struct {
	// Shared are tables without a tenant_id column that every tenant may
	// read whole (the price table). Every other table without tenant_id
	// is the operator's alone.
	Shared []string
	// Routes is the registry of routed changelog tables (database change
	// capture: <sink.table>_routes, its log_table and model_table
	// columns), "" for none. A changelog table, its model and the model's
	// tombstones hold the source's columns: their tenant_id, if the source
	// table has one, is the source's and names no tenant of ours, so such
	// a table is the operator's alone (or Shared) like any table without
	// one. A table with a cdc_position column is taken for one of them
	// too, registered or not.
	Routes string
	// MaxConcurrent bounds the queries running at once (each holds a
	// connection and DuckDB's threads); more wait. Default 4.
	MaxConcurrent int
	// Timeout bounds each query, from its start to its last batch read
	// (DuckDB is interrupted past it); 0 for none.
	Timeout time.Duration
	// Loads, when set, are the loads into the database in this process
	// (the sink's Loading): a query gives way to them, before it runs
	// and between its batches, waiting each time until no load is in
	// flight or for YieldWait at most (see yielder). Reads are slower
	// while loads run, by design: ingest keeps its cores. Nil: reads
	// never wait.
	Loads Loads
	// YieldWait bounds each of a query's waits for the loads in flight;
	// default DefaultYieldWait (1s). Under loads that never pause, a
	// query moves by one batch per YieldWait.
	YieldWait time.Duration
}

// deniedFunctions are DuckDB functions that read or change state outside
// the query: settings, variables, sequences, the environment, the log,
// table statistics across tenants (stats() of a view's column reports
// the base table's), the catalog and files (json_serialize_plan binds the
// SQL it is given, unchecked: any table's columns, a file's schema), the
// process's counters of queries, transactions and connections (which
// count the loads and the other tenants' reads), how a column's values
// are held in memory (vector_type: as the storage compressed them, over
// every tenant's rows), that sleep, or that find a type named in a string
// (make_type: a type not loaded installs its extension, see
// checker.structure).
var deniedFunctions = []string{"getenv", "current_setting", "getvariable", "nextval", "currval", "setseed",
	"write_log", "stats", "pg_sleep", "sleep_ms", "json_serialize_plan",
	"current_query_id", "current_transaction_id", "txid_current", "current_connection_id", "vector_type",
	"make_type"}

// NewDuckDB reads db, the database a DuckDB sink opened.
func NewDuckDB(ctx context.Context, db *sql.DB, opt DuckDBOptions) (*DuckDB, error) {
	if opt.MaxConcurrent <= 0 {
		opt.MaxConcurrent = 4
	}
	if opt.YieldWait <= 0 {
		opt.YieldWait = DefaultYieldWait
	}
	types, err := allowedTypes(ctx, db)
	if err != nil {
		return nil, err
	}
	functions, err := allowedFunctions(ctx, db, types)
	if err != nil {
		return nil, err
	}
	d := &DuckDB{db: db, shared: lowerAll(opt.Shared), names: &checker{functions: functions, types: types},
		slots: make(chan struct{}, opt.MaxConcurrent), timeout: opt.Timeout,
		yield: yielder{loads: opt.Loads, max: opt.YieldWait}}
	// A table change capture made (a changelog table, a model, its
	// tombstones) carries cdc_position whatever the registry says of it:
	// the registry names a model only from the transaction that creates
	// it (a model made before model_table existed stays unnamed), and a
	// run that no longer captures changes names no registry at all. Its
	// tenant_id, the source's, is never ours.
	// A column is found in any case, as DuckDB binds a name to it (no
	// character other than an ASCII letter lowers to one of these names).
	hasColumn := func(name string) string {
		return `EXISTS (SELECT 1 FROM duckdb_columns() c WHERE c.table_oid = t.table_oid AND lower(c.column_name) = ` + sqltext.String(name) + `)`
	}
	d.catalog.tenanted = hasColumn("tenant_id") + ` AND NOT ` + hasColumn(cdc.PositionColumn)
	if opt.Routes != "" {
		d.catalog.tenanted += fmt.Sprintf(` AND t.table_name NOT IN (SELECT log_table FROM %[1]s UNION ALL SELECT model_table FROM %[1]s
			WHERE model_table IS NOT NULL UNION ALL SELECT model_table || '_tombstones' FROM %[1]s WHERE model_table IS NOT NULL)`, sqltext.Name(opt.Routes))
	}
	return d, nil
}

// allowedFunctions are the functions a query may call, by how it names
// them: "f" unqualified, "main.f" and "pg_catalog.f" with DuckDB's own
// schemas (the parser itself names list and struct literals
// main.list_value and main.struct_pack). A call binds to the functions of
// that name in the schema it names, or for an unqualified one in the
// first of main and pg_catalog that has the name, whichever overload its
// arguments fit: so a name is allowed when every one of those is, each
// one of DuckDB's own (internal) scalar, aggregate or window functions,
// not denied, or a macro whose body passes the checker as a query would
// (it reads no table and calls only allowed functions; pg_get_constraintdef
// has an overload that does not and one that reads duckdb_constraints()).
// A name the database or its temporary schema also defines a function of
// is refused, since DuckDB would find that one first.
func allowedFunctions(ctx context.Context, db *sql.DB, types map[string]bool) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT lower(function_name), schema_name, function_type,
			internal AND database_name = 'system',
			CASE WHEN function_type = 'macro' THEN json_serialize_sql('SELECT (' || macro_definition || ')')::VARCHAR END
		FROM duckdb_functions() WHERE function_type IN ('scalar', 'aggregate', 'window', 'macro')`)
	if err != nil {
		return nil, fmt.Errorf("list duckdb's functions: %w", err)
	}
	defer rows.Close()
	type overload struct {
		typ   string
		macro []byte // a macro's body, as json_serialize_sql parsed it
	}
	bySchema := map[string]map[string][]overload{"main": {}, "pg_catalog": {}} // schema → name → overloads
	foreign := map[string]bool{}                                               // names of functions not DuckDB's own
	for rows.Next() {
		var name, schema, typ string
		var own bool
		var body sql.NullString
		if err := rows.Scan(&name, &schema, &typ, &own, &body); err != nil {
			return nil, err
		}
		if !own || bySchema[schema] == nil {
			foreign[name] = true
			continue
		}
		bySchema[schema][name] = append(bySchema[schema][name], overload{typ, []byte(body.String)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list duckdb's functions: %w", err)
	}
	// keys are the names a call may use for each function, with what it binds to.
	keys := map[string][]overload{}
	for schema, names := range bySchema {
		for name, ovs := range names {
			if foreign[name] || slices.Contains(deniedFunctions, name) {
				continue
			}
			keys[schema+"."+name] = ovs
			if _, inMain := bySchema["main"][name]; schema == "main" || !inMain {
				keys[name] = ovs
			}
		}
	}
	functions := map[string]bool{}
	for key, ovs := range keys {
		if !slices.ContainsFunc(ovs, func(o overload) bool { return o.typ == "macro" }) {
			functions[key] = true
		}
	}
	// unnest is listed as a table function, but called in an expression
	// it unnests the list it is given, and DuckDB's parser writes
	// `x = ANY (list)` as a subquery of it; in FROM, as every table
	// function, it stays refused (check.go).
	if !foreign["unnest"] {
		functions["unnest"], functions["main.unnest"] = true, true
	}
	// Macros call other macros: each round allows those whose bodies call
	// only what is allowed so far, until a round allows none.
	body := checker{functions: functions, types: types}
	for grown := true; grown; {
		grown = false
		for key, ovs := range keys {
			if functions[key] {
				continue
			}
			if !slices.ContainsFunc(ovs, func(o overload) bool {
				if o.typ != "macro" {
					return false
				}
				_, err := body.check(o.macro)
				return err != nil
			}) {
				functions[key], grown = true, true
			}
		}
	}
	return functions, nil
}

// functionSet runs q, which lists function names.
func functionSet(ctx context.Context, db *sql.DB, q string) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list duckdb's functions: %w", err)
	}
	defer rows.Close()
	functions := map[string]bool{}
	for rows.Next() {
		var f string
		if err := rows.Scan(&f); err != nil {
			return nil, err
		}
		functions[f] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list duckdb's functions: %w", err)
	}
	return functions, nil
}

func lowerAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = foldName(n)
	}
	return out
}

// allowedTypes are the lower-cased names of the types a query may name
// that DuckDB's parser leaves for the binder to find (JSON, ENUM, …; the
// parser knows INTEGER, VARCHAR and the like itself): DuckDB's own, as it
// has them loaded. A name the database or its temporary schema also
// defines a type of is refused, since DuckDB would find that one first.
// A type not loaded would make DuckDB install and load the extension that
// has it (INET), and one it does not know, suggest the names it has.
func allowedTypes(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT lower(type_name), bool_and(internal)
		FROM duckdb_types() GROUP BY 1`)
	if err != nil {
		return nil, fmt.Errorf("list duckdb's types: %w", err)
	}
	defer rows.Close()
	types := map[string]bool{}
	for rows.Next() {
		var name string
		var own bool
		if err := rows.Scan(&name, &own); err != nil {
			return nil, err
		}
		types[name] = own
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list duckdb's types: %w", err)
	}
	return types, nil
}

// Query implements Reader.
func (d *DuckDB) Query(ctx context.Context, s tenancy.Scope, q string, params ...any) (array.RecordReader, error) {
	ctx, cancel := bounded(ctx, d.timeout)
	sess, text, _, err := d.prepare(ctx, s, q)
	if err != nil {
		cancel()
		return nil, err
	}
	// Reads give way to the loads in flight (yielder): the query runs
	// once none is (or after the wait's bound), below the loads' CPU
	// priority, and each batch after the first waits and is fetched the
	// same way. The thread ends with the session.
	t := d.yield.thread()
	sess.cleanup = append(sess.cleanup, cancel, t.stop)
	if err := d.yield.wait(ctx); err != nil {
		sess.close()
		return nil, err
	}
	var rr array.RecordReader
	t.do(func() { rr, err = sess.run(ctx, text, params) })
	if err != nil {
		return nil, err
	}
	return d.yield.reader(ctx, rr, t), nil
}

// bounded is ctx bounded by timeout (none when 0), for one query: its
// cancel goes with the query's session.
func bounded(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// prepare opens a session for s and checks q there: the session, which
// the caller closes, the text to run and its number of parameters.
func (d *DuckDB) prepare(ctx context.Context, s tenancy.Scope, q string) (*session, string, int, error) {
	sess, err := d.openSession(ctx, s)
	if err != nil {
		return nil, "", 0, err
	}
	text, params, err := d.parse(ctx, sess, s, q)
	if err != nil {
		sess.close()
		return nil, "", 0, err
	}
	return sess, text, params, nil
}

// parse checks q on sess for s as DuckDB parses it, makes the views of the
// tables it names, and returns the text that runs (the parsed query
// printed back, itself checked: see printChecked) and its number of
// parameters.
func (d *DuckDB) parse(ctx context.Context, sess *session, s tenancy.Scope, q string) (string, int, error) {
	var js string
	if err := sess.conn.QueryRowContext(ctx, "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", q).Scan(&js); err != nil {
		return "", 0, fmt.Errorf("parse the query: %w", err)
	}
	if err := d.scope(ctx, sess, s); err != nil {
		return "", 0, err
	}
	c, n, err := sess.checkParse(d.names, js)
	if err != nil {
		return "", 0, sess.parserError(q, err)
	}
	if err := sess.view(ctx, c.named()); err != nil {
		return "", 0, err
	}
	// The views bear the tables' names: the query as sent binds there.
	if err := sess.queryNames(ctx, q, n); err != nil {
		return "", 0, err
	}
	printed := c.again()
	text, params, err := sess.printChecked(ctx, js, printed, sess.names == nil)
	if err != nil {
		return "", 0, err
	}
	// What runs is the printed text: its names are those to view (the
	// query checked names the same tables, viewed above; those the
	// printer would add, too).
	if err := sess.view(ctx, printed.named()); err != nil {
		return "", 0, err
	}
	return text, params, nil
}

// Schema implements Reader: the query runs with no row (and NULL for
// each parameter) for its schema.
func (d *DuckDB) Schema(ctx context.Context, s tenancy.Scope, q string) (*arrow.Schema, error) {
	sess, text, params, err := d.prepare(ctx, s, q)
	if err != nil {
		return nil, err
	}
	return sess.schema(ctx, text, params)
}

// Parameters says the type of each parameter of q, as DuckDB infers it
// from where it stands (flightsql.Parameters: JDBC binds by it). A
// parameter whose type DuckDB leaves open is a string, which DuckDB casts.
func (d *DuckDB) Parameters(ctx context.Context, s tenancy.Scope, q string) (*arrow.Schema, error) {
	sess, text, n, err := d.prepare(ctx, s, q)
	if err != nil {
		return nil, err
	}
	defer sess.close()
	return sess.parameters(ctx, text, n)
}

// parameters says the type of each of the n parameters of text (checked,
// its views made on sess) as DuckDB infers it.
func (sess *session) parameters(ctx context.Context, text string, n int) (*arrow.Schema, error) {
	offs, err := duckdbHandles()
	if err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, n)
	err = sess.conn.Raw(func(dc any) error {
		st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, text)
		if err != nil {
			return queryError(err)
		}
		defer st.Close()
		stmt := st.(*duckdb.Stmt)
		for i := range fields {
			typ, err := stmt.ParamType(i + 1)
			if err != nil {
				return err
			}
			at := arrowType(typ)
			if typ == duckdb.TYPE_DECIMAL {
				// Its width and scale are the logical type's, which
				// duckdb-go does not export: read by the C API.
				prepared := *(**bindings.PreparedStatement)(unsafe.Add(unsafe.Pointer(stmt), offs.stmt))
				lt := bindings.ParamLogicalType(*prepared, bindings.IdxT(i+1))
				at = &arrow.Decimal128Type{Precision: int32(bindings.DecimalWidth(lt)), Scale: int32(bindings.DecimalScale(lt))}
				bindings.DestroyLogicalType(&lt)
			}
			fields[i] = arrow.Field{Name: fmt.Sprintf("$%d", i+1), Type: at, Nullable: true}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

// arrowType is the Arrow type of a DuckDB parameter type (a DECIMAL's
// width and scale aside); a string for those without a plain counterpart
// (DuckDB casts a string to them: HUGEINT's range is past Arrow's
// integers, INTERVAL, lists and the rest).
func arrowType(t duckdb.Type) arrow.DataType {
	switch t {
	case duckdb.TYPE_UTINYINT:
		return arrow.PrimitiveTypes.Uint8
	case duckdb.TYPE_USMALLINT:
		return arrow.PrimitiveTypes.Uint16
	case duckdb.TYPE_UINTEGER:
		return arrow.PrimitiveTypes.Uint32
	case duckdb.TYPE_UBIGINT:
		return arrow.PrimitiveTypes.Uint64
	case duckdb.TYPE_TIMESTAMP_NS:
		return arrow.FixedWidthTypes.Timestamp_ns
	case duckdb.TYPE_TIMESTAMP_MS:
		return arrow.FixedWidthTypes.Timestamp_ms
	case duckdb.TYPE_TIMESTAMP_S:
		return arrow.FixedWidthTypes.Timestamp_s
	case duckdb.TYPE_TIME:
		return arrow.FixedWidthTypes.Time64us
	case duckdb.TYPE_BOOLEAN:
		return arrow.FixedWidthTypes.Boolean
	case duckdb.TYPE_TINYINT:
		return arrow.PrimitiveTypes.Int8
	case duckdb.TYPE_SMALLINT:
		return arrow.PrimitiveTypes.Int16
	case duckdb.TYPE_INTEGER:
		return arrow.PrimitiveTypes.Int32
	case duckdb.TYPE_BIGINT:
		return arrow.PrimitiveTypes.Int64
	case duckdb.TYPE_FLOAT:
		return arrow.PrimitiveTypes.Float32
	case duckdb.TYPE_DOUBLE:
		return arrow.PrimitiveTypes.Float64
	case duckdb.TYPE_DATE:
		return arrow.FixedWidthTypes.Date32
	case duckdb.TYPE_TIMESTAMP, duckdb.TYPE_TIMESTAMP_TZ:
		return arrow.FixedWidthTypes.Timestamp_us
	case duckdb.TYPE_BLOB:
		return arrow.BinaryTypes.Binary
	default:
		return arrow.BinaryTypes.String
	}
}

// Tables implements Reader.
func (d *DuckDB) Tables(ctx context.Context, s tenancy.Scope) ([]Table, error) {
	sess, err := d.open(ctx, s)
	if err != nil {
		return nil, err
	}
	defer sess.close()
	if err := sess.view(ctx, slices.Collect(maps.Keys(sess.tables))); err != nil {
		return nil, err
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for _, t := range sess.tables {
			if !yield(t) {
				return
			}
		}
	})
	tables := make([]Table, 0, len(names))
	for _, name := range names {
		var schema *arrow.Schema
		err := sess.arrow(ctx, "SELECT * FROM "+sqltext.Ident(name)+" LIMIT 0", nil, func(rr array.RecordReader) {
			schema = rr.Schema()
		})
		if err != nil {
			return nil, fmt.Errorf("columns of %s: %w", name, err)
		}
		tables = append(tables, Table{Name: name, Schema: schema})
	}
	return tables, nil
}

// session is one query's connection, with the scope's views made.
type session struct {
	conn   *sql.Conn
	slots  chan struct{}     // the engine's, one of which the session holds
	tables map[string]string // lower-cased name → name, of the tables the scope reads
	// unviewed are the statements that make the views of the scope's
	// tenant-scoped tables not viewed yet, by lower-cased name (view).
	unviewed map[string]string
	// cleanup runs when the session closes, last added first, before the
	// connection is discarded.
	cleanup []func()
	// checker checks the text that runs: the last query checked's, with
	// what it may name (the views a rewrite binds it to included).
	checker *checker
	// scans are the Iceberg scans the session's views read (none for the
	// DuckDB reader): a query that fails where one failed failed for it
	// (failure).
	scans []*scanReader
	// names are the names DuckDB gives the columns of the query sent
	// (columnNames), which the query that runs is answered with: the
	// text that runs is the query rewritten (its DOUBLE constants cast,
	// an Iceberg table renamed to its scan's view), which DuckDB may
	// name otherwise. Nil: the names of the text that runs.
	names []string
	// zoned says which of those columns are a TIME WITH TIME ZONE, which
	// the query that runs answers as text (zonedAsText); nil for none.
	zoned []bool
	// zonedByValues says the query's columns' types wait for its
	// parameters' values, and DuckDB described one as a TIME WITH TIME
	// ZONE with NULLs (queryNames): which are, the values say (run,
	// zonedWith).
	zonedByValues bool
	// materialize runs the session's queries materialized, not streaming
	// (runQuery): over a database that loads go on beside, so that a
	// read's snapshot ends when its query has run, whatever the client's
	// pace.
	materialize bool
}

// openSession takes one of slots and a connection of db.
func openSession(ctx context.Context, db *sql.DB, slots chan struct{}, s tenancy.Scope) (*session, error) {
	if !s.All && s.Tenant == "" {
		return nil, errors.New("BUG: a read with no tenant and not the operator's")
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		<-slots
		return nil, fmt.Errorf("a connection to read: %w", err)
	}
	return &session{conn: conn, slots: slots, tables: map[string]string{}, unviewed: map[string]string{}}, nil
}

// openSession takes one of d's slots and a connection. Its queries run
// materialized: the database is a sink's, which loads beside the reads
// (runQuery).
func (d *DuckDB) openSession(ctx context.Context, s tenancy.Scope) (*session, error) {
	sess, err := openSession(ctx, d.db, d.slots, s)
	if err != nil {
		return nil, err
	}
	sess.materialize = true
	return sess, nil
}

// open takes a slot and a connection and finds the tables s reads there.
func (d *DuckDB) open(ctx context.Context, s tenancy.Scope) (*session, error) {
	sess, err := d.openSession(ctx, s)
	if err != nil {
		return nil, err
	}
	if err := d.scope(ctx, sess, s); err != nil {
		sess.close()
		return nil, err
	}
	return sess, nil
}

// catalogCache is the last listing of the database's tables, which every
// query's scope is made of, kept while the catalog's fingerprint stays
// the same: listing them (a correlated lookup in duckdb_columns()) costs
// several times reading the fingerprint.
type catalogCache struct {
	// tenanted is the SQL of whether catalog table t is tenant-scoped.
	tenanted    string
	mu          sync.Mutex
	listed      bool
	fingerprint []tableVersion
	tables      []catalogTable
}

// catalogTable is one table of the main schema of the database.
type catalogTable struct {
	name, catalog string
	tenanted      bool // it has a tenant_id column
}

// catalogTables are the tables of the database's main schema, the FROM
// of the listing and of the fingerprint.
const catalogTables = ` FROM duckdb_tables() t WHERE t.database_name = current_database() AND t.schema_name = 'main' AND NOT t.temporary`

// tableVersion is a table as the catalog holds it, to tell whether the
// catalog changed since it was listed: its oid (a table dropped and made
// again has a new one) and its CREATE statement as DuckDB writes it from
// the catalog (an ALTER, which keeps the oid, changes its name or columns
// there). A catalog's fingerprint is its tables' versions in oid order.
type tableVersion struct {
	oid    int64
	create string
}

func byOid(a, b tableVersion) int { return cmp.Compare(a.oid, b.oid) }

// list is the database's tables as the session sees them: listed again
// there when the catalog's fingerprint is not the one of the listing
// cached.
func (c *catalogCache) list(ctx context.Context, sess *session) ([]catalogTable, error) {
	// Rows are read rather than aggregated in SQL: DuckDB's aggregate
	// costs twice the scan.
	rows, err := sess.conn.QueryContext(ctx, `SELECT t.table_oid, t.sql`+catalogTables)
	if err != nil {
		return nil, fmt.Errorf("read the catalog's fingerprint: %w", err)
	}
	defer rows.Close()
	var now []tableVersion
	for rows.Next() {
		var v tableVersion
		if err := rows.Scan(&v.oid, &v.create); err != nil {
			return nil, fmt.Errorf("read the catalog's fingerprint: %w", err)
		}
		now = append(now, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the catalog's fingerprint: %w", err)
	}
	slices.SortFunc(now, byOid)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listed && slices.Equal(c.fingerprint, now) {
		return c.tables, nil
	}
	// The listing carries its own fingerprint, of the same snapshot: the
	// one read before may be older.
	rows, err = sess.conn.QueryContext(ctx, `SELECT t.table_oid, t.sql, t.table_name, current_database(), `+c.tenanted+catalogTables)
	if err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	defer rows.Close()
	var tables []catalogTable
	now = now[:0]
	for rows.Next() {
		var v tableVersion
		var t catalogTable
		if err := rows.Scan(&v.oid, &v.create, &t.name, &t.catalog, &t.tenanted); err != nil {
			return nil, fmt.Errorf("list the tables: %w", err)
		}
		now = append(now, v)
		tables = append(tables, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the tables: %w", err)
	}
	slices.SortFunc(now, byOid)
	c.listed, c.fingerprint, c.tables = true, now, tables
	return tables, nil
}

// scope finds the tables s reads on sess, and for one tenant the
// statement of each tenant-scoped table's view of its rows, which view
// makes when a query names it.
func (d *DuckDB) scope(ctx context.Context, sess *session, s tenancy.Scope) error {
	tables, err := d.catalog.list(ctx, sess)
	if err != nil {
		return err
	}
	for _, t := range tables {
		lower := foldName(t.name)
		switch {
		case s.All, !t.tenanted && slices.Contains(d.shared, lower):
		case t.tenanted:
			sess.unviewed[lower] = fmt.Sprintf("CREATE TEMP VIEW %s AS SELECT * FROM %s.main.%s WHERE %s",
				sqltext.Ident(t.name), sqltext.Ident(t.catalog), sqltext.Ident(t.name), TenantIs(tenantColumn, s.Tenant))
		default:
			continue
		}
		sess.tables[lower] = t.name
	}
	return nil
}

// view makes the views of the tenant-scoped tables among names
// (lower-cased), those not made yet, in one statement. A table a query
// does not name stays unviewed: the checker admits no other way to reach
// it than its name.
func (sess *session) view(ctx context.Context, names []string) error {
	var stmts []string
	for _, name := range names {
		if v, ok := sess.unviewed[name]; ok {
			stmts = append(stmts, v)
			delete(sess.unviewed, name)
		}
	}
	if len(stmts) == 0 {
		return nil
	}
	if _, err := sess.conn.ExecContext(ctx, strings.Join(stmts, ";\n")); err != nil {
		return fmt.Errorf("scope the tables to the tenant: %w", err)
	}
	return nil
}

// named are the lower-cased names of every table reference of the query
// c checked last, whether the checker bound it to a table or to a CTE: a
// name DuckDB would bind otherwise than the checker did is viewed all the
// same.
func (c *checker) named() []string {
	names := slices.Collect(maps.Keys(c.cteUses))
	for _, r := range c.refs {
		names = append(names, r.table)
	}
	return names
}

// printChecked prints the parse js back as the SQL text that is to run,
// and checks that text as DuckDB parses it, with c: DuckDB's printer is
// not its parser's inverse (it writes a named parameter's name unquoted,
// so $"1, (SELECT …)" prints as SQL of its own), so what runs must be
// checked as it is, whatever the printer made of the query checked. It
// returns the text and its number of parameters. The text is printed and
// parsed again in one statement. nameFloats names the columns holding a
// DOUBLE constant as the query does (see floatsCast): for a query whose
// columns DuckDB named neither prepared nor described (session.names).
func (sess *session) printChecked(ctx context.Context, js string, c *checker, nameFloats bool) (string, int, error) {
	js, err := sess.floatsCast(ctx, js, nameFloats)
	if err != nil {
		return "", 0, fmt.Errorf("read the parsed query: %w", err)
	}
	var text, again string
	err = sess.conn.QueryRowContext(ctx, `SELECT text, json_serialize_sql(text)::VARCHAR
		FROM (SELECT json_deserialize_sql($1::JSON) AS text)`, js).Scan(&text, &again)
	if err != nil {
		return "", 0, fmt.Errorf("print the parsed query: %w", err)
	}
	params, err := c.check([]byte(again))
	if err != nil {
		return "", 0, err
	}
	return text, params, nil
}

// checkText checks text, which is to run as it is, as DuckDB parses it,
// with c, and returns its number of parameters.
func (sess *session) checkText(ctx context.Context, text string, c *checker) (int, error) {
	var js string
	if err := sess.conn.QueryRowContext(ctx, "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", text).Scan(&js); err != nil {
		return 0, fmt.Errorf("parse the query: %w", err)
	}
	return c.check([]byte(js))
}

// check parses q as DuckDB does and checks it for the session's tables:
// the checker holds the parsed tree (for an engine that rewrites it), js
// the parse, params the number of parameters; names are the functions
// and types it may name.
func (sess *session) check(ctx context.Context, names *checker, q string) (c *checker, js string, params int, err error) {
	if err := sess.conn.QueryRowContext(ctx, "SELECT json_serialize_sql($1::VARCHAR)::VARCHAR", q).Scan(&js); err != nil {
		return nil, "", 0, fmt.Errorf("parse the query: %w", err)
	}
	c, params, err = sess.checkParse(names, js)
	if err != nil {
		return nil, "", 0, sess.parserError(q, err)
	}
	return c, js, params, nil
}

// parserError is err, a check's refusal of q, unless DuckDB's parser did
// not read q (a syntax error): then DuckDB's own error for it, as it
// reports it wherever q is sent (with where its parser stopped: its LINE
// and caret), an engine error, not a refusal by the read path's rules.
// DuckDB's parser alone reads q here (duckdb_extract_statements): nothing
// of it runs.
func (sess *session) parserError(q string, err error) error {
	var refused *RefusedError
	if !errors.As(err, &refused) || !refused.syntax {
		return err
	}
	offs, herr := duckdbHandles()
	if herr != nil {
		return err
	}
	var msg string
	_ = sess.conn.Raw(func(dc any) error {
		c, ok := dc.(*duckdb.Conn)
		if !ok {
			return nil
		}
		conn := *(*bindings.Connection)(unsafe.Add(unsafe.Pointer(c), offs.conn))
		var st bindings.ExtractedStatements
		if bindings.ExtractStatements(conn, q, &st) == 0 {
			msg = bindings.ExtractStatementsError(st)
		}
		bindings.DestroyExtracted(&st)
		return nil
	})
	if msg == "" {
		return err
	}
	return &RefusedError{Reason: msg, Engine: true}
}

// checkParse checks js, a query as json_serialize_sql parsed it, for the
// session's tables, as check does.
func (sess *session) checkParse(names *checker, js string) (*checker, int, error) {
	c := names.again(slices.Collect(maps.Keys(sess.tables))...)
	params, err := c.check([]byte(js))
	if err != nil {
		return nil, 0, err
	}
	sess.checker = c.again()
	return c, params, nil
}

// run starts text and hands the session to the reader it returns, which
// closes it when released.
func (sess *session) run(ctx context.Context, text string, params []any) (array.RecordReader, error) {
	var err error
	if sess.zonedByValues {
		if sess.zoned, err = sess.zonedWith(ctx, text, params); err != nil {
			sess.close()
			return nil, err
		}
	}
	text, err = sess.zonedAsText(ctx, text)
	if err != nil {
		sess.close()
		return nil, err
	}
	var rr array.RecordReader
	err = sess.conn.Raw(func(dc any) error {
		sr, err := runQuery(ctx, dc.(driver.Conn), text, params, !sess.materialize, sess.names, false)
		if err == nil {
			rr = sr
		}
		return err
	})
	if err != nil {
		err = sess.failure(err)
		sess.close()
		return nil, err
	}
	// The reader keeps using the connection after Raw returned: the
	// session holds it (sql.Conn) until the reader is released.
	return &sessionReader{RecordReader: rr, sess: sess}, nil
}

// schema is the schema of query text with params parameters, which runs
// with no row (and NULL for each parameter); the session closes.
func (sess *session) schema(ctx context.Context, text string, params int) (*arrow.Schema, error) {
	// The query within another is checked again as the text it makes,
	// and the tables it names viewed (those of the query within, made).
	text = "SELECT * FROM (" + text + ") LIMIT 0"
	c := sess.checker.again()
	if _, err := sess.checkText(ctx, text, c); err != nil {
		sess.close()
		return nil, err
	}
	if err := sess.view(ctx, c.named()); err != nil {
		sess.close()
		return nil, err
	}
	// The columns are named as the query sent names them (sess.names),
	// not as the subquery does: within it DuckDB renames repeated names
	// (x, x_1), which the query's result keeps (x, x). Only a query
	// DuckDB named none for (see queryNames) keeps the subquery's names.
	rr, err := sess.run(ctx, text, make([]any, params))
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	return rr.Schema(), nil
}

// zonedAsText is text, a checked query whose columns are those of the
// query sent, with each column sess.zoned says is a TIME WITH TIME ZONE
// cast to text, as DuckDB writes it (12:34:56+05:30), itself checked.
// DuckDB's Arrow writes such a value as a time64 of its clock alone, its
// offset lost (12:34:56+05:30 and 12:34:56-08 both 12:34:56), and Arrow
// has no type of a time of day with an offset. The columns are renamed
// positionally (no two alike) and named as the query names them
// (sess.names, which zoned goes with); the cast within a projection
// keeps the order an ORDER BY within gave the rows.
func (sess *session) zonedAsText(ctx context.Context, text string) (string, error) {
	if !slices.Contains(sess.zoned, true) {
		return text, nil
	}
	cols := make([]string, len(sess.zoned))
	sel := make([]string, len(sess.zoned))
	for i, zoned := range sess.zoned {
		cols[i] = fmt.Sprintf("c%d", i+1)
		sel[i] = cols[i]
		if zoned {
			sel[i] = "CAST(" + cols[i] + " AS VARCHAR) AS " + cols[i]
		}
	}
	text = "SELECT " + strings.Join(sel, ", ") + " FROM (" + text + ") AS zoned(" + strings.Join(cols, ", ") + ")"
	if _, err := sess.checkText(ctx, text, sess.checker.again()); err != nil {
		return "", err
	}
	return text, nil
}

// queryNames sets the session's names and zoned (see columnNames) of q,
// the query as sent, checked (params its number of parameters), whose
// tables bear their names (the tenant's views, or those over the scans
// on Iceberg): as DuckDB prepares q, or for a query whose columns' types
// wait for its parameters' values, which DuckDB prepares no names for,
// as DESCRIBE q lists them with a NULL for each parameter (the values
// name no column; DuckDB binds q, and runs nothing of it). Without them
// the text that runs named such a query's columns, and its schema
// otherwise than its result: the schema's query runs within another,
// which renames repeated names (x, x_1 for x, x), and on Iceberg that
// text names the scans' views, which name a column holding a subquery
// (another view each time). None where DuckDB does not parse the
// DESCRIBE as one of q (describable), where a parameter picks a star's
// columns (a NULL picks others), or where DuckDB refuses q with NULLs (a
// function that takes no NULL where a value stood): the text that runs
// names the columns then. Which of them are a TIME WITH TIME ZONE the
// values say (zonedWith), where DuckDB described one with NULLs: a
// column is one with the values only where it is with NULLs (its type
// comes of the query's own expressions: a client sends no such value),
// or fails to bind, but not the other way round (timezone('UTC', $1)).
func (sess *session) queryNames(ctx context.Context, q string, params int) error {
	var err error
	sess.names, sess.zoned, err = sess.columnNames(ctx, q)
	if err != nil || sess.names != nil {
		return err
	}
	var types []string
	sess.names, types, err = sess.describe(ctx, q, make([]any, params))
	sess.zonedByValues = slices.Contains(types, timeTZ)
	return err
}

// zonedWith says which columns of text, a checked query whose columns'
// types wait for its parameters' values (session.zonedByValues), are a
// TIME WITH TIME ZONE with params bound: as DESCRIBE text lists them
// with the values, not with NULLs (timezone('UTC', $1) is a TIME WITH
// TIME ZONE for a NULL, a timestamp for a timestamp). Nil for none, or
// where DuckDB does not describe text so: the query reports why as it
// runs.
func (sess *session) zonedWith(ctx context.Context, text string, params []any) ([]bool, error) {
	_, types, err := sess.describe(ctx, text, params)
	if err != nil || !slices.Contains(types, timeTZ) {
		return nil, err
	}
	zoned := make([]bool, len(types))
	for i, typ := range types {
		zoned[i] = typ == timeTZ
	}
	return zoned, nil
}

// timeTZ is how DESCRIBE names a TIME WITH TIME ZONE.
const timeTZ = "TIME WITH TIME ZONE"

// describe is the names and the types of the columns of q, a checked
// query, as DESCRIBE q lists them with params bound as the query's are
// (runQuery). None where DuckDB does not parse the DESCRIBE as one of q
// (describable) or refuses it: its reason, if it refuses q with the
// values too, is the query's to report as it runs.
func (sess *session) describe(ctx context.Context, q string, params []any) (names, types []string, err error) {
	text, ok, err := sess.describable(ctx, q)
	if err != nil || !ok {
		return nil, nil, err
	}
	err = sess.conn.Raw(func(dc any) error {
		rr, err := runQuery(ctx, dc.(driver.Conn), text, params, false, nil, false)
		if err != nil {
			return err
		}
		defer rr.Release()
		for rr.Next() {
			// DESCRIBE lists a column's name, then its type. Copies:
			// the values are the batch's memory, freed with it.
			rec := rr.RecordBatch()
			for i := range int(rec.NumRows()) {
				names = append(names, strings.Clone(rec.Column(0).ValueStr(i)))
				types = append(types, strings.Clone(rec.Column(1).ValueStr(i)))
			}
		}
		return rr.Err()
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("describe the query: %w", err)
		}
		return nil, nil, nil
	}
	return names, types, nil
}

// describable is a DESCRIBE of q, a checked query, and whether DuckDB
// parses it as one of the very query q (describes), which alone may run.
func (sess *session) describable(ctx context.Context, q string) (string, bool, error) {
	text := "DESCRIBE " + statementStart(q)
	var described, skeleton, js string
	// DESCRIBE SELECT 1 is a DESCRIBE as DuckDB parses one, its query
	// aside.
	err := sess.conn.QueryRowContext(ctx, `SELECT json_serialize_sql($1::VARCHAR)::VARCHAR,
		json_serialize_sql('DESCRIBE SELECT 1')::VARCHAR, json_serialize_sql($2::VARCHAR)::VARCHAR`,
		text, q).Scan(&described, &skeleton, &js)
	if err != nil {
		return "", false, fmt.Errorf("parse the query described: %w", err)
	}
	same, err := describes(described, skeleton, js)
	return text, same, err
}

// statementStart is q from its statement on: past the blanks, comments
// and empty statements (semicolons) before it, which after a DESCRIBE
// would end the DESCRIBE there. Blanks are DuckDB's: its parser reads
// Unicode spaces as blanks (a no-break space, an ideographic space, a
// byte order mark), and its lexer ends a -- comment at a carriage
// return as at a newline. Whatever it leaves, describe runs the
// DESCRIBE only if it describes the query checked: skipping more than
// DuckDB would only leaves a query parsed otherwise, not taken.
func statementStart(q string) string {
	for {
		q = strings.TrimLeftFunc(q, func(r rune) bool { return r == ';' || r == '\ufeff' || unicode.IsSpace(r) })
		switch {
		case strings.HasPrefix(q, "--"):
			end := strings.IndexAny(q, "\n\r")
			if end < 0 {
				return ""
			}
			q = q[end+1:]
		case strings.HasPrefix(q, "/*"):
			// Block comments nest, as in PostgreSQL, whose lexer
			// DuckDB's is.
			depth, i := 0, 0
			for ; i < len(q)-1; i++ {
				if q[i] == '/' && q[i+1] == '*' {
					depth, i = depth+1, i+1
				} else if q[i] == '*' && q[i+1] == '/' {
					depth, i = depth-1, i+1
					if depth == 0 {
						break
					}
				}
			}
			if depth != 0 {
				return q
			}
			q = q[i+1:]
		default:
			return q
		}
	}
}

// describes says whether described, a parse, is that of skeleton (a
// DESCRIBE's) but for the query it describes, which is the query js is
// the parse of (where each stands in its text aside), and whether the
// columns DuckDB describes with NULLs are the query's whatever the
// values: not where a parameter picks a star's columns.
func describes(described, skeleton, js string) (bool, error) {
	var stmts [3]map[string]any
	for i, doc := range []string{described, skeleton, js} {
		parsed, err := decodeParse([]byte(doc))
		if err != nil {
			return false, fmt.Errorf("read the parsed query: %w", err)
		}
		list, _ := parsed["statements"].([]any)
		if failed, _ := parsed["error"].(bool); failed || len(list) != 1 {
			return false, nil
		}
		stmts[i], _ = list[0].(map[string]any)
		withoutLocations(stmts[i])
	}
	if anyPart(stmts[2], picksByParameter) {
		// DuckDB would describe the columns a NULL picks.
		return false, nil
	}
	// The query described, in the DESCRIBE's node and in the skeleton's.
	var queries [2]any
	for i, stmt := range stmts[:2] {
		node, _ := stmt["node"].(map[string]any)
		from, _ := node["from_table"].(map[string]any)
		if from == nil {
			return false, nil
		}
		queries[i], from["query"] = from["query"], nil
	}
	stmts[0]["named_param_map"], stmts[1]["named_param_map"] = nil, nil
	return reflect.DeepEqual(stmts[0], stmts[1]) && reflect.DeepEqual(queries[0], stmts[2]["node"]), nil
}

// picksByParameter says whether o, a part of a parse, is a star or
// COLUMNS(…) whose columns a parameter's value picks (COLUMNS(c -> c =
// $1), * LIKE $1).
func picksByParameter(o map[string]any) bool {
	return o["class"] == "STAR" && anyPart(o["expr"], func(e map[string]any) bool { return e["class"] == "PARAMETER" })
}

// anyPart says whether f holds for a part of v, a parse, or v itself.
func anyPart(v any, f func(map[string]any) bool) bool {
	switch x := v.(type) {
	case []any:
		return slices.ContainsFunc(x, func(child any) bool { return anyPart(child, f) })
	case map[string]any:
		if f(x) {
			return true
		}
		for _, child := range x {
			if anyPart(child, f) {
				return true
			}
		}
	}
	return false
}

// withoutLocations removes from v, a parse, where each part stands in
// its text.
func withoutLocations(v any) {
	switch x := v.(type) {
	case []any:
		for _, child := range x {
			withoutLocations(child)
		}
	case map[string]any:
		delete(x, "query_location")
		for _, child := range x {
			withoutLocations(child)
		}
	}
}

// columnNames are the names of the columns of text, a checked query whose
// views are made, as DuckDB prepares it (binds it, not run): the query
// as sent, whose parse the checker read, names its columns as DuckDB
// itself does (a cast's type as written, DECIMAL(3, 1); a DOUBLE
// constant as DuckDB prints it, 1e0 as 1.0), which neither our rewrite
// of it nor its parse printed back may keep. None when their types wait
// for the parameters' values (DuckDB prepares one column "unknown" of
// no type, which a query of one column would take for its own). zoned
// says which columns are a TIME WITH TIME ZONE (nil for none).
func (sess *session) columnNames(ctx context.Context, text string) (names []string, zoned []bool, err error) {
	err = sess.conn.Raw(func(dc any) error {
		st, err := dc.(driver.ConnPrepareContext).PrepareContext(ctx, text)
		if err != nil {
			return queryError(err)
		}
		defer st.Close()
		stmt := st.(*duckdb.Stmt)
		n, err := stmt.ColumnCount()
		if err != nil {
			return fmt.Errorf("the query's columns: %w", err)
		}
		for i := range n {
			name, err := stmt.ColumnName(i)
			if err != nil {
				return fmt.Errorf("the query's columns: %w", err)
			}
			typ, err := stmt.ColumnType(i)
			if err != nil {
				return fmt.Errorf("the query's columns: %w", err)
			}
			if typ == duckdb.TYPE_INVALID {
				// Types (and names) that wait for the parameters'
				// values: the one column "unknown", not the query's.
				names, zoned = nil, nil
				return nil
			}
			names = append(names, name)
			if typ == duckdb.TYPE_TIME_TZ {
				if zoned == nil {
					zoned = make([]bool, n)
				}
				zoned[i] = true
			}
		}
		return nil
	})
	return names, zoned, err
}

// arrow runs text and hands its reader to f, on the session, which stays
// open. The tables' listings read their schemas so (Tables): each TIME
// WITH TIME ZONE column is text there, as every query of it answers it
// (zonedAsText); DuckDB's own Arrow type, a time64 of its clock alone,
// told a client that typed its columns by the listing to expect a time
// of day without its offset.
func (sess *session) arrow(ctx context.Context, text string, params []any, f func(array.RecordReader)) error {
	return sess.conn.Raw(func(dc any) error {
		rr, err := runQuery(ctx, dc.(driver.Conn), text, params, !sess.materialize, nil, true)
		if err != nil {
			return sess.failure(err)
		}
		defer rr.Release()
		f(rr)
		return nil
	})
}

// close runs the cleanup, discards the connection (it may hold the
// scope's views) and frees the slot.
func (sess *session) close() {
	for i := len(sess.cleanup) - 1; i >= 0; i-- {
		sess.cleanup[i]()
	}
	sess.cleanup = nil
	sess.conn.Raw(func(any) error { return driver.ErrBadConn })
	sess.conn.Close()
	<-sess.slots
}

// failure is err, DuckDB's error running a query on the session, as the
// caller gets it: the error of a scan of the session that failed, which
// DuckDB reports as an Invalid Input of its own (the Arrow stream's
// get_next failed) though it is the server's (a data file gone, the
// warehouse unreachable) or the read's context's; else queryError's.
func (sess *session) failure(err error) error {
	if err == nil {
		return nil
	}
	for _, sc := range sess.scans {
		if serr := sc.failure(); serr != nil {
			return fmt.Errorf("the query's scan failed: %w", serr)
		}
	}
	return queryError(err)
}

// queryError is a DuckDB error running a checked query: the caller's
// (a column that does not exist, a type mismatch), reported as such.
func queryError(err error) error {
	var de *duckdb.Error
	if errors.As(err, &de) && callersMistake[de.Type] {
		return &RefusedError{Reason: de.Msg, Engine: true}
	}
	return err
}

// callersMistake are the kinds of DuckDB's errors that the query it runs
// makes, whatever the data: DuckDB names them by the stage that met them,
// not by whose they are, so a query's own mistake comes in several (a
// LIKE escape of two characters is a Syntax Error met while binding,
// array_value of a number and a string Not implemented, list_reduce of
// an empty list Parameter Not Allowed; a cast of a bad value Conversion).
// The rest (IO, memory, interrupts, DuckDB's own bugs) are the server's.
var callersMistake = map[duckdb.ErrorType]bool{
	duckdb.ErrorTypeBinder: true, duckdb.ErrorTypeParser: true, duckdb.ErrorTypeSyntax: true,
	duckdb.ErrorTypeCatalog: true, duckdb.ErrorTypeConversion: true, duckdb.ErrorTypeInvalidInput: true,
	duckdb.ErrorTypeMismatchType: true, duckdb.ErrorTypeOutOfRange: true, duckdb.ErrorTypeDivideByZero: true,
	duckdb.ErrorTypeNotImplemented: true, duckdb.ErrorTypeParameterNotAllowed: true,
	duckdb.ErrorTypeParameterNotResolved: true,
}

// sessionReader is a query's reader; releasing it closes the session.
type sessionReader struct {
	array.RecordReader
	sess *session
	refs int
}

// Err is the reader's error, a query's own mistake met at a later batch
// (a streaming result's) refused as when the query runs (queryError).
func (r *sessionReader) Err() error {
	if r.sess == nil {
		return queryError(r.RecordReader.Err())
	}
	return r.sess.failure(r.RecordReader.Err())
}

func (r *sessionReader) Retain() {
	r.refs++
	r.RecordReader.Retain()
}

func (r *sessionReader) Release() {
	r.RecordReader.Release()
	if r.refs > 0 {
		r.refs--
		return
	}
	if r.sess != nil {
		r.sess.close()
		r.sess = nil
	}
}

// floatsCast is the parse js with each DOUBLE or FLOAT constant in a
// cast to its type. DuckDB prints such a constant as a bare number (1e3
// as 1000.0), which it parses again as a DECIMAL: the text that ran read
// a literal of the query as another type, and computed with it otherwise
// (0.1e0 + 0.2e0 = 0.3e0 held). Cast from its digits as a string, it
// prints as CAST('1000.0' AS DOUBLE), the same double (DuckDB writes it
// to its last digit and reads a string to the nearest double; a DECIMAL
// cast rounds twice, and -0.0 as a DECIMAL is 0). The constant's alias
// goes to the cast. A column the cast names otherwise than DuckDB names
// the query sent is named as DuckDB does (session.names); where DuckDB
// named none (the columns' types wait for the parameters' values, and
// DuckDB does not bind the query with NULLs: see queryNames), with
// nameFloats, an unaliased item of a select list that
// holds such a constant is aliased with its text as printed without the
// cast (DuckDB names such a column by that text, but for the types it
// resolved in it: DECIMAL(3,1) for DuckDB's DECIMAL(3, 1)). Numbers are
// kept as written (a HUGEINT's digits past a float64's).
func (sess *session) floatsCast(ctx context.Context, js string, nameFloats bool) (string, error) {
	parsed, err := decodeParse([]byte(js))
	if err != nil {
		return "", err
	}
	var doc any = parsed
	var named *[]unaliased
	if nameFloats {
		named = &[]unaliased{}
	}
	if !castFloats(&doc, named) {
		return js, nil
	}
	if named != nil {
		for _, u := range *named {
			var text string
			if err := sess.conn.QueryRowContext(ctx, `SELECT json_deserialize_sql($1::JSON)`, string(u.single)).Scan(&text); err != nil {
				return "", fmt.Errorf("print a column's name: %w", err)
			}
			name, ok := strings.CutPrefix(text, "SELECT ")
			if !ok {
				return "", fmt.Errorf("print a column's name: DuckDB printed %q", text)
			}
			u.item["alias"] = name
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// unaliased is an item of a select list without an alias that holds a
// DOUBLE or FLOAT constant: the item (after castFloats) and a query of
// it alone before the cast, which DuckDB prints as "SELECT <its name>".
type unaliased struct {
	item   map[string]any
	single []byte
}

// castFloats puts each DOUBLE or FLOAT constant under *v in a cast to its
// type (see floatsCast), appends the unaliased select-list items that
// held one to *named unless named is nil, and says whether it found one.
func castFloats(v *any, named *[]unaliased) bool {
	found := false
	switch x := (*v).(type) {
	case []any:
		for i := range x {
			found = castFloats(&x[i], named) || found
		}
	case map[string]any:
		list, isSelect := x["select_list"].([]any)
		isSelect = isSelect && x["type"] == "SELECT_NODE" && named != nil
		if isSelect {
			for i := range list {
				item, _ := list[i].(map[string]any)
				if item == nil || item["alias"] != "" || holdsStar(item) {
					// A star or COLUMNS(…) names its columns by the
					// table's: an alias would name them all alike.
					found = castFloats(&list[i], named) || found
					continue
				}
				single, err := json.Marshal(map[string]any{"error": false, "statements": []any{map[string]any{
					"named_param_map": []any{},
					"node": map[string]any{"type": "SELECT_NODE", "modifiers": []any{}, "cte_map": map[string]any{"map": []any{}},
						"select_list": []any{item}, "from_table": map[string]any{"type": "EMPTY", "alias": "", "sample": nil},
						"where_clause": nil, "group_expressions": []any{}, "group_sets": []any{},
						"aggregate_handling": "STANDARD_HANDLING", "having": nil, "sample": nil, "qualify": nil}}}})
				if err != nil || !castFloats(&list[i], named) {
					continue
				}
				found = true
				*named = append(*named, unaliased{list[i].(map[string]any), single})
			}
		}
		for k, child := range x {
			if isSelect && k == "select_list" {
				continue // cast above
			}
			if castFloats(&child, named) {
				x[k], found = child, true
			}
		}
		if x["class"] != "CONSTANT" || x["type"] != "VALUE_CONSTANT" {
			return found
		}
		val, _ := x["value"].(map[string]any)
		typ, _ := val["type"].(map[string]any)
		if id := typ["id"]; (id != "DOUBLE" && id != "FLOAT") || val["is_null"] == true {
			return found
		}
		// The constant cast is its digits as a string: as a number they
		// read as a DECIMAL, whose cast rounds twice (0.9381259166408439
		// came one ulp off) and has no -0.0. One that is not finite
		// (1e400) is its word as decodeParse read it, Infinity, which
		// DuckDB casts back to the same double.
		var digits string
		switch v := val["value"].(type) {
		case json.Number:
			digits = v.String()
		case string:
			if !slices.Contains(nonFiniteWords, v) {
				return found
			}
			digits = v
		default:
			return found
		}
		child := map[string]any{"class": "CONSTANT", "type": "VALUE_CONSTANT", "alias": "",
			"query_location": x["query_location"],
			"value":          map[string]any{"type": map[string]any{"id": "VARCHAR", "type_info": nil}, "is_null": false, "value": digits}}
		*v = map[string]any{"class": "CAST", "type": "OPERATOR_CAST", "alias": x["alias"],
			"query_location": x["query_location"], "child": child,
			"cast_type": map[string]any{"id": typ["id"], "type_info": nil}, "try_cast": false}
		return true
	}
	return found
}

// holdsStar says whether the parsed expression v holds a star or
// COLUMNS(…), which stands for columns by their own names. A subquery's
// stars stand for its own columns: not looked into.
func holdsStar(v any) bool {
	switch x := v.(type) {
	case []any:
		return slices.ContainsFunc(x, holdsStar)
	case map[string]any:
		switch x["class"] {
		case "STAR":
			return true
		case "SUBQUERY":
			return false
		}
		for _, child := range x {
			if holdsStar(child) {
				return true
			}
		}
	}
	return false
}
