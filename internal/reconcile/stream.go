package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// Table is one side of a comparison across two databases: a table read in
// the order of its key, each row hashed in Go from its canonical values.
type Table struct {
	// Name is how the report names the side.
	Name string
	DB   Querier
	// From is the table as the database's SQL names it, quoted.
	From string
	// Quote quotes a column name in the database's SQL.
	Quote func(string) string
	// Batch is the number of rows one query reads: the table is read in
	// key ranges (WHERE key > the last key read ORDER BY key LIMIT Batch),
	// each its own short statement, so no transaction or cursor stays open
	// on the database between batches. 0 reads the table in one ordered
	// query (for the local DuckDB model table).
	Batch int
	// Rate caps the rows read per second (0: no cap), to spare a busy
	// database.
	Rate float64
	// Types are declared column types that override the driver's
	// DatabaseTypeName for the canonical form (MariaDB's JSON).
	Types map[string]string
	// UnsignedAsText passes a key bound past int64 as its text, for a
	// driver that refuses such a uint64 (DuckDB's, through database/sql's
	// default converter); the database reads the text as the column's type.
	UnsignedAsText bool
	// NullsFirst orders by key NULLS FIRST, as compare() does, for a
	// database that puts NULL last by default (DuckDB). MySQL puts NULL
	// first and does not take the clause.
	NullsFirst bool
}

// StreamSpec says what to compare across two databases.
type StreamSpec struct {
	Left, Right Table
	Key         []string // key columns, the order both tables are read in
	Columns     []string // compared columns (hashed), in both tables
	Examples    int      // keys that differ to show (default 10)
	// Recheck is how many differing keys are read again from both sides
	// once the scan is done (default 1000, negative for none): rows that
	// changed while the scan ran agree again and are not counted.
	Recheck int
}

// row is one row read: its key and the hash of its compared columns.
type row struct {
	key  []value
	hash uint64
}

// CompareStreams compares two tables that live in different databases by
// count, sum of row hashes and a merge join by key, reading both in key
// order. The rows are read while they may change: each batch sees the
// table at its own moment, so counts and sums describe no single moment of
// a table that changed during the scan. The keys found different are then
// read again from both sides; those that agree now changed during the
// scan (Settled) and are not counted as differences.
func CompareStreams(ctx context.Context, spec StreamSpec) (*Report, error) {
	if len(spec.Key) == 0 || len(spec.Columns) == 0 {
		return nil, fmt.Errorf("reconcile %s with %s: key and columns are required", spec.Left.Name, spec.Right.Name)
	}
	if spec.Examples == 0 {
		spec.Examples = 10
	}
	if spec.Recheck == 0 {
		spec.Recheck = 1000
	}
	r := &Report{Left: spec.Left.Name, Right: spec.Right.Name, Columns: spec.Columns}
	if err := numbersInText(ctx, &spec); err != nil {
		return nil, err
	}
	l := newScanner(spec.Left, spec.Key, spec.Columns)
	rt := newScanner(spec.Right, spec.Key, spec.Columns)
	var diffs []diff
	keep := max(spec.Examples, spec.Recheck)
	note := func(k []value, p problem) {
		p.count(r, 1)
		if len(diffs) < keep {
			diffs = append(diffs, diff{key: k, problem: p})
		}
	}
	lr, lok, err := l.next(ctx)
	if err != nil {
		return nil, err
	}
	rr, rok, err := rt.next(ctx)
	if err != nil {
		return nil, err
	}
	if lok && rok {
		if err := sameKinds(spec, lr.key, rr.key); err != nil {
			return nil, err
		}
	}
	for lok || rok {
		c := 0
		switch {
		case !rok:
			c = -1
		case !lok:
			c = 1
		default:
			c = compareKeys(lr.key, rr.key)
		}
		switch {
		case c < 0:
			note(lr.key, onlyLeft)
		case c > 0:
			note(rr.key, onlyRight)
		case lr.hash != rr.hash:
			note(lr.key, valuesDiffer)
		}
		if c <= 0 {
			if lr, lok, err = l.next(ctx); err != nil {
				return nil, err
			}
		}
		if c >= 0 {
			if rr, rok, err = rt.next(ctx); err != nil {
				return nil, err
			}
		}
	}
	r.LeftRows, r.RightRows = l.rows, rt.rows
	r.LeftSum, r.RightSum = fmt.Sprintf("%016x", l.sum), fmt.Sprintf("%016x", rt.sum)
	r.DupLeft, r.DupRight = l.dups, rt.dups

	if spec.Recheck > 0 && len(diffs) > 0 {
		n := min(len(diffs), spec.Recheck)
		if err := recheck(ctx, spec, r, diffs[:n]); err != nil {
			return nil, err
		}
	}
	for _, d := range diffs {
		if len(r.Examples) == spec.Examples {
			break
		}
		if d.problem != settled {
			r.Examples = append(r.Examples, Example{Key: keyText(d.key), Problem: d.problem.text(r)})
		}
	}
	r.Equal = r.OnlyLeft+r.OnlyRight+r.Differ+r.DupLeft+r.DupRight == 0
	return r, nil
}

