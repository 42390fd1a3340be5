package duckdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// userColumn is a column of the user's table in transform mode.
type userColumn struct {
	name, typ string
	def       string // column default expression, "" for none (NULL)
	notNull   bool
	generated bool // GENERATED ALWAYS AS: DuckDB computes it, no insert may name it
}

const transformReadColumns = `columns = {topic: 'VARCHAR', "partition": 'INTEGER', "offset": 'BIGINT', "key": 'VARCHAR', headers: 'JSON', create_time: 'VARCHAR', "value": 'VARCHAR'}`

// maxErrorLookups bounds how many rejected values per load get DuckDB's own
// error text; the rest get tracelake's description of the same failure.
const maxErrorLookups = 1000

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// userTableSQLQuery is the CREATE statement of the user's table: DuckDB
// rewrites it on every ALTER, so a load compares it with what the sink read
// to see a changed table (one catalog lookup per load).
const userTableSQLQuery = `SELECT sql FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?`

// readUserTable reads the user's table: its columns and constraints, as q
// (the load's transaction, or the database) sees them.
func (s *Sink) readUserTable(ctx context.Context, q querier) error {
	schema, name := splitTable(s.opt.Table)
	var text string
	rows, err := q.QueryContext(ctx, userTableSQLQuery, schema, name)
	if err != nil {
		return fmt.Errorf("read table %s: %w", s.opt.Table, err)
	}
	for rows.Next() {
		if err := rows.Scan(&text); err != nil {
			rows.Close()
			return fmt.Errorf("read table %s: %w", s.opt.Table, err)
		}
	}
	rows.Close()
	cols, err := s.readUserColumns(ctx, q)
	if err != nil {
		return err
	}
	s.userColumns = cols
	if s.userKeys, s.userChecks, s.userFKs, err = s.readUserConstraints(ctx, q); err != nil {
		return err
	}
	s.userTableSQL = text
	return nil
}

// refreshUserTable reads the user's table again, in the load's transaction
// tx, if it changed since it was read: a column added while tracelake runs
// is filled from the next load on.
func (s *Sink) refreshUserTable(ctx context.Context, tx *sql.Tx) error {
	schema, name := splitTable(s.opt.Table)
	var text string
	if err := tx.QueryRowContext(ctx, userTableSQLQuery, schema, name).Scan(&text); err != nil {
		return fmt.Errorf("read table %s: %w", s.opt.Table, err)
	}
	if text == s.userTableSQL {
		return nil
	}
	s.log.Info("the table changed: reading its columns and constraints again", "table", s.opt.Table)
	return s.readUserTable(ctx, tx)
}

func (s *Sink) readUserColumns(ctx context.Context, q querier) ([]userColumn, error) {
	schema, name := splitTable(s.opt.Table)
	rows, err := q.QueryContext(ctx, `SELECT column_name, data_type, coalesce(column_default, ''), is_nullable = 'NO'
		FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`, schema, name)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", s.opt.Table, err)
	}
	defer rows.Close()
	var cols []userColumn
	for rows.Next() {
		var c userColumn
		if err := rows.Scan(&c.name, &c.typ, &c.def, &c.notNull); err != nil {
			return nil, fmt.Errorf("read columns of %s: %w", s.opt.Table, err)
		}
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s does not exist: transform mode loads into an existing table; create it first", s.opt.Table)
	}
	for i, c := range cols {
		// Neither information_schema nor duckdb_columns() says a column is
		// generated (its expression is its column_default): ask the binder,
		// with an insert of no rows. It runs on the database, never in a
		// load's transaction, which a failed statement would abort.
		if c.def == "" {
			continue
		}
		_, err := s.db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT NULL WHERE false", s.tables.main, sqltext.Ident(c.name)))
		cols[i].generated = err != nil && strings.Contains(err.Error(), "generated column")
	}
	return cols, nil
}

