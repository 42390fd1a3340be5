package merge

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// unreadSQL is the SQL condition that the change of alias ("x." or "")
// did not read column (quoted as a string literal): its
// cdc.UnavailableColumn names it.
func unreadSQL(alias, column string) string {
	return fmt.Sprintf(`coalesce(list_contains(from_json(%s%s, '["VARCHAR"]'), %s), false)`,
		alias, sqltext.Ident(cdc.UnavailableColumn), column)
}

// fillUnavailable gives each update of tl_clatest (the latest change per
// key) whose source did not read a column (Debezium's placeholder for a
// PostgreSQL TOAST value the update left unchanged) the value of that
// column the key's latest earlier change gave, as Debezium's own sinks
// keep the previous value: an earlier change of the increment (changes,
// the SQL of the changes the latest was picked from) in source order,
// or the model's row, whichever is later; and each such create (of an
// update that changed the primary key) its old key's value. So several
// changes of a key in one round give what they give one per round, and
// a model built again from its changelog table holds the same rows.
//
// Only the columns the changes of tl_clatest name are read, each once: a
// table none of whose changes left a value unread has no
// cdc.UnavailableColumn, and its merges do not come here.
func (c *ChangelogMerger) fillUnavailable(ctx context.Context, tx *sql.Tx, p *changelogPlan, changes string) error {
	names, err := unreadColumns(ctx, tx)
	if err != nil {
		return fmt.Errorf("list the columns of %s whose values the source did not read: %w", p.m.Source, err)
	}
	var unresolved int64
	for _, name := range names {
		if slices.Contains(p.keys, name) || !slices.ContainsFunc(p.columns, func(col duckdb.Column) bool { return col.Name == name }) {
			continue // not a column of the model (the decoder refuses an unread key)
		}
		n, err := fillColumn(ctx, tx, p, changes, name)
		if err != nil {
			return fmt.Errorf("fill column %s of %s's updates that did not read it: %w", name, p.m.Target, err)
		}
		unresolved += n
	}
	if unresolved > 0 {
		c.mg.log.Warn("updates or creates left values unread that no earlier change of their keys gives (a key the model does not hold, or whose last change was a delete; a create whose old key has not loaded or gave none): those columns are NULL in the model until a change sends them; reconcile --source finds the rows",
			"model", p.m.Target, "columns", unresolved)
	}
	return nil
}

// unreadColumns lists the columns the updates and creates of tl_clatest
// did not read.
func unreadColumns(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT DISTINCT unnest(from_json(%[1]s, '["VARCHAR"]')) FROM tl_clatest WHERE %[2]s IN ('u', 'c') AND %[1]s IS NOT NULL`,
		sqltext.Ident(cdc.UnavailableColumn), sqltext.Ident(cdc.OpColumn)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// fillColumn sets column name of the updates and creates of tl_clatest
// that did not read it, and returns how many found no earlier value (set
// NULL). An update's is the latest earlier change of the key in changes
// that read it or deleted the key (no value, whatever the delete's
// before image holds, as when the delete merged in an earlier round and
// left a tombstone), or else, or when the model's row or tombstone is
// later, that row's value (a tombstone: none). An earlier change at the model row's position is taken over the
// row: it is that row's change or one after it in Kafka order. A create
// that did not read it, the create's own or an update's latest earlier
// change, takes the old key's (resolveCreates).
func fillColumn(ctx context.Context, tx *sql.Tx, p *changelogPlan, changes, name string) (int64, error) {
	col, lit, op := sqltext.Ident(name), sqltext.String(name), sqltext.Ident(cdc.OpColumn)
	coords := "ktopic, kpartition, koffset, kindex"
	same := "y.ktopic = x.ktopic AND y.kpartition = x.kpartition AND y.koffset = x.koffset AND y.kindex = x.kindex"
	update := fmt.Sprintf(`x.%s = 'u' AND %s`, op, unreadSQL("x.", lit))
	create := fmt.Sprintf(`x.%s = 'c' AND %s`, op, unreadSQL("x.", lit))
	earlier := fmt.Sprintf(`SELECT %[1]s, last_value(CASE WHEN %[2]s IN ('c', 'd') OR NOT %[3]s THEN {'v': CASE WHEN %[2]s <> 'd' THEN %[4]s END, 'gone': %[2]s = 'd', 'at': %[5]s, 'via': %[10]s} END IGNORE NULLS)
		OVER (PARTITION BY %[6]s ORDER BY %[5]s, %[1]s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS f
	FROM (%[7]s) c WHERE EXISTS (SELECT 1 FROM tl_clatest x WHERE %[8]s AND %[9]s)`,
		coords, op, unreadSQL("", lit), col, pos(""), p.keyList(), changes, p.keyMatch("x", "c"), update, viaSQL("", op, lit))
	prior := fmt.Sprintf(`SELECT %[1]s, %[2]s AS v, %[3]s AS at, true AS live FROM %[4]s UNION ALL SELECT %[1]s, NULL, %[3]s, false FROM %[5]s`,
		p.keyList(), col, pos(""), p.target, p.tombstones)
	fill := fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_cfill AS SELECT x.ktopic, x.kpartition, x.koffset, x.kindex, CASE
		WHEN %[6]s THEN {'v': NULL, 'ok': false}
		WHEN y.f IS NOT NULL AND (t.at IS NULL OR y.f.at >= t.at) THEN {'v': y.f.v, 'ok': NOT y.f.gone}
		WHEN t.at IS NOT NULL THEN {'v': t.v, 'ok': t.live}
		ELSE {'v': NULL, 'ok': false} END AS f, CASE
		WHEN %[6]s THEN %[7]s
		WHEN y.f IS NOT NULL AND (t.at IS NULL OR y.f.at >= t.at) THEN y.f.via END AS via
	FROM tl_clatest x LEFT JOIN (%[1]s) y ON %[2]s LEFT JOIN (%[3]s) t ON %[4]s
	WHERE %[5]s OR %[6]s`, earlier, same, prior, p.keyMatch("t", "x"), update, create, viaSQL("x.", op, lit))
	if err := exec(ctx, tx, fill); err != nil {
		return 0, err
	}
	if err := resolveCreates(ctx, tx, p, col, lit); err != nil {
		return 0, err
	}
	if err := exec(ctx, tx, fmt.Sprintf(`UPDATE tl_clatest x SET %s = y.f.v FROM tl_cfill y WHERE %s`, col, same)); err != nil {
		return 0, err
	}
	var unresolved int64
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tl_cfill WHERE NOT f.ok`).Scan(&unresolved)
	return unresolved, err
}

// viaSQL is the Kafka coordinates of the change of alias ("x." or "")
// when it is a create that did not read column lit (a string literal),
// whose value is then the old key's, else NULL.
func viaSQL(alias, op, lit string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s%[2]s = 'c' AND %[3]s THEN {'t': %[1]sktopic, 'p': %[1]skpartition, 'o': %[1]skoffset, 'i': %[1]skindex} END`,
		alias, op, unreadSQL(alias, lit))
}