// numbersInText reads the compared columns' types on both sides and
// reads a text column as numberInText where the other side's is numeric:
// change capture keeps a source's number it could not type (a decimal
// sent as a string without its schema) as text, and its "10.50" is the
// source's DECIMAL 10.50. Key columns are left as they are: a text key is
// sorted as text, and cannot be joined to a numeric one (sameKinds).
func numbersInText(ctx context.Context, spec *StreamSpec) error {
	lt, err := columnTypes(ctx, spec.Left, spec.Columns)
	if err != nil {
		return err
	}
	rt, err := columnTypes(ctx, spec.Right, spec.Columns)
	if err != nil {
		return err
	}
	for i, c := range spec.Columns {
		switch {
		case slices.Contains(spec.Key, c):
		case isNumericType(lt[i]) && isTextType(rt[i]):
			spec.Right.Types = withType(spec.Right.Types, c, numberInText)
		case isTextType(lt[i]) && isNumericType(rt[i]):
			spec.Left.Types = withType(spec.Left.Types, c, numberInText)
		// Change capture holds a source DATE as a TIMESTAMP at its
		// midnight, and a TIME (MySQL's spans ±838 hours, which no
		// time-of-day type holds) as its BIGINT of µs: read as the
		// other side's type, or every row with one differed.
		case baseType(lt[i]) == "DATE" && isTimestampType(rt[i]):
			spec.Right.Types = withType(spec.Right.Types, c, dateInTimestamp)
		case isTimestampType(lt[i]) && baseType(rt[i]) == "DATE":
			spec.Left.Types = withType(spec.Left.Types, c, dateInTimestamp)
		case baseType(lt[i]) == "TIME" && isIntegerType(rt[i]):
			spec.Right.Types = withType(spec.Right.Types, c, timeInMicros)
		case isIntegerType(lt[i]) && baseType(rt[i]) == "TIME":
			spec.Left.Types = withType(spec.Left.Types, c, timeInMicros)
		}
	}
	return nil
}

// isTimestampType tells a timestamp without a zone by its type name
// (MySQL's DATETIME, DuckDB's TIMESTAMP).
func isTimestampType(t string) bool {
	switch baseType(t) {
	case "TIMESTAMP", "DATETIME":
		return true
	}
	return false
}

// isIntegerType tells an integer column by its type name.
func isIntegerType(t string) bool {
	switch baseType(t) {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT":
		return true
	}
	return false
}

// columnTypes is the type of each of cols in t (its declared Types
// first, else the driver's DatabaseTypeName), read without a row.
func columnTypes(ctx context.Context, t Table, cols []string) ([]string, error) {
	q := fmt.Sprintf("SELECT %s FROM %s LIMIT 0", strings.Join(mapStrings(cols, t.Quote), ", "), t.From)
	rows, err := t.DB.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("read the column types of %s: %w", t.Name, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, fmt.Errorf("read the column types of %s: %w", t.Name, err)
	}
	return t.typeNames(cts, cols), rows.Err()
}

