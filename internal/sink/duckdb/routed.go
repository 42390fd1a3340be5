package duckdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// routesColumns are the registry of routed tables (<table>_routes): one
// row per changelog table, written in the transaction that creates it,
// so verify finds every table that holds rows of the ledger's records.
// model_table names the table its model merges into (merge's
// ChangelogMerger writes it in the transaction that creates the model),
// null until then: the read path keeps both tables the operator's.
var routesColumns = []Column{
	{"log_table", "VARCHAR"}, {"source_database", "VARCHAR"}, {"source_schema", "VARCHAR"},
	{"source_table", "VARCHAR"}, {"first_seen", "TIMESTAMP"}, {"model_table", "VARCHAR"},
	// source_server was added later (ensureGrown): null in a registry row
	// of a release before it, "" where the changes name no server; the
	// servers joined by commas, grown by the loads that bring one more.
	{"source_server", "VARCHAR"},
	// model_named is the model the templates named for the table when it
	// was created (later too; null in a row of a release before it):
	// its changes belong to that model, also when a restart with new
	// templates finds it not merged yet (model_table still null).
	{"model_named", "VARCHAR"},
}

// RoutesReached ends the name of the table of what loads reached per
// routed table and partition (tables.reached), after sink.table: the
// offset past its last row, the source times of its first and last
// changes (cdc_source_time), and when a load last added to it.
const RoutesReached = "_routes_reached"

// ReachedPastLoad is how far past the time it loaded a last source time
// of <table>_routes_reached may be and still be how far its partition
// reached: further is no clock's skew but a time misread (a Maxwell DDL
// message's ts, in milliseconds, was read as seconds before 2026-12-07:
// the year 50000), which counted as the partition having reached now at
// every round, and so marked each hour done while its changes were still
// to load. Such a time is the partition's progress unknown (done marks
// wait) until the next load's changes replace it; kept as the greatest,
// it stayed for good.
const ReachedPastLoad = 24 * time.Hour

// reachedColumns are the columns of <table>_routes_reached.
var reachedColumns = []Column{{"log_table", "VARCHAR"}, {"topic", "VARCHAR"}, {"partition", "INTEGER"}, {"next_offset", "BIGINT"},
	{"first_source_time", "TIMESTAMP"}, {"last_source_time", "TIMESTAMP"}, {"loaded_at", "TIMESTAMP"}}

// RoutesSchemaTopics ends the name of the table of the topics that
// carried a Debezium server's schema change messages (its DROP TABLE and
// DROP DATABASE), after sink.table: one row per server and topic,
// written by the load of the first such message of the pair (in its
// transaction), so that the done marks know a schema change topic by what
// it carries, whatever its name (merge.MarkReady).
const RoutesSchemaTopics = "_routes_schema_topics"

// schemaTopicsColumns are the columns of <table>_routes_schema_topics.
var schemaTopicsColumns = []Column{{"server", "VARCHAR"}, {"topic", "VARCHAR"}, {"first_seen", "TIMESTAMP"}}

// insertSchemaTopics records the schema change topics of a load plan
// that the table does not hold yet: a load of schema change messages
// (few: a source's DDL) adds one statement.
func (s *Sink) insertSchemaTopics(ctx context.Context, tx *sql.Tx, topics []sink.SchemaTopic, now time.Time) error {
	values := make([]string, 0, len(topics))
	for _, t := range topics {
		values = append(values, fmt.Sprintf("(%s, %s)", sqltext.String(t.Server), sqltext.String(t.Topic)))
	}
	q := fmt.Sprintf(`INSERT INTO %[1]s (server, topic, first_seen) SELECT DISTINCT v.server, v.topic, $1::TIMESTAMP FROM (VALUES %[2]s) v(server, topic)
	WHERE NOT EXISTS (SELECT 1 FROM %[1]s t WHERE t.server = v.server AND t.topic = v.topic)`, s.tables.schemaTopics, strings.Join(values, ", "))
	if _, err := tx.ExecContext(ctx, q, now); err != nil {
		return fmt.Errorf("register the schema change topics %v: %w", topics, err)
	}
	return nil
}