// userKey is a primary key or unique constraint of the user's table.
type userKey struct {
	kind    string // PRIMARY KEY or UNIQUE
	columns []int  // indexes into userColumns
}

// userCheck is a CHECK constraint of the user's table.
type userCheck struct {
	expr    string // DuckDB's text of the expression, over column names
	columns []int
}

// userForeignKey is a FOREIGN KEY of the user's table.
type userForeignKey struct {
	columns    []int
	refTable   string // quoted, in the table's schema
	refColumns []string
	text       string // DuckDB's text of the constraint
}

// readUserConstraints reads the constraints a row can violate, so that
// loads send violating rows to the dead-letter table instead of failing.
func (s *Sink) readUserConstraints(ctx context.Context, q querier) ([]userKey, []userCheck, []userForeignKey, error) {
	schema, name := splitTable(s.opt.Table)
	rows, err := q.QueryContext(ctx, `SELECT constraint_type, coalesce(expression, ''), constraint_text,
			to_json(constraint_column_names)::VARCHAR, coalesce(referenced_table, ''), to_json(coalesce(referenced_column_names, []))::VARCHAR
		FROM duckdb_constraints() WHERE schema_name = ? AND table_name = ?
			AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'CHECK', 'FOREIGN KEY')`, schema, name)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read constraints of %s: %w", s.opt.Table, err)
	}
	defer rows.Close()
	var (
		keys   []userKey
		checks []userCheck
		fks    []userForeignKey
	)
	for rows.Next() {
		var kind, expr, text, colList, refTable, refList string
		var names, refNames []string
		if err := rows.Scan(&kind, &expr, &text, &colList, &refTable, &refList); err != nil {
			return nil, nil, nil, fmt.Errorf("read constraints of %s: %w", s.opt.Table, err)
		}
		if err := errors.Join(json.Unmarshal([]byte(colList), &names), json.Unmarshal([]byte(refList), &refNames)); err != nil {
			return nil, nil, nil, fmt.Errorf("read constraints of %s: %w", s.opt.Table, err)
		}
		var cols []int
		for _, n := range names {
			i := slices.IndexFunc(s.userColumns, func(c userColumn) bool { return c.name == n })
			if i < 0 {
				return nil, nil, nil, fmt.Errorf("BUG: constraint column %s of %s not among its columns", n, s.opt.Table)
			}
			cols = append(cols, i)
		}
		switch kind {
		case "CHECK":
			checks = append(checks, userCheck{expr: expr, columns: cols})
		case "FOREIGN KEY":
			fks = append(fks, userForeignKey{columns: cols, refTable: sqltext.Ident(schema) + "." + sqltext.Ident(refTable),
				refColumns: refNames, text: text})
		default:
			keys = append(keys, userKey{kind: kind, columns: cols})
		}
	}
	return keys, checks, fks, rows.Err()
}