// typeNames are the types of the columns names of a result (cts): the
// declared Types first, else the driver's DatabaseTypeName.
func (t Table) typeNames(cts []*sql.ColumnType, names []string) []string {
	types := make([]string, len(cts))
	for i, ct := range cts {
		types[i] = ct.DatabaseTypeName()
		if d, ok := t.Types[names[i]]; ok {
			types[i] = d
		}
	}
	return types
}

// withType is types (a copy: the caller's map is left alone) with col's
// type set to typ.
func withType(types map[string]string, col, typ string) map[string]string {
	out := maps.Clone(types)
	if out == nil {
		out = map[string]string{}
	}
	out[col] = typ
	return out
}

// baseType is a type name without its width and sign: "DECIMAL(10,2)" and
// "UNSIGNED INT" are DECIMAL and INT.
func baseType(t string) string {
	t, _, _ = strings.Cut(strings.ToUpper(t), "(")
	return strings.TrimSpace(strings.TrimPrefix(t, "UNSIGNED "))
}

// isNumericType tells a numeric column by its type name, as MySQL's and
// DuckDB's drivers name them.
func isNumericType(t string) bool {
	switch baseType(t) {
	case "DECIMAL", "NUMERIC", "DOUBLE", "FLOAT", "REAL", "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER", "BIGINT",
		"HUGEINT", "UHUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT":
		return true
	}
	return false
}

// isTextType tells a text column by its type name (not a binary one:
// bytes are compared as they are).
func isTextType(t string) bool {
	switch baseType(t) {
	case "VARCHAR", "CHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT":
		return true
	}
	return false
}

// sameKinds checks that the key columns are numbers on both sides or text
// on both: numbers order as numbers, text byte by byte, so a mixed key
// would come in two orders that cannot be joined.
func sameKinds(spec StreamSpec, l, r []value) error {
	for i, c := range spec.Key {
		if l[i].kind != r[i].kind && l[i].kind != kindNull && r[i].kind != kindNull {
			return fmt.Errorf("key column %s does not come in one order on both sides: %s in %s, %s in %s",
				c, l[i].kind, spec.Left.Name, r[i].kind, spec.Right.Name)
		}
	}
	return nil
}

// problem is how a key differs.
type problem uint8

const (
	settled problem = iota // differed during the scan, agrees on a second read
	onlyLeft
	onlyRight
	valuesDiffer
)

// count adds n keys with this problem to the report's counters.
func (p problem) count(r *Report, n int64) {
	switch p {
	case onlyLeft:
		r.OnlyLeft += n
	case onlyRight:
		r.OnlyRight += n
	case valuesDiffer:
		r.Differ += n
	case settled:
		r.Settled += n
	}
}

func (p problem) text(r *Report) string {
	switch p {
	case onlyLeft:
		return "missing in " + r.Right
	case onlyRight:
		return "missing in " + r.Left
	}
	return "values differ"
}

type diff struct {
	key     []value
	problem problem
}

// recheck reads the keys of diffs again from both sides and replaces each
// one's problem by what it is now.
func recheck(ctx context.Context, spec StreamSpec, r *Report, diffs []diff) error {
	keys := make([][]value, len(diffs))
	for i, d := range diffs {
		keys[i] = d.key
	}
	left, err := newScanner(spec.Left, spec.Key, spec.Columns).byKeys(ctx, keys)
	if err != nil {
		return err
	}
	right, err := newScanner(spec.Right, spec.Key, spec.Columns).byKeys(ctx, keys)
	if err != nil {
		return err
	}
	r.Rechecked = int64(len(diffs))
	for i := range diffs {
		d := &diffs[i]
		k := keyText(d.key)
		lh, inLeft := left[k]
		rh, inRight := right[k]
		now := settled
		switch {
		case inLeft && !inRight:
			now = onlyLeft
		case inRight && !inLeft:
			now = onlyRight
		case inLeft && inRight && lh != rh:
			now = valuesDiffer
		}
		d.problem.count(r, -1)
		now.count(r, 1)
		d.problem = now
	}
	return nil
}

// scanner reads a table in key order, batch by batch, and keeps its count
// and sum of row hashes.
type scanner struct {
	t          Table
	key, cols  []string
	batch      []row
	lastArgs   []value // the key of the last row read, where the next batch starts
	done       bool
	rows, dups int64
	sum        uint64
	prev       []value
	began      time.Time
	buf        []byte
}