// ColumnType implements sink.Router: a Decimal of known precision is
// DECIMAL(p,s); of unknown precision (Debezium's VariableScaleDecimal, an
// inferred number) its exact text, VARCHAR: no DECIMAL holds every such
// value without rounding.
func (s *Sink) ColumnType(c sink.Column) string {
	if c.Type == schema.Decimal {
		if c.KnownDecimal() {
			return fmt.Sprintf("DECIMAL(%d,%d)", c.Precision, c.Scale)
		}
		return "VARCHAR"
	}
	return typeNames[c.Type]
}

// Widenable implements sink.Router: DuckDB changes no column's type in a
// table with an index ("Cannot change the type of this column: an index
// depends on it", even with the index dropped in the same transaction) or
// with a primary key, unique or foreign key constraint (which it cannot
// drop at all), which an operator may have made on a changelog table or
// its model (or the model's tombstones); a change that would widen one is
// refused with the reason, so that neither its load fails at every retry
// nor the model's merges.
func (s *Sink) Widenable(table string) error {
	schemaName, _ := splitTable(s.opt.Table)
	rows, err := s.db.Query(fmt.Sprintf(`WITH t AS (SELECT $2 AS name UNION ALL SELECT model_table FROM %[1]s WHERE log_table = $2
	UNION ALL SELECT model_table || '%[2]s' FROM %[1]s WHERE log_table = $2)
SELECT table_name || '.' || index_name FROM duckdb_indexes() WHERE schema_name = $1 AND table_name IN (SELECT name FROM t)
UNION ALL SELECT table_name || '(' || constraint_type || ')' FROM duckdb_constraints()
	WHERE schema_name = $1 AND table_name IN (SELECT name FROM t) AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY')
ORDER BY ALL`, s.tables.routes, cdc.TombstonesSuffix), schemaName, table)
	if err != nil {
		return fmt.Errorf("%w: the indexes of %s and its model could not be read: %w", sink.ErrTransient, table, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return fmt.Errorf("%w: the indexes of %s and its model could not be read: %w", sink.ErrTransient, table, err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: the indexes of %s and its model could not be read: %w", sink.ErrTransient, table, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("DuckDB changes no column type of a table with an index or a key constraint, and there are %s (an index can be dropped; the changes dead-lettered meanwhile stay in the dead-letter table)", strings.Join(names, ", "))
	}
	return nil
}

// ColumnOf implements sink.Router.
func (s *Sink) ColumnOf(typ string) (sink.Column, bool) { return logicalOf(typ) }

// logicalOf is the logical type of a routed column of DuckDB type typ,
// as ColumnType names them and the catalog gives them back (VARCHAR as
// text: a String's or a decimal's, sink.Router.ColumnOf); false for a
// type ColumnType does not make.
func logicalOf(typ string) (sink.Column, bool) {
	if typ == "VARCHAR" {
		return sink.Column{Type: schema.Decimal}, true
	}
	for t, name := range typeNames {
		if name == typ && t != schema.Decimal {
			return sink.Column{Type: t}, true
		}
	}
	var c sink.Column
	if _, err := fmt.Sscanf(typ, "DECIMAL(%d,%d)", &c.Precision, &c.Scale); err != nil || typ != fmt.Sprintf("DECIMAL(%d,%d)", c.Precision, c.Scale) {
		return sink.Column{}, false
	}
	c.Type = schema.Decimal
	return c, c.KnownDecimal()
}

// RoutedColumns implements sink.Router.
func (s *Sink) RoutedColumns(table string) map[string]string {
	s.routedMu.RLock()
	defer s.routedMu.RUnlock()
	return maps.Clone(s.routed[table]) // nil map clones to nil
}

// RoutesTable is the registry of routed tables' name (unquoted), ""
// without Options.Routed.
func (s *Sink) RoutesTable() string {
	if !s.opt.Routed {
		return ""
	}
	return s.opt.Table + "_routes"
}

// RoutedSources implements sink.Router.
func (s *Sink) RoutedSources() map[string]sink.SourceTable {
	s.routedMu.RLock()
	defer s.routedMu.RUnlock()
	return maps.Clone(s.routedSources)
}

// readRouted fills the cache of routed tables and their columns from the
// registry and the catalog, in one query: loads then look nothing up.
func (s *Sink) readRouted(ctx context.Context) error {
	routed, err := s.routedColumnsOf(ctx, s.db, "")
	if err != nil {
		return err
	}
	sources, err := s.readRoutes(ctx)
	if err != nil {
		return err
	}
	defaults, err := s.readRoutedDefaults(ctx, s.db)
	if err != nil {
		return err
	}
	s.routedMu.Lock()
	s.routed, s.routedSources, s.routedDefaults = routed, sources, defaults
	s.routedMu.Unlock()
	return nil
}

// RoutedDefaulted returns the columns of routed table that have a default
// (pipeline's defaultsRouter): a null of such a column is written as one,
// even after the source dropped its default, as a row without the column
// reads the default.
func (s *Sink) RoutedDefaulted(table string) []string {
	s.routedMu.RLock()
	defer s.routedMu.RUnlock()
	return slices.Sorted(maps.Keys(s.routedDefaults[table]))
}

// keepDefault records the default def (SQL) given to column of routed
// table by the load in progress: the cache's once it commits.
func (s *Sink) keepDefault(table, column, def string) {
	if s.routedDefaultsAdded[table] == nil {
		s.routedDefaultsAdded[table] = map[string]string{}
	}
	s.routedDefaultsAdded[table][column] = def
}

// routedColumnsOf reads the columns and types of the registered routed
// tables (only table's, unless ""), as the cache holds them, from the
// catalog read by q: a registered table that is gone has none.
func (s *Sink) routedColumnsOf(ctx context.Context, q Querier, table string) (map[string]map[string]string, error) {
	schemaName, _ := splitTable(s.opt.Table)
	only := ""
	args := []any{schemaName}
	if table != "" {
		only, args = " AND r.log_table = ?", append(args, table)
	}
	rows, err := q.QueryContext(ctx, fmt.Sprintf(`SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
		JOIN %s r ON c.table_name = r.log_table WHERE c.table_schema = ?%s ORDER BY c.table_name, c.ordinal_position`, s.tables.routes, only), args...)
	if err != nil {
		return nil, fmt.Errorf("read the routed tables of %s: %w", s.tables.routes, err)
	}
	defer rows.Close()
	routed := map[string]map[string]string{}
	for rows.Next() {
		var table, name, typ string
		if err := rows.Scan(&table, &name, &typ); err != nil {
			return nil, fmt.Errorf("read the routed tables of %s: %w", s.tables.routes, err)
		}
		if routed[table] == nil {
			routed[table] = map[string]string{}
		}
		routed[table][name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the routed tables of %s: %w", s.tables.routes, err)
	}
	return routed, nil
}

// freshRouted reads the cache of routed tables again from the registry
// and the catalog when a transaction that could have changed them
// reported an error (routedStale): a move reads the landed rows with the
// cached columns and types, and a load creates, adds and widens from
// them, so a cache that missed what a committed load did would keep the
// rows that load landed from moving (until a later load happened to
// bring the same columns again), and the next load of a table it created
// would create it again and fail at every retry. Called with loadMu held.
func (s *Sink) freshRouted(ctx context.Context) error {
	if !s.routedStale {
		return nil
	}
	if err := s.readRouted(ctx); err != nil {
		return fmt.Errorf("read the routed tables again after a transaction that failed: %w", err)
	}
	s.routedStale = false
	return nil
}

// readRoutes reads the registry: each routed table's source table and
// its model's name.
func (s *Sink) readRoutes(ctx context.Context) (map[string]sink.SourceTable, error) {
	rows, err := s.db.QueryContext(ctx, fmt.Sprintf(`SELECT log_table, source_database, source_schema, source_table, coalesce(source_server, ''), coalesce(model_table, model_named, '') FROM %s`, s.tables.routes))
	if err != nil {
		return nil, fmt.Errorf("read the registry %s: %w", s.tables.routes, err)
	}
	defer rows.Close()
	sources := map[string]sink.SourceTable{}
	for rows.Next() {
		var table string
		var src sink.SourceTable
		if err := rows.Scan(&table, &src.Database, &src.Schema, &src.Name, &src.Server, &src.Model); err != nil {
			return nil, fmt.Errorf("read the registry %s: %w", s.tables.routes, err)
		}
		sources[table] = src
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the registry %s: %w", s.tables.routes, err)
	}
	return sources, nil
}

// routedName is a routed table's name, in the schema of the main table.
func (s *Sink) routedName(table string) string {
	if schemaName, _, ok := strings.Cut(s.opt.Table, "."); ok {
		return sqltext.Name(schemaName + "." + table)
	}
	return sqltext.Name(table)
}

// routedGroup is one routed table's files in a load plan.
type routedGroup struct {
	table   string
	source  sink.SourceTable
	columns []sink.Column // the source's columns of every file, first seen first
	// defaults are the source's column defaults of every file
	// (sink.TableRows.Defaults), an earlier file's first: the default of
	// the ADD COLUMN, not one set later (ALTER COLUMN … SET DEFAULT).
	defaults map[string]string
}

// groupRouted groups the plan's routed files by table, in the order the
// tables first appear, with their columns' types joined.
func groupRouted(files []sink.RoutedFile) []routedGroup {
	var out []routedGroup
	at := map[string]int{}
	for _, f := range files {
		i, ok := at[f.Table]
		if !ok {
			i = len(out)
			at[f.Table] = i
			out = append(out, routedGroup{table: f.Table, source: f.Source})
		}
		g := &out[i]
		// A later batch's table may name a server more (the servers of a
		// table grow in a process): the group records them all.
		g.source.Server = joinServers(g.source.Server, f.Source.Server)
		for name, v := range f.Defaults {
			if g.defaults == nil {
				g.defaults = map[string]string{}
			}
			if _, ok := g.defaults[name]; !ok {
				g.defaults[name] = v
			}
		}
		for _, c := range f.Columns {
			j := slices.IndexFunc(g.columns, func(h sink.Column) bool { return h.Name == c.Name })
			if j < 0 {
				g.columns = append(g.columns, c)
				continue
			}
			// The files' types of a column join as a batch's rows' do
			// (TableRows.AddColumn): every file is read with the one type.
			if t, ok := sink.Join(g.columns[j], c); ok {
				g.columns[j] = t
			}
		}
	}
	return out
}

// insertRouted creates each routed table of the plan or adds the columns
// it lacks (looking at the catalog only then), registers a created table,
// and lands its rows (see Landing), fenced as the main table's. What it
// creates or adds is recorded in s.routedAdded, for the cache once the
// load commits.
func (s *Sink) insertRouted(ctx context.Context, tx *sql.Tx, p loadPlan, now time.Time) error {
	for _, g := range groupRouted(p.routed) {
		if err := s.ensureRouted(ctx, tx, g, s.routedColumns(g.columns), now); err != nil {
			return err
		}
	}
	return s.insertLanding(ctx, tx, p)
}

// routedColumns are a changelog table's columns: the source's, the
// changelog's own, the coordinates.
func (s *Sink) routedColumns(source []sink.Column) []readColumn {
	out := make([]readColumn, 0, len(source)+len(cdc.LogColumns)+len(schema.Coordinates))
	for _, c := range source {
		out = append(out, readColumn{Name: c.Name, Logical: c.Type, Type: s.ColumnType(c)})
	}
	for _, c := range append(cdc.LogColumns, schema.Coordinates...) {
		out = append(out, readColumn{Name: c.Name, Logical: c.Type, Type: typeNames[c.Type]})
	}
	return out
}

// ensureRouted creates g's table with columns, or adds those it lacks
// and widens those whose type does not hold g's (sink.Join: the table's
// type and the rows', which the decoder admitted as one holding the
// other or as parts of one type). The cache (known before this load, or
// created or grown by an earlier plan of it) says which; the catalog is
// read only to add a column.
func (s *Sink) ensureRouted(ctx context.Context, tx *sql.Tx, g routedGroup, columns []readColumn, now time.Time) error {
	known := s.routedAdded[g.table]
	if known == nil {
		s.routedMu.RLock()
		known = s.routed[g.table]
		_, registered := s.routedSources[g.table]
		s.routedMu.RUnlock()
		if known == nil && registered {
			// Registered, and not in the cache: its table was gone when
			// this process read the catalog (dropped by hand before a
			// restart). Taken for a new table, it was created again and
			// registered a second time, and verify counted each of its
			// rows twice. It is taken as it is now: still gone, its
			// changes land and wait for it, as before the restart; there
			// again, with its columns.
			again, err := s.routedColumnsOf(ctx, tx, g.table)
			if err != nil {
				return fmt.Errorf("changelog table %s: %w", g.table, err)
			}
			if known = again[g.table]; known == nil {
				s.log.Warn("a changelog table is gone: its changes stay in the landing table until it is there again", "table", g.table)
				return nil
			}
			s.routedAdded[g.table] = known // cached once the load commits
		}
	}
	if known != nil {
		if err := s.growServers(ctx, tx, g); err != nil {
			return err
		}
	}
	want := make([]Column, len(columns))
	missing := known == nil
	var widen []Column
	for i, c := range columns {
		want[i] = Column{c.Name, c.Type}
		have, ok := known[c.Name]
		switch {
		case !ok:
			missing = true
		case have != c.Type && i < len(g.columns):
			to, err := s.widerType(g.table, c.Name, have, g.columns[i])
			if err != nil {
				return err
			}
			want[i].Type = to
			if to != have {
				widen = append(widen, want[i])
			}
		}
	}
	if !missing && len(widen) == 0 {
		return nil
	}
	name := s.routedName(g.table)
	switch {
	case known == nil:
		defs := make([]string, len(want))
		for i, c := range want {
			defs[i] = sqltext.Ident(c.Name) + " " + c.Type
			if v, ok := g.defaults[c.Name]; ok {
				def, _, err := defaultLiteral(ctx, tx, columns[i], v, c.Type)
				if err != nil {
					return fmt.Errorf("create changelog table %s: %w", g.table, err)
				}
				defs[i] += " DEFAULT " + def
				s.keepDefault(g.table, c.Name, def)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", name, strings.Join(defs, ", "))); err != nil {
			return fmt.Errorf("create changelog table %s: %w", g.table, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (log_table, source_database, source_schema, source_table, source_server, model_named, first_seen) VALUES (?, ?, ?, ?, ?, NULLIF(?, ''), ?)", s.tables.routes),
			g.table, g.source.Database, g.source.Schema, g.source.Name, g.source.Server, g.source.Model, now); err != nil {
			return fmt.Errorf("register changelog table %s: %w", g.table, err)
		}
		s.routedCreated[g.table] = g.source
		s.log.Info("created a changelog table", "table", g.table, "source_database", g.source.Database, "source_table", g.source.Name)
	default:
		if cols, err := TableColumns(ctx, tx, unquotedRouted(s.opt.Table, g.table)); err != nil {
			return fmt.Errorf("changelog table %s: %w", g.table, err)
		} else if len(cols) == 0 {
			// Dropped by hand since it was created. Growing it would fail
			// the load of every table, at each retry; its changes land,
			// and their move fails for this table alone, which holds back
			// its own model and is reported, as when it lacks a column
			// they hold. Not cached: looked at again by the next load.
			s.log.Warn("a changelog table is gone: its changes stay in the landing table until it is there again", "table", g.table)
			return nil
		}
		if err := alterTypes(ctx, tx, name, widen); err != nil {
			return fmt.Errorf("changelog table %s: %w", g.table, err)
		}
		if len(widen) > 0 {
			s.log.Info("widened source columns of a changelog table", "table", g.table, "columns", names(widen))
		}
		if missing {
			added, err := AddColumns(ctx, tx, unquotedRouted(s.opt.Table, g.table), want)
			if err != nil {
				return fmt.Errorf("changelog table %s: %w", g.table, err)
			}
			if err := s.fillDefaults(ctx, tx, g.table, name, added, columns, g.defaults); err != nil {
				return fmt.Errorf("changelog table %s: %w", g.table, err)
			}
			s.log.Info("added source columns to a changelog table", "table", g.table, "columns", names(added))
		}
	}
	grown := maps.Clone(known)
	if grown == nil {
		grown = map[string]string{}
	}
	for _, c := range want {
		grown[c.Name] = c.Type
	}
	s.routedAdded[g.table] = grown
	return nil
}

// fillDefaults gives each column of added (just added to table, quoted)
// that has a default in defaults (sink.TableRows.Defaults; columns are
// the table's, to read it by) that default, and fills the rows the table
// has with it: they are changes from before the source added the
// column, and the source's rows took the default then. After every ADD
// COLUMN of the transaction: DuckDB (1.5.6) fails the commit of a
// transaction that adds a column to a table after it has written a
// column's values or set a default that is not a bare literal ("another
// transaction has altered this table").
func (s *Sink) fillDefaults(ctx context.Context, tx *sql.Tx, routed, table string, added []Column, columns []readColumn, defaults map[string]string) error {
	var sets []string
	for _, c := range added {
		v, ok := defaults[c.Name]
		i := slices.IndexFunc(columns, func(r readColumn) bool { return r.Name == c.Name })
		if !ok || i < 0 {
			continue
		}
		def, expr, err := defaultLiteral(ctx, tx, readColumn{Name: c.Name, Logical: columns[i].Logical, Type: c.Type}, v, c.Type)
		if err != nil {
			return err
		}
		// An expression given by ALTER fails the replay of the log: out
		// of it as soon as the load commits.
		s.checkpointAfterCommit = s.checkpointAfterCommit || expr
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s", table, sqltext.Ident(c.Name), def)); err != nil {
			return fmt.Errorf("give column %s its default: %w", c.Name, err)
		}
		s.keepDefault(routed, c.Name, def)
		sets = append(sets, sqltext.Ident(c.Name)+" = "+def)
	}
	if len(sets) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET %s", table, strings.Join(sets, ", "))); err != nil {
		return fmt.Errorf("fill the rows before the added columns with their defaults: %w", err)
	}
	return nil
}

// defaultSQL is the SQL of a column's default v, a value as a staged row
// holds it (sink.TableRows.Defaults), read as the move reads a landed
// row's value of c (distributeSQL), so that a row without the column
// reads what one holding v would.
func defaultSQL(c readColumn, v string) string {
	c.Infinite = true
	typ, _ := c.read("")
	shape, _ := json.Marshal(map[string]string{"d": typ}) // a map of strings: never fails
	_, expr := c.read(fmt.Sprintf("(json_transform(%s, %s).d)", sqltext.String(`{"d":`+v+`}`), sqltext.String(string(shape))))
	return "(" + expr + ")"
}

// defaultLiteral is defaultSQL(c, v) evaluated in tx, as a constant of
// the column's type typ: CAST('…' AS typ), or NULL. A column's default is
// bound again when DuckDB (1.5.6) replays its write-ahead log after a
// crash, with no default database set, and a function in one given by
// ALTER TABLE (json_transform, make_timestamp, any) fails that replay
// ("Failure while replaying WAL file … no default database set"): after
// a kill -9 between an ALTER COLUMN … SET DEFAULT and the next checkpoint
// the database no longer opened. A cast of a constant binds there (a
// CREATE TABLE's function defaults replay too). Text holding a NUL has no
// constant DuckDB's parser takes (it ends the literal; E” and U&” are
// not implemented): that default stays the expression (expr true), and a
// table given it by ALTER is checkpointed once its load commits.
func defaultLiteral(ctx context.Context, tx *sql.Tx, c readColumn, v, typ string) (def string, expr bool, err error) {
	var text sql.NullString
	if err := tx.QueryRowContext(ctx, "SELECT CAST("+defaultSQL(c, v)+" AS VARCHAR)").Scan(&text); err != nil {
		return "", false, fmt.Errorf("read the default %s of column %s: %w", v, c.Name, err)
	}
	switch {
	case !text.Valid:
		return "NULL", false, nil
	case strings.ContainsRune(text.String, 0):
		return defaultSQL(c, v), true, nil
	}
	return "CAST(" + sqltext.String(text.String) + " AS " + typ + ")", false, nil
}

// widerType is the type a column of table of type have takes to hold
// the rows' type c too: have when it holds c, else the Join of both.
func (s *Sink) widerType(table, column, have string, c sink.Column) (string, error) {
	h, ok := logicalOf(have)
	if !ok {
		return "", fmt.Errorf("changelog table %s has column %s as %s, a type tracelake does not make", table, column, have)
	}
	to, ok := sink.Join(h, c)
	if !ok {
		return "", fmt.Errorf("changelog table %s has column %s as %s, and rows of this load have it as %s: no type holds both", table, column, have, s.ColumnType(c))
	}
	return s.ColumnType(to), nil
}

// alterTypes changes each column of cols in table (quoted) to its type.
// DuckDB casts the stored values (ALTER TABLE … ALTER COLUMN … TYPE);
// callers widen only to a type that holds them exactly (sink.Holds).
func alterTypes(ctx context.Context, db DB, table string, cols []Column) error {
	for _, c := range cols {
		if _, err := db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s TYPE %s", table, sqltext.Ident(c.Name), c.Type)); err != nil {
			return fmt.Errorf("widen column %s to %s (DuckDB changes no column type of a table with an index or a key constraint): %w", c.Name, c.Type, err)
		}
	}
	return nil
}

// GrowColumns brings a changelog model's table (unquoted, as
// TableColumns takes it), whose columns are have, up to want, its
// changelog table's: each column whose type want's holds
// (sink.Column.Holds) is widened to it, as the changelog table was, and
// the columns it lacks are added (AddColumns, which refuses any other
// difference of type).
func GrowColumns(ctx context.Context, db DB, table string, have, want []Column) error {
	types := make(map[string]string, len(have))
	for _, c := range have {
		types[c.Name] = c.Type
	}
	var widen []Column
	for _, c := range want {
		if t, ok := types[c.Name]; ok && t != c.Type && holds(c.Type, t) {
			widen = append(widen, c)
		}
	}
	if err := alterTypes(ctx, db, sqltext.Name(table), widen); err != nil {
		return err
	}
	have = slices.Clone(have)
	for i, c := range have {
		if j := slices.IndexFunc(widen, func(w Column) bool { return w.Name == c.Name }); j >= 0 {
			have[i].Type = widen[j].Type
		}
	}
	_, err := addMissing(ctx, db, table, have, want)
	return err
}

// holds compares two routed column types in DuckDB's words
// (sink.Column.Holds).
func holds(have, want string) bool {
	h, ok := logicalOf(have)
	w, wok := logicalOf(want)
	return ok && wok && h.Holds(w)
}

// hasLanding says whether the landing table exists, looked up in the
// catalog by q (a statement that fails would abort q's transaction).
func (s *Sink) hasLanding(ctx context.Context, q Querier) (bool, error) {
	schemaName, name := splitTable(s.opt.Table + Landing)
	rows, err := q.QueryContext(ctx, `SELECT 1 FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?`, schemaName, name)
	if err != nil {
		return false, fmt.Errorf("look for %s: %w", s.tables.landing, err)
	}
	defer rows.Close()
	found := rows.Next()
	return found, rows.Err()
}

// growServers adds to the registry's source_server of g's table, an
// existing one, the Debezium servers of g's changes it lacks: a restarted
// decoder takes the table's changes as those servers' (cdc.Registered),
// and one left out would have its DROP TABLE taken for another server's
// table of that name, the model kept whole. A table whose servers the
// registry does not know ("": made by a release before source_server, or
// from changes that named none) stays so, every server's drop its own.
// Per load and table, a map look-up and a string compare unless a server
// was added.
func (s *Sink) growServers(ctx context.Context, tx *sql.Tx, g routedGroup) error {
	src, ok := s.routedCreated[g.table]
	if !ok {
		s.routedMu.RLock()
		src, ok = s.routedSources[g.table]
		s.routedMu.RUnlock()
	}
	if !ok || src.Server == "" || g.source.Server == "" || src.Server == g.source.Server {
		return nil
	}
	grown := joinServers(src.Server, g.source.Server)
	if grown == src.Server {
		return nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("UPDATE %s SET source_server = ? WHERE log_table = ?", s.tables.routes), grown, g.table); err != nil {
		return fmt.Errorf("register the servers of changelog table %s: %w", g.table, err)
	}
	src.Server = grown
	s.routedCreated[g.table] = src // the cache's once the load commits
	return nil
}

// joinServers is a's servers (joined by commas, as cdc.Table.Server
// gives them) followed by those of b it lacks.
func joinServers(a, b string) string {
	if a == b || b == "" {
		return a
	}
	if a == "" {
		return b
	}
	have := strings.Split(a, ",")
	out := a
	for _, srv := range strings.Split(b, ",") {
		if !slices.Contains(have, srv) {
			have = append(have, srv)
			out += "," + srv
		}
	}
	return out
}

// unquotedRouted is a routed table's name as TableColumns takes it.
func unquotedRouted(main, table string) string {
	if schemaName, _, ok := strings.Cut(main, "."); ok {
		return schemaName + "." + table
	}
	return table
}

// RoutedRows is the SQL of every routed table's coordinates, one
// relation (for verify: each row of a record routed anywhere), from the
// registry, and of the rows still landed (see Landing): a row is in one
// of the two. The registry is read by q, the transaction whose snapshot
// then reads the relation: a table a load created and a move filled
// before that snapshot holds rows of its ledger.
func (s *Sink) RoutedRows(ctx context.Context, q Querier) (string, error) {
	parts := []string{`SELECT NULL::VARCHAR AS ktopic, NULL::INTEGER AS kpartition, NULL::BIGINT AS koffset, NULL::INTEGER AS kindex WHERE false`}
	// A database of a release before the landing table has none (verify
	// opens it without Prepare). Looked up in the catalog, not read: a
	// statement that fails aborts q's transaction.
	landing, err := s.hasLanding(ctx, q)
	if err != nil {
		return "", err
	}
	if landing {
		parts = append(parts, fmt.Sprintf("SELECT %s FROM %s", landedCoordinates, s.tables.landing))
	}
	rows, err := q.QueryContext(ctx, fmt.Sprintf(`SELECT log_table FROM %s ORDER BY log_table`, s.tables.routes))
	if err != nil {
		return "", fmt.Errorf("list the routed tables of %s: %w", s.tables.routes, err)
	}
	defer rows.Close()
	for rows.Next() {
		var table string
		if err := rows.Scan(&table); err != nil {
			return "", fmt.Errorf("list the routed tables of %s: %w", s.tables.routes, err)
		}
		parts = append(parts, "SELECT ktopic, kpartition, koffset, kindex FROM "+s.routedName(table))
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("list the routed tables of %s: %w", s.tables.routes, err)
	}
	return "(" + strings.Join(parts, " UNION ALL ") + ")", nil
}