// jsonPath is the JSON path of a top-level field, quoted for any name.
func jsonPath(name string) string {
	return sqltext.String(`$."` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`)
}

// nested reports whether the column takes the field as JSON (JSON, lists,
// structs and maps cast from JSON directly) rather than as text (so a JSON
// string "abc" casts as abc).
func (c userColumn) nested() bool {
	for _, p := range []string{"STRUCT(", "MAP(", "UNION("} {
		if strings.HasPrefix(c.typ, p) {
			return true
		}
	}
	return c.typ == "JSON" || strings.HasSuffix(c.typ, "]")
}

// source is the field's value in the object j, as DuckDB should cast it.
func (c userColumn) source(j string) string {
	if c.nested() {
		return "json_extract(" + j + ", " + jsonPath(c.name) + ")"
	}
	return "json_extract_string(" + j + ", " + jsonPath(c.name) + ")"
}

// present is true when the object has the field with a non-null value.
func (c userColumn) present() string {
	return fmt.Sprintf("coalesce(json_type(j, %s) <> 'NULL', false)", jsonPath(c.name))
}

// value is the column's value: the cast field, or the column default when
// the field is missing. A field that is present but cannot be cast is NULL
// here and marked bad by badCast.
func (c userColumn) value() string {
	def := "NULL"
	if c.def != "" {
		def = c.def
	}
	return fmt.Sprintf("CASE WHEN json_exists(j, %s) THEN %s ELSE %s END",
		jsonPath(c.name), sqltext.TryCast(c.source("j"), c.typ), def)
}

// givenTwice is true when the object (its keys lowercased, tl_keys; a
// row with a key twice, tl_twice) has the column's field more than once,
// in any case: DuckDB's JSON reader takes the first value, Databend's
// COPY, which matches fields to columns in any case, the last, so the
// object is refused on both sinks rather than stored otherwise on each.
func (c userColumn) givenTwice() string {
	return fmt.Sprintf("(tl_twice AND len(list_filter(tl_keys, lambda k: k = lower(%s))) > 1)", sqltext.String(c.name))
}

// badCast is true when the field is present and its cast, v (the column's
// value), failed: NULL, or for a list, struct or map an element NULL that
// is not null in the field (TRY_CAST nulls only the element).
func (c userColumn) badCast(v string) string {
	lost := ""
	if sqltext.Nested(c.typ) {
		lost = " OR " + sqltext.NestedCastLost(v, c.source("j"), c.typ)
	}
	return fmt.Sprintf("(%s AND (%s IS NULL%s))", c.present(), v, lost)
}

// fractionLost is true when the field is present and its cast, v, rounded
// a fraction away (an integer column given 1.5 would hold 2, another value
// than was sent, and could collide with a real 2's key; likewise an
// integer element of a list, struct or map); "" for a column without an
// integer type or element. A decimal rounds to its declared scale, as
// a merge's columns do (sqltext.FractionLost).
func (c userColumn) fractionLost(v string) string {
	lost := sqltext.FractionLost(c.source("j"), c.typ, "regexp_matches")
	if sqltext.Nested(c.typ) {
		// An integer element of a list, struct or map.
		lost = sqltext.NestedFractionLost(v, c.source("j"), c.typ)
	}
	if lost == "" {
		return ""
	}
	return fmt.Sprintf("(%s AND %s IS NOT NULL AND %s)", c.present(), v, lost)
}

// overflowed is true when the field is a number past the column's
// floating type and its cast, v, is infinite (sqltext.InfinityLost); and
// Databend's COPY, whose JSON parser refuses 1e400, dead-letters it.
func (c userColumn) overflowed(v string) string {
	return sqltext.InfinityLost(c.source("j"), v, c.typ, "regexp_matches")
}

// indexed is the column of the table alias t as its unique index compares
// it: DuckDB's index compares text as bytes whatever the column's collation
// (a NOCASE key holds "a" and "A"), while = would compare it under the
// collation and find a duplicate the index has not. COLLATE C is the
// byte-wise comparison; information_schema names a collated text column
// VARCHAR.
func (c userColumn) indexed(t string) string {
	ref := t + "." + sqltext.Ident(c.name)
	if strings.EqualFold(c.typ, "VARCHAR") {
		return ref + " COLLATE C"
	}
	return ref
}

// insertTransformed maps each staged JSON object onto the user's table by
// field name, inside the load transaction. Objects with a field that cannot
// be cast to its column, or without a value for a NOT NULL column, go to the
// dead-letter table with DuckDB's error; the rest are inserted. It returns
// the rows inserted per partition.
func (s *Sink) insertTransformed(ctx context.Context, tx *sql.Tx, p loadPlan, now time.Time) (map[sink.TopicPartition]int64, error) {
	if err := s.refreshUserTable(ctx, tx); err != nil {
		return nil, err
	}
	cols := s.userColumns
	ref := func(i int) string { return sqltext.Ident(fmt.Sprintf("c%d", i)) }
	var vals, casts, nulls, names, refs []string
	casts = append(casts, fmt.Sprintf("CASE WHEN j IS NULL THEN %d END", notJSON))
	for i, c := range cols {
		if c.generated {
			// Not a field to fill: DuckDB computes it on insert.
			vals = append(vals, "NULL AS "+ref(i))
			continue
		}
		vals = append(vals, c.value()+" AS "+ref(i))
		casts = append(casts, fmt.Sprintf("CASE WHEN %s THEN %d END", c.givenTwice(), twiceBase-i))
		casts = append(casts, fmt.Sprintf("CASE WHEN %s THEN %d END", c.badCast(ref(i)), i))
		if lost := c.fractionLost(ref(i)); lost != "" {
			casts = append(casts, fmt.Sprintf("CASE WHEN %s THEN %d END", lost, roundBase-i))
		}
		if over := c.overflowed(ref(i)); over != "" {
			casts = append(casts, fmt.Sprintf("CASE WHEN %s THEN %d END", over, overflowBase-i))
		}
		if c.notNull {
			nulls = append(nulls, fmt.Sprintf("CASE WHEN %s IS NULL THEN %d END", ref(i), -i-1))
		}
		names = append(names, sqltext.Ident(c.name))
		refs = append(refs, ref(i))
	}
	// Row-local reasons, decided per object alone: a key already in the
	// table, a failing CHECK, a foreign key without its row. A key earlier
	// in this load is decided after them (acceptRows): only an object
	// actually inserted holds its keys.
	var uniques []string
	for k, key := range s.userKeys {
		var notNull, match []string
		for _, i := range key.columns {
			notNull = append(notNull, ref(i)+" IS NOT NULL")
			match = append(match, fmt.Sprintf("%s = pre.%s", cols[i].indexed("t"), ref(i)))
		}
		uniques = append(uniques, fmt.Sprintf(`CASE WHEN len(tl_pre) = 0 AND %s AND EXISTS (SELECT 1 FROM %s t WHERE %s) THEN %d END`,
			strings.Join(notNull, " AND "), s.tables.main, strings.Join(match, " AND "), uniqueBase-k))
	}
	for k, c := range s.userChecks {
		// The expression is DuckDB's, over column names: evaluate it in a
		// subquery that names this row's values (NULL passes, as in SQL).
		// They are unioned under the table's own (empty) columns, so they
		// take the columns' types and collations: DuckDB evaluates a CHECK
		// on a COLLATE NOCASE column under NOCASE.
		// DuckDB lists a column once per mention in the expression; BY
		// NAME takes each name once.
		var named, columns []string
		for _, i := range c.columns {
			if col := sqltext.Ident(cols[i].name); !slices.Contains(columns, col) {
				columns = append(columns, col)
				named = append(named, "pre."+ref(i)+" AS "+col)
			}
		}
		uniques = append(uniques, fmt.Sprintf("CASE WHEN len(tl_pre) = 0 AND NOT coalesce((SELECT %s FROM (SELECT %s FROM %s WHERE false UNION ALL BY NAME SELECT %s) tl_check), true) THEN %d END",
			c.expr, strings.Join(columns, ", "), s.tables.main, strings.Join(named, ", "), checkBase-k))
	}
	for k, fk := range s.userFKs {
		var notNull, match []string
		for j, i := range fk.columns {
			notNull = append(notNull, "pre."+ref(i)+" IS NOT NULL")
			// The referenced column has the key column's type; DuckDB looks
			// it up in its index, byte for byte whatever its collation.
			refCol := userColumn{name: fk.refColumns[j], typ: cols[i].typ}
			match = append(match, fmt.Sprintf("%s = pre.%s", refCol.indexed("r"), ref(i)))
		}
		uniques = append(uniques, fmt.Sprintf("CASE WHEN len(tl_pre) = 0 AND %s AND NOT EXISTS (SELECT 1 FROM %s r WHERE %s) THEN %d END",
			strings.Join(notNull, " AND "), fk.refTable, strings.Join(match, " AND "), fkBase-k))
	}
	// Stage table: every object with its coordinates, its column values and
	// in tl_bad the reasons it cannot be inserted (see rejectReason): a
	// field that does not cast, a NOT NULL column without a value, a key
	// that exists in the table, a CHECK that fails, a foreign key without
	// its referenced row; tl_ins is false for those, and acceptRows decides
	// the others.
	stage := fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tracelake_transform AS
		WITH src AS (SELECT *, TRY_CAST("value" AS JSON) AS j FROM %s%s),
		keyed AS (SELECT *, list_transform(json_keys(j), lambda k: lower(k)) AS tl_keys FROM src),
		valued AS (SELECT topic, "partition", "offset", "key", headers, create_time, "value", j, tl_keys,
			len(tl_keys) <> len(list_distinct(tl_keys)) AS tl_twice, %s FROM keyed),
		casted AS (SELECT * EXCLUDE (j, tl_keys, tl_twice), [%s] AS tl_cast FROM valued),
		pre AS (SELECT *, list_filter(tl_cast || [%s], lambda x: x IS NOT NULL) AS tl_pre FROM casted),
		bad AS (SELECT *, tl_pre || list_filter([%s], lambda x: x IS NOT NULL) AS tl_bad FROM pre)
		SELECT *, CASE WHEN len(tl_bad) > 0 THEN false END::BOOLEAN AS tl_ins FROM bad`,
		readNDJSON(p.rowFiles, transformReadColumns, p.maxLine), where(p.dlqFilter),
		strings.Join(vals, ", "), strings.Join(casts, ", "), strings.Join(nulls, ", "), strings.Join(uniques, ", "))
	if _, err := tx.ExecContext(ctx, stage); err != nil {
		return nil, fmt.Errorf("map objects onto %s: %w", s.opt.Table, err)
	}
	defer tx.ExecContext(ctx, `DROP TABLE IF EXISTS tracelake_transform`) //nolint:errcheck // temp table, gone with the connection anyway

	if err := s.acceptRows(ctx, tx); err != nil {
		return nil, err
	}
	q := fmt.Sprintf(`INSERT INTO %s (%s) SELECT %s FROM tracelake_transform WHERE tl_ins`,
		s.tables.main, strings.Join(names, ", "), strings.Join(refs, ", "))
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return nil, fmt.Errorf("insert into %s: %w", s.opt.Table, err)
	}
	if err := s.rejectTransformed(ctx, tx, now); err != nil {
		return nil, err
	}

	rows, err := tx.QueryContext(ctx, `SELECT topic, "partition", count(*) FROM tracelake_transform WHERE tl_ins GROUP BY ALL`)
	if err != nil {
		return nil, fmt.Errorf("count inserted rows: %w", err)
	}
	defer rows.Close()
	inserted := map[sink.TopicPartition]int64{}
	for rows.Next() {
		var tp sink.TopicPartition
		var n int64
		if err := rows.Scan(&tp.Topic, &tp.Partition, &n); err != nil {
			return nil, err
		}
		inserted[tp] = n
	}
	return inserted, rows.Err()
}