func newScanner(t Table, key, cols []string) *scanner {
	return &scanner{t: t, key: key, cols: cols}
}

// selectList is the key columns, then the compared ones.
func (s *scanner) selectList() string {
	names := make([]string, 0, len(s.key)+len(s.cols))
	for _, c := range append(append([]string{}, s.key...), s.cols...) {
		names = append(names, s.t.Quote(c))
	}
	return strings.Join(names, ", ")
}

func (s *scanner) orderBy() string {
	return strings.Join(mapStrings(s.key, func(c string) string {
		if s.t.NullsFirst {
			return s.t.Quote(c) + " NULLS FIRST"
		}
		return s.t.Quote(c)
	}), ", ")
}

// after is the condition "key > k" over the key columns, expanded
// (k1 > ? OR k1 = ? AND k2 > ? …) so that MySQL's range optimizer uses the
// primary key for it.
func (s *scanner) after(k []value) (string, []any) {
	var ors []string
	var args []any
	for i := range s.key {
		var ands []string
		for j := 0; j < i; j++ {
			ands = append(ands, s.t.Quote(s.key[j])+" = ?")
			args = append(args, s.arg(k[j]))
		}
		ands = append(ands, s.t.Quote(s.key[i])+" > ?")
		args = append(args, s.arg(k[i]))
		ors = append(ors, "("+strings.Join(ands, " AND ")+")")
	}
	return strings.Join(ors, " OR "), args
}

// arg is the bound to pass to the table's database for v.
func (s *scanner) arg(v value) any {
	if u, ok := v.bound.(uint64); ok && s.t.UnsignedAsText {
		return strconv.FormatUint(u, 10)
	}
	return v.arg()
}

// next returns the next row in key order; false at the end.
func (s *scanner) next(ctx context.Context) (row, bool, error) {
	if len(s.batch) == 0 && !s.done {
		if err := s.fill(ctx); err != nil {
			return row{}, false, err
		}
	}
	if len(s.batch) == 0 {
		return row{}, false, nil
	}
	r := s.batch[0]
	s.batch = s.batch[1:]
	s.rows++
	s.sum += r.hash // the sum wraps: a sum modulo 2^64
	if s.prev != nil {
		switch c := compareKeys(r.key, s.prev); {
		case c < 0:
			return row{}, false, outOfOrder(s.t.Name, s.key, r.key, s.prev)
		case c == 0:
			// The same key again: counted, hashed into the sum, not joined.
			s.dups++
			return s.next(ctx)
		}
	}
	s.prev = r.key
	return r, true, nil
}

// outOfOrder is the error for a key read after a greater one. For a text
// key it names the cause, a collation that does not order bytes as they
// are: MariaDB's and MySQL's _bin collations before utf8mb4_0900_bin are
// PAD SPACE (trailing spaces ignored, so 'a\t' sorts before 'a'), hence the
// advice of a NO PAD binary collation or VARBINARY.
func outOfOrder(table string, cols []string, k, prev []value) error {
	msg := fmt.Sprintf("%s does not come in key order: key (%s) after (%s)", table, keyText(k), keyText(prev))
	for i := range k {
		if k[i].compare(prev[i]) == 0 {
			continue
		}
		if k[i].kind == kindText && prev[i].kind == kindText {
			return fmt.Errorf("%s; the text key column %s is sorted by a collation that does not order bytes as they are, "+
				"so it cannot be compared: give it a NO PAD binary collation (utf8mb4_nopad_bin on MariaDB, utf8mb4_0900_bin on MySQL) "+
				"or make it VARBINARY (_bin collations are PAD SPACE: 'a\\t' sorts before 'a')", msg, cols[i])
		}
		return fmt.Errorf("%s in column %s", msg, cols[i])
	}
	return errors.New(msg)
}

