// Package reconcile compares two tables row by row without moving them:
// a hash of all compared columns per row, summed per table (equal sums and
// counts: the tables hold the same rows), then a join by key that counts
// rows missing on either side and rows whose values differ, with examples.
// The method is the one of seeds/004 ("sum hash of all columns, then join
// by primary key").
package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// Querier is a database or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Spec says what to compare.
type Spec struct {
	Left, Right string   // table names
	Key         []string // business key columns
	Columns     []string // compared columns; default every column both tables have
	Examples    int      // keys that differ to show (default 10)
}

// Report is the outcome. Equal is true when no row differs.
type Report struct {
	Left, Right         string
	Columns             []string
	LeftRows, RightRows int64
	LeftSum, RightSum   string // sum of row hashes
	OnlyLeft, OnlyRight int64  // keys missing on the other side
	Differ              int64  // keys on both sides with different values
	DupLeft, DupRight   int64  // Compare: rows of a key the side holds more than once; CompareStreams: copies after a key's first
	// Rechecked keys (CompareStreams) were found different by the scan and
	// read again from both sides; Settled of them agreed then: they changed
	// while the scan ran, and are not counted above.
	Rechecked, Settled int64 `json:",omitempty"`
	Examples           []Example
	Equal              bool
}

// Example is one key that differs.
type Example struct {
	Key, Problem string
}

// DiffRate is the share of rows that differ, of the larger table.
func (r *Report) DiffRate() float64 {
	n := max(r.LeftRows, r.RightRows)
	if n == 0 {
		return 0
	}
	return float64(r.OnlyLeft+r.OnlyRight+r.Differ+r.DupLeft+r.DupRight) / float64(n)
}