// acceptRows decides which objects of the stage table that passed their
// own checks (tl_ins NULL) are inserted, as inserting them one at a time in
// (partition, offset) order would: an object is refused for a key an
// object inserted before it holds. With several keys this is a chain (an
// object refused for one key frees its other keys for later objects), so it
// goes in rounds: accept each undecided object that is the first undecided
// one of each of its keys, then refuse the undecided objects that share a
// key with an accepted one. Each round accepts at least the earliest
// undecided object; a load without duplicate keys takes one round.
func (s *Sink) acceptRows(ctx context.Context, tx *sql.Tx) error {
	ref := func(i int) string { return sqltext.Ident(fmt.Sprintf("c%d", i)) }
	var first []string
	for _, key := range s.userKeys {
		var null, part []string
		for _, i := range key.columns {
			null = append(null, ref(i)+" IS NULL")
			part = append(part, ref(i))
		}
		// A key with a NULL column conflicts with nothing.
		first = append(first, fmt.Sprintf(`(%s OR row_number() OVER (PARTITION BY %s ORDER BY "partition", "offset", topic) = 1)`,
			strings.Join(null, " OR "), strings.Join(part, ", ")))
	}
	if len(first) == 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE tracelake_transform SET tl_ins = true WHERE tl_ins IS NULL`); err != nil {
			return fmt.Errorf("decide the rows to insert into %s: %w", s.opt.Table, err)
		}
		return nil
	}
	accept := fmt.Sprintf(`UPDATE tracelake_transform AS t SET tl_ins = true FROM (
			SELECT topic, "partition", "offset" FROM tracelake_transform WHERE tl_ins IS NULL QUALIFY %s
		) AS f WHERE t.topic = f.topic AND t."partition" = f."partition" AND t."offset" = f."offset"`, strings.Join(first, " AND "))
	for {
		if _, err := tx.ExecContext(ctx, accept); err != nil {
			return fmt.Errorf("decide the rows to insert into %s: %w", s.opt.Table, err)
		}
		var undecided int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tracelake_transform WHERE tl_ins IS NULL`).Scan(&undecided); err != nil {
			return fmt.Errorf("decide the rows to insert into %s: %w", s.opt.Table, err)
		}
		if undecided == 0 {
			return nil
		}
		for k, key := range s.userKeys {
			var match []string
			for _, i := range key.columns {
				match = append(match, fmt.Sprintf("a.%s = t.%s", ref(i), ref(i)))
			}
			q := fmt.Sprintf(`UPDATE tracelake_transform AS t SET tl_ins = false, tl_bad = [%d] WHERE tl_ins IS NULL
				AND EXISTS (SELECT 1 FROM tracelake_transform a WHERE a.tl_ins AND %s)`, uniqueBase-k, strings.Join(match, " AND "))
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("decide the rows to insert into %s: %w", s.opt.Table, err)
			}
		}
	}
}