// fill reads the next batch: the rows after the last key read.
func (s *scanner) fill(ctx context.Context) error {
	if s.t.Batch <= 0 {
		s.done = true // one query reads everything
		return s.read(ctx, fmt.Sprintf("SELECT %s FROM %s ORDER BY %s", s.selectList(), s.t.From, s.orderBy()), nil)
	}
	if err := s.pace(ctx); err != nil {
		return err
	}
	where, args := "", []any(nil)
	if s.lastArgs != nil {
		var cond string
		cond, args = s.after(s.lastArgs)
		where = " WHERE " + cond
	}
	q := fmt.Sprintf("SELECT %s FROM %s%s ORDER BY %s LIMIT %d", s.selectList(), s.t.From, where, s.orderBy(), s.t.Batch)
	if err := s.read(ctx, q, args); err != nil {
		return err
	}
	if len(s.batch) < s.t.Batch {
		s.done = true
	}
	if len(s.batch) > 0 {
		s.lastArgs = s.batch[len(s.batch)-1].key
	}
	return nil
}

// pace waits, before a batch, until the rows read so far are within the
// rate.
func (s *scanner) pace(ctx context.Context) error {
	if s.began.IsZero() {
		s.began = time.Now()
	}
	if s.t.Rate <= 0 {
		return nil
	}
	due := s.began.Add(time.Duration(float64(s.rows) / s.t.Rate * float64(time.Second)))
	wait := time.Until(due)
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read runs q and keeps its rows, whole, in s.batch: the statement ends
// before the rows are joined.
func (s *scanner) read(ctx context.Context, q string, args []any) error {
	rows, err := s.t.DB.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.t.Name, err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		return fmt.Errorf("read %s: %w", s.t.Name, err)
	}
	vals := make([]any, len(types))
	ptrs := make([]any, len(types))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	h := fnv.New64a()
	nk := len(s.key)
	names := append(append([]string{}, s.key...), s.cols...) // as selectList
	dbTypes := s.t.typeNames(types, names)
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read %s: %w", s.t.Name, err)
		}
		r := row{key: make([]value, nk)}
		s.buf = s.buf[:0]
		for i, v := range vals {
			cv, err := canonical(v, dbTypes[i])
			if err != nil {
				return fmt.Errorf("read %s, column %s: %w", s.t.Name, types[i].Name(), err)
			}
			if i < nk {
				r.key[i] = cv
			} else {
				s.buf = cv.appendHashed(s.buf)
			}
		}
		h.Reset()
		h.Write(s.buf)
		r.hash = h.Sum64()
		s.batch = append(s.batch, r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", s.t.Name, err)
	}
	return nil
}

// byKeys reads the rows of keys (a hundred per statement) and returns each
// one's hash by key text.
func (s *scanner) byKeys(ctx context.Context, keys [][]value) (map[string]uint64, error) {
	out := map[string]uint64{}
	const chunk = 100
	for len(keys) > 0 {
		n := min(chunk, len(keys))
		var ors []string
		var args []any
		for _, k := range keys[:n] {
			var ands []string
			for i, c := range s.key {
				if k[i].kind == kindNull {
					// "= NULL" matches nothing: the row would read as
					// gone from both sides, and its difference as settled.
					ands = append(ands, s.t.Quote(c)+" IS NULL")
					continue
				}
				ands = append(ands, s.t.Quote(c)+" = ?")
				args = append(args, s.arg(k[i]))
			}
			ors = append(ors, "("+strings.Join(ands, " AND ")+")")
		}
		keys = keys[n:]
		s.batch = s.batch[:0]
		q := fmt.Sprintf("SELECT %s FROM %s WHERE %s", s.selectList(), s.t.From, strings.Join(ors, " OR "))
		if err := s.read(ctx, q, args); err != nil {
			return nil, err
		}
		for _, r := range s.batch {
			out[keyText(r.key)] = r.hash
		}
	}
	return out, nil
}

// DuckDBTable is a DuckDB table as one side of CompareStreams, read in one
// ordered query (the file is local; a sort costs no other user anything).
func DuckDBTable(db Querier, table string) Table {
	return Table{Name: table, DB: db, From: sqltext.Name(table), Quote: sqltext.Ident, NullsFirst: true, UnsignedAsText: true}
}

// Columns are the columns of a DuckDB table.
func Columns(ctx context.Context, db Querier, table string) ([]string, error) {
	return columns(ctx, db, table)
}