// resolveCreates gives each row of tl_cfill whose value is that of a
// create that did not read column col (lit: its name as a string
// literal; the row's via names the create) the value of the create's old
// key. Debezium sends an update that changes a row's primary key as a
// delete of the old key and a create of the new, both at the update's
// position, and the create's row lacks a TOAST value the update left
// unchanged. The old key is that of a delete of another key at the
// create's position in the changelog table (read whole: the delete and
// the old key's changes may have merged in earlier rounds), and its value
// that of the old key's latest change before it that read the column;
// none after a delete or without such a change; that of the old key's
// old key after a create that did not read it either, step by step until
// none is left (positions fall at each step). So rounds cut anywhere, and
// a model built again, give the same row.
//
// Deletes of more than one other key at the create's position (a source
// that gives several rows' changes one position, as Debezium 1.x did with
// wal2json, a transaction's changes sharing its LSN) leave the old key
// unknown: none, with the warning, rather than another row's value.
func resolveCreates(ctx context.Context, tx *sql.Tx, p *changelogPlan, col, lit string) error {
	defer exec(context.WithoutCancel(ctx), tx, "DROP TABLE IF EXISTS tl_cstep")
	op := sqltext.Ident(cdc.OpColumn)
	step := fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_cstep AS
	WITH o AS (
		SELECT s.ktopic, s.kpartition, s.koffset, s.kindex, any_value(%[6]s) AS tl_at, any_value(%[11]s) AS tl_key
		FROM tl_cfill s
		JOIN %[4]s c ON c.ktopic = s.via.t AND c.kpartition = s.via.p AND c.koffset = s.via.o AND c.kindex = s.via.i
		JOIN %[4]s d ON d.%[2]s = 'd' AND %[5]s = %[6]s AND NOT (%[7]s)
		WHERE s.via IS NOT NULL AND %[6]s <> ''
		GROUP BY s.ktopic, s.kpartition, s.koffset, s.kindex
		HAVING count(DISTINCT %[11]s) = 1)
	SELECT o.ktopic, o.kpartition, o.koffset, o.kindex, {'v': CASE WHEN l.%[2]s <> 'd' THEN l.%[1]s END, 'ok': l.%[2]s <> 'd'} AS f, %[3]s AS via
	FROM o JOIN %[4]s l ON %[8]s AND %[9]s < o.tl_at AND %[9]s <> '' AND l.%[2]s IN ('c', 'u', 'r', 'd') AND (l.%[2]s IN ('c', 'd') OR NOT %[10]s)
	QUALIFY row_number() OVER (PARTITION BY o.ktopic, o.kpartition, o.koffset, o.kindex
		ORDER BY %[9]s DESC, l.ktopic DESC, l.kpartition DESC, l.koffset DESC, l.kindex DESC) = 1`,
		col, op, viaSQL("l.", op, lit), p.log, pos("d."), pos("c."), p.keyMatch("d", "c"), p.keyMatch("l", "o.tl_key"), pos("l."), unreadSQL("l.", lit),
		keyStructSQL(p, "d"))
	same := "y.ktopic = s.ktopic AND y.kpartition = s.kpartition AND y.koffset = s.koffset AND y.kindex = s.kindex"
	for {
		var left int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tl_cfill WHERE via IS NOT NULL`).Scan(&left); err != nil {
			return fmt.Errorf("count the values of creates to take from their old keys: %w", err)
		}
		if left == 0 {
			return nil
		}
		if err := exec(ctx, tx, step,
			// No old key, or no value of it: none.
			fmt.Sprintf(`UPDATE tl_cfill s SET f = {'v': NULL, 'ok': false}, via = NULL WHERE via IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tl_cstep y WHERE %s)`, same),
			fmt.Sprintf(`UPDATE tl_cfill s SET f = CASE WHEN y.via IS NULL THEN y.f ELSE {'v': NULL, 'ok': false} END, via = y.via FROM tl_cstep y WHERE %s`, same),
		); err != nil {
			return fmt.Errorf("take the values of creates from their old keys: %w", err)
		}
	}
}

// keyStructSQL is the key of the change of alias as a struct of its key
// columns, named as they are (alias.tl_key."k" reads one back).
func keyStructSQL(p *changelogPlan, alias string) string {
	parts := make([]string, len(p.keys))
	for i, k := range p.keys {
		parts[i] = sqltext.String(k) + ": " + alias + "." + sqltext.Ident(k)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