// Codes in tl_bad besides a column index (bad cast) and -index-1 (NOT NULL):
// notJSON marks a value DuckDB's JSON parser rejects although tracelake's
// validator accepted it; uniqueBase-k a key that violates the table's k-th
// primary key or unique constraint; checkBase-k a row failing its k-th
// CHECK; fkBase-k a row whose k-th foreign key references no row;
// roundBase-i a fraction that the cast to integer column i rounded away;
// twiceBase-i column i's field given twice in the object; overflowBase-i
// a number past floating column i's range, cast to infinity.
const (
	notJSON    = -1 << 30
	uniqueBase = -1 << 20
	checkBase  = -2 << 20
	fkBase     = -3 << 20
	roundBase  = -4 << 20
	twiceBase  = -5 << 20
	// overflowBase is below twiceBase: rejectReason tests it first.
	overflowBase = -6 << 20
)

// rejectTransformed writes the rejected objects to the dead-letter table
// (stage load) with DuckDB's error for the first bad column.
func (s *Sink) rejectTransformed(ctx context.Context, tx *sql.Tx, now time.Time) error {
	rows, err := tx.QueryContext(ctx, `SELECT topic, "partition", "offset", "key", "value", headers::VARCHAR, create_time, tl_bad[1]
		FROM tracelake_transform WHERE NOT tl_ins`)
	if err != nil {
		return fmt.Errorf("read rejected rows: %w", err)
	}
	type reject struct {
		topic     string
		partition int32
		offset    int64
		key       sql.NullString
		value     string
		headers   sql.NullString // the record's (envelope.AppendTransformRow)
		created   sql.NullString
		reason    string
	}
	var rejects []reject
	lookups := 0
	for rows.Next() {
		var r reject
		var bad int
		if err := rows.Scan(&r.topic, &r.partition, &r.offset, &r.key, &r.value, &r.headers, &r.created, &bad); err != nil {
			rows.Close()
			return fmt.Errorf("read rejected rows: %w", err)
		}
		r.reason = s.rejectReason(ctx, r.value, bad, &lookups)
		rejects = append(rejects, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rejected rows: %w", err)
	}
	if len(rejects) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, fmt.Sprintf(`INSERT INTO %s %s VALUES ($1, $2, $3, from_base64($4), encode($5), $6, $7, $8, $9::JSON, TRY_CAST($10::VARCHAR AS TIMESTAMP))`,
		s.tables.dlq, dlqInsertColumns))
	if err != nil {
		return fmt.Errorf("prepare dead-letter insert: %w", err)
	}
	defer stmt.Close()
	for _, r := range rejects {
		if _, err := stmt.ExecContext(ctx, r.topic, r.partition, r.offset, r.key, r.value, r.reason, envelope.StageLoad, now, r.headers, r.created); err != nil {
			return fmt.Errorf("insert rejected row: %w", err)
		}
	}
	return nil
}