// Compare compares the tables of spec in q. On a database (not a
// transaction of the caller's) it reads them in one transaction of its
// own, rolled back: its queries (the columns, each side's fingerprint,
// the join, the examples) then read one moment of the database, where
// commits go on beside them (tracelake run's loads and merges, reconcile
// asked through run), and a commit between two of them would count its
// rows on one side only, and report tables equal at every moment as
// different.
func Compare(ctx context.Context, q Querier, spec Spec) (*Report, error) {
	if len(spec.Key) == 0 {
		return nil, fmt.Errorf("reconcile %s with %s: a key is required", spec.Left, spec.Right)
	}
	if db, ok := q.(*sql.DB); ok {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("reconcile %s with %s: begin a read: %w", spec.Left, spec.Right, err)
		}
		defer tx.Rollback() //nolint:errcheck // read only
		q = tx
	}
	if spec.Examples == 0 {
		spec.Examples = 10
	}
	cols := spec.Columns
	if len(cols) == 0 {
		var err error
		if cols, err = commonColumns(ctx, q, spec.Left, spec.Right); err != nil {
			return nil, err
		}
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("reconcile %s with %s: the tables have no column in common", spec.Left, spec.Right)
	}
	r := &Report{Left: spec.Left, Right: spec.Right, Columns: cols}
	l, rt := sqltext.Name(spec.Left), sqltext.Name(spec.Right)
	lHash, err := rowHash(ctx, q, spec.Left, cols)
	if err != nil {
		return nil, err
	}
	rHash, err := rowHash(ctx, q, spec.Right, cols)
	if err != nil {
		return nil, err
	}

	// Whole-table fingerprints.
	for _, side := range []struct {
		table, hash string
		rows        *int64
		sum         *string
	}{{l, lHash, &r.LeftRows, &r.LeftSum}, {rt, rHash, &r.RightRows, &r.RightSum}} {
		q1 := fmt.Sprintf("SELECT count(*), coalesce(sum(%s::HUGEINT), 0)::VARCHAR FROM %s", side.hash, side.table)
		if err := q.QueryRowContext(ctx, q1).Scan(side.rows, side.sum); err != nil {
			return nil, fmt.Errorf("fingerprint %s: %w", side.table, err)
		}
	}

	// Row by row, by key. IS NOT DISTINCT FROM: a NULL key (a key path
	// missing from an event) is a key like any other, matched to the other
	// side's NULL, as CompareStreams does.
	keys := quoteAll(spec.Key, "")
	match := strings.Join(mapStrings(spec.Key, func(k string) string {
		q := sqltext.Ident(k)
		return "l." + q + " IS NOT DISTINCT FROM r." + q
	}), " AND ")
	sides := fmt.Sprintf(`WITH l AS (SELECT %s, %s AS tl_hash, count(*) OVER (PARTITION BY %s) AS tl_n FROM %s),
r AS (SELECT %s, %s AS tl_hash, count(*) OVER (PARTITION BY %s) AS tl_n FROM %s),
j AS (SELECT %s, l.tl_hash AS lh, r.tl_hash AS rh, l.tl_n AS ln, r.tl_n AS rn FROM l FULL OUTER JOIN r ON %s)`,
		keys, lHash, keys, l, keys, rHash, keys, rt, keyExprs(spec.Key), match)
	// Duplicates are counted in each side's own rows: in the join a key's
	// copies on one side multiply the other side's.
	q2 := sides + `
SELECT count(*) FILTER (WHERE rh IS NULL AND rn IS NULL),
       count(*) FILTER (WHERE lh IS NULL AND ln IS NULL),
       count(*) FILTER (WHERE lh <> rh AND ln = 1 AND rn = 1),
       (SELECT count(*) FROM l WHERE tl_n > 1), (SELECT count(*) FROM r WHERE tl_n > 1)
FROM j`
	if err := q.QueryRowContext(ctx, q2).Scan(&r.OnlyLeft, &r.OnlyRight, &r.Differ, &r.DupLeft, &r.DupRight); err != nil {
		return nil, fmt.Errorf("join %s and %s by %s: %w", spec.Left, spec.Right, strings.Join(spec.Key, ", "), err)
	}
	// DISTINCT: a duplicated key is several rows of the join, one example.
	q3 := sides + fmt.Sprintf(`
SELECT DISTINCT concat_ws(', ', %s), CASE
    WHEN ln > 1 OR rn > 1 THEN 'key present more than once'
    WHEN rh IS NULL THEN %s
    WHEN lh IS NULL THEN %s
    ELSE 'values differ' END
FROM j WHERE lh IS DISTINCT FROM rh OR ln > 1 OR rn > 1
ORDER BY 1 LIMIT %d`, quoteAll(spec.Key, "tl_k_"), sqltext.String("missing in "+spec.Right), sqltext.String("missing in "+spec.Left), spec.Examples)
	rows, err := q.QueryContext(ctx, q3)
	if err != nil {
		return nil, fmt.Errorf("list differing keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e Example
		if err := rows.Scan(&e.Key, &e.Problem); err != nil {
			return nil, err
		}
		r.Examples = append(r.Examples, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	r.Equal = r.OnlyLeft+r.OnlyRight+r.Differ+r.DupLeft+r.DupRight == 0 && r.LeftSum == r.RightSum && r.LeftRows == r.RightRows
	return r, nil
}

// keyExprs names the joined key columns tl_k_<key>, from whichever side has
// the row, as text, NULL as "NULL" (concat_ws would drop it from the
// example key).
func keyExprs(keys []string) string {
	return strings.Join(mapStrings(keys, func(k string) string {
		q := sqltext.Ident(k)
		return fmt.Sprintf("CASE WHEN l.tl_n IS NOT NULL THEN coalesce(l.%s::VARCHAR, 'NULL') ELSE coalesce(r.%s::VARCHAR, 'NULL') END AS %s",
			q, q, sqltext.Ident("tl_k_"+k))
	}), ", ")
}

// rowHash is the SQL hash of a row of table over cols, each column hashed
// in a canonical text form rather than as itself: DuckDB's hash() depends
// on the type, so 1.5 as DECIMAL(12,2) and as DECIMAL(18,4), or 7 as
// INTEGER and as BIGINT, would hash differently. The forms follow
// canonical(): decimals without trailing zeros, booleans as 0/1, whole
// doubles as integers, the rest as DuckDB writes them as text.
func rowHash(ctx context.Context, q Querier, table string, cols []string) (string, error) {
	rows, err := q.QueryContext(ctx, "DESCRIBE SELECT * FROM "+sqltext.Name(table))
	if err != nil {
		return "", fmt.Errorf("read column types of %s: %w", table, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return "", fmt.Errorf("read column types of %s: %w", table, err)
	}
	types := map[string]string{}
	for rows.Next() {
		// column_name, column_type, then null, key, default, extra.
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", fmt.Errorf("read column types of %s: %w", table, err)
		}
		// By the name folded as DuckDB folds it (foldName): a column
		// may be named in another case than the table's.
		types[foldName(fmt.Sprint(vals[0]))] = strings.ToUpper(fmt.Sprint(vals[1]))
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read column types of %s: %w", table, err)
	}
	exprs := make([]string, len(cols))
	for i, c := range cols {
		col := sqltext.Ident(c)
		switch t := types[foldName(c)]; {
		case strings.HasPrefix(t, "DECIMAL(") && !strings.HasSuffix(t, ",0)"):
			// A scale above 0 always writes a point: trailing zeros,
			// then a bare point, go ("10.50" 10.5, "10.00" 10).
			exprs[i] = fmt.Sprintf("rtrim(rtrim(%s::VARCHAR, '0'), '.')", col)
		case t == "BOOLEAN":
			exprs[i] = col + "::INTEGER::VARCHAR"
		case t == "DOUBLE" || t == "FLOAT":
			// DuckDB writes a whole double with ".0" (and from 1e16 with
			// an exponent): as the integer it is, to hash as an integer
			// or a decimal column of the value does. Others as DuckDB
			// writes them, the shortest text that reads back, which
			// equals a decimal's from 1e-4 on (below, an exponent).
			exprs[i] = fmt.Sprintf("CASE WHEN isfinite(%[1]s) AND %[1]s = trunc(%[1]s) AND abs(%[1]s) < 1e18 THEN trunc(%[1]s)::BIGINT::VARCHAR ELSE %[1]s::VARCHAR END", col)
		default:
			exprs[i] = col + "::VARCHAR"
		}
	}
	return "hash(" + strings.Join(exprs, ", ") + ")", nil
}

// commonColumns lists the columns both tables have, in the left's order
// and spelling. Names are matched in any case, as DuckDB resolves them:
// matched exactly, a column "amount" beside "Amount" was left out of the
// comparison, and tables differing only there were reported EQUAL.
func commonColumns(ctx context.Context, q Querier, left, right string) ([]string, error) {
	l, err := columns(ctx, q, left)
	if err != nil {
		return nil, err
	}
	r, err := columns(ctx, q, right)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range l {
		if HasColumn(r, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// HasColumn says whether names holds name in any ASCII case, as DuckDB
// matches column names (foldName): "Amount" and "amount" name one column
// (in MySQL/MariaDB too).
func HasColumn(names []string, name string) bool { return ColumnIndex(names, name) >= 0 }

// ColumnIndex is the index of the first of names that is name in any
// ASCII case (HasColumn), -1 if none is.
func ColumnIndex(names []string, name string) int {
	key := foldName(name)
	return slices.IndexFunc(names, func(n string) bool { return foldName(n) == key })
}

// foldName is a column name as DuckDB compares names (sqltext.DuckDBFold).
// Folded as Go folds Unicode, "é" and "É" were one name, and one column's
// type canonicalised the other's values (a text '10' hashed as a decimal,
// equal to '1').
func foldName(name string) string { return sqltext.DuckDBFold(name) }

func columns(ctx context.Context, q Querier, table string) ([]string, error) {
	rows, err := q.QueryContext(ctx, "SELECT * FROM "+sqltext.Name(table)+" LIMIT 0")
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", table, err)
	}
	defer rows.Close()
	return rows.Columns()
}

func quoteAll(names []string, prefix string) string {
	return strings.Join(mapStrings(names, func(n string) string { return sqltext.Ident(prefix + n) }), ", ")
}

func mapStrings(in []string, f func(string) string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = f(s)
	}
	return out
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) {
	verdict := "EQUAL"
	if !r.Equal {
		verdict = "DIFFERENT"
	}
	fmt.Fprintf(w, "%s: %s vs %s over %d columns (%s)\n", verdict, r.Left, r.Right, len(r.Columns), strings.Join(r.Columns, ", "))
	fmt.Fprintf(w, "  rows:            %d vs %d\n", r.LeftRows, r.RightRows)
	fmt.Fprintf(w, "  sum of row hashes: %s vs %s\n", r.LeftSum, r.RightSum)
	fmt.Fprintf(w, "  only in %s: %d, only in %s: %d, values differ: %d, duplicate keys: %d / %d\n",
		r.Left, r.OnlyLeft, r.Right, r.OnlyRight, r.Differ, r.DupLeft, r.DupRight)
	if r.Rechecked > 0 {
		fmt.Fprintf(w, "  differing keys read again: %d, of which agree now (changed during the scan): %d\n", r.Rechecked, r.Settled)
	}
	fmt.Fprintf(w, "  diff rate: %.4f%%\n", 100*r.DiffRate())
	for _, e := range r.Examples {
		fmt.Fprintf(w, "  key %s: %s\n", e.Key, e.Problem)
	}
}
