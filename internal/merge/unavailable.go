package merge

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

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
// or the model's row, whichever is later. So several changes of a key in
// one round give what they give one per round, and a model built again
// from its changelog table holds the same rows.
//
// Only the columns the updates of tl_clatest name are read, each once: a
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
		c.mg.log.Warn("updates left values unread that no earlier change of their keys gives (a key the model does not hold, or whose last change was a delete): those columns are NULL in the model until a change sends them; reconcile --source finds the rows",
			"model", p.m.Target, "columns", unresolved)
	}
	return nil
}

// unreadColumns lists the columns the updates of tl_clatest did not read.
func unreadColumns(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT DISTINCT unnest(from_json(%[1]s, '["VARCHAR"]')) FROM tl_clatest WHERE %[2]s = 'u' AND %[1]s IS NOT NULL`,
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

// fillColumn sets column name of the updates of tl_clatest that did not
// read it, and returns how many found no earlier value (set NULL): the
// latest earlier change of the key in changes that read it or deleted
// the key (no value), or else, or when the model's row or tombstone is
// later, that row's value (a tombstone: none). An earlier change at the
// model row's position is taken over the row: it is that row's change or
// one after it in Kafka order.
func fillColumn(ctx context.Context, tx *sql.Tx, p *changelogPlan, changes, name string) (int64, error) {
	col, lit, op := sqltext.Ident(name), sqltext.String(name), sqltext.Ident(cdc.OpColumn)
	coords := "ktopic, kpartition, koffset, kindex"
	same := "y.ktopic = x.ktopic AND y.kpartition = x.kpartition AND y.koffset = x.koffset AND y.kindex = x.kindex"
	wanted := fmt.Sprintf(`x.%s = 'u' AND %s`, op, unreadSQL("x.", lit))
	earlier := fmt.Sprintf(`SELECT %[1]s, last_value(CASE WHEN %[2]s = 'd' OR NOT %[3]s THEN {'v': %[4]s, 'gone': %[2]s = 'd', 'at': %[5]s} END IGNORE NULLS)
		OVER (PARTITION BY %[6]s ORDER BY %[5]s, %[1]s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS f
	FROM (%[7]s) c WHERE EXISTS (SELECT 1 FROM tl_clatest x WHERE %[8]s AND %[9]s)`,
		coords, op, unreadSQL("", lit), col, pos(""), p.keyList(), changes, p.keyMatch("x", "c"), wanted)
	prior := fmt.Sprintf(`SELECT %[1]s, %[2]s AS v, %[3]s AS at, true AS live FROM %[4]s UNION ALL SELECT %[1]s, NULL, %[3]s, false FROM %[5]s`,
		p.keyList(), col, pos(""), p.target, p.tombstones)
	fill := fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_cfill AS SELECT x.ktopic, x.kpartition, x.koffset, x.kindex, CASE
		WHEN y.f IS NOT NULL AND (t.at IS NULL OR y.f.at >= t.at) THEN {'v': y.f.v, 'ok': NOT y.f.gone}
		WHEN t.at IS NOT NULL THEN {'v': t.v, 'ok': t.live}
		ELSE {'v': NULL, 'ok': false} END AS f
	FROM tl_clatest x LEFT JOIN (%[1]s) y ON %[2]s LEFT JOIN (%[3]s) t ON %[4]s
	WHERE %[5]s`, earlier, same, prior, p.keyMatch("t", "x"), wanted)
	if err := exec(ctx, tx, fill,
		fmt.Sprintf(`UPDATE tl_clatest x SET %s = y.f.v FROM tl_cfill y WHERE %s`, col, same)); err != nil {
		return 0, err
	}
	var unresolved int64
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tl_cfill WHERE NOT f.ok`).Scan(&unresolved)
	return unresolved, err
}