// rejectReason is DuckDB's error for the bad column of value: the failed
// cast, asked on a connection outside the load transaction (a failed
// statement would abort it), or the NOT NULL violation. Past maxErrorLookups
// per load, tracelake describes the failure itself.
func (s *Sink) rejectReason(ctx context.Context, value string, bad int, lookups *int) string {
	if bad == notJSON {
		return "DuckDB cannot parse the value as JSON"
	}
	if bad <= overflowBase {
		c := s.userColumns[overflowBase-bad]
		return fmt.Sprintf("column %s (%s): the number is past the column type's range, and the cast would store it as infinity", c.name, c.typ)
	}
	if bad <= twiceBase {
		c := s.userColumns[twiceBase-bad]
		return fmt.Sprintf("column %s (%s): the field %q is given twice (in any case): DuckDB's JSON reader takes its first value, Databend's COPY its last", c.name, c.typ, c.name)
	}
	if bad <= roundBase {
		c := s.userColumns[roundBase-bad]
		return fmt.Sprintf("column %s (%s): the field has a fraction, which the column cannot hold without rounding", c.name, c.typ)
	}
	if bad <= fkBase {
		return fmt.Sprintf("Constraint Error: violates foreign key constraint of %s: %s (no such referenced row)", s.opt.Table, s.userFKs[fkBase-bad].text)
	}
	if bad <= checkBase {
		return fmt.Sprintf("Constraint Error: CHECK constraint failed on %s: %s", s.opt.Table, s.userChecks[checkBase-bad].expr)
	}
	if bad <= uniqueBase {
		key := s.userKeys[uniqueBase-bad]
		names := make([]string, len(key.columns))
		for i, c := range key.columns {
			names[i] = s.userColumns[c].name
		}
		return fmt.Sprintf("Constraint Error: duplicate key (%s) violates %s constraint of %s (already in the table or earlier in this load)",
			strings.Join(names, ", "), key.kind, s.opt.Table)
	}
	if bad < 0 {
		c := s.userColumns[-bad-1]
		return fmt.Sprintf("Constraint Error: NOT NULL constraint failed: %s.%s (field missing or null, no default)", s.opt.Table, c.name)
	}
	c := s.userColumns[bad]
	reason := fmt.Sprintf("column %s (%s): the field cannot be cast to the column type", c.name, c.typ)
	if *lookups < maxErrorLookups {
		*lookups++
		var out sql.NullString
		q := "SELECT CAST(" + c.source("$1::JSON") + " AS " + c.typ + ")::VARCHAR"
		if err := s.db.QueryRowContext(ctx, q, value).Scan(&out); err != nil {
			reason = fmt.Sprintf("column %s (%s): %v", c.name, c.typ, firstLine(err.Error()))
		}
	}
	return reason
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
