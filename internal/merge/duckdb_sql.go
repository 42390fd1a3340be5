package merge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// The DuckDB statements of one merge step. They run in one transaction on
// one connection, through two temporary tables: tl_inc (every raw row of
// the increment, projected and typed, with the reason it is rejected if it
// is) and tl_latest (the newest good change per key).

// incrementSQL selects the raw rows of the model's partitions from their
// watermark on, with koffset in [lo, hi) (lo only prunes: every row below
// it is known to be merged) and, with p.upto, below that model's
// watermark, and projects them.
func (p *plan) incrementSQL(lo, hi int64) string {
	var uptoJoin, uptoWhere string
	if p.upto != "" {
		// A partition that model never merged bounds at 0: nothing.
		uptoJoin = fmt.Sprintf(`
  LEFT JOIN %s u ON u.model = %s AND u.topic = json_extract_string(r.record_metadata, '$.topic') AND u."partition" = r.kpartition`,
			WatermarkTable, sqltext.String(p.upto))
		uptoWhere = " AND r.koffset < coalesce(u.next_offset, 0)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `CREATE OR REPLACE TEMP TABLE tl_inc AS
WITH src AS (
  SELECT json_extract_string(r.record_metadata, '$.topic') AS tl_topic, r.kpartition AS tl_partition, r.koffset AS tl_offset, r.raw_data AS tl_event
  FROM %s r
  LEFT JOIN %s w ON w.model = %s AND w.topic = json_extract_string(r.record_metadata, '$.topic') AND w."partition" = r.kpartition%s
  WHERE r.koffset >= %d AND r.koffset < %d AND r.koffset >= coalesce(w.next_offset, 0)%s
), `, p.source, WatermarkTable, sqltext.String(p.m.Name), uptoJoin, lo, hi, uptoWhere)
	if p.m.Format == config.FormatDebezium {
		// With or without the schema wrapper; the row image is "after",
		// or "before" for a delete.
		fmt.Fprintf(&b, `env AS (
  SELECT *, coalesce(json_extract(tl_event, '$.payload'), tl_event) AS tl_env FROM src
), op AS (
  SELECT *, json_extract_string(tl_env, '$.op') AS tl_op FROM env
), doc AS (
  SELECT *,
    CASE WHEN tl_event IS NULL THEN '%s' WHEN tl_op = 'd' THEN '%s' WHEN tl_op IN ('c', 'r', 'u') THEN '%s' ELSE '%s' END AS tl_kind,
    CASE WHEN tl_op = 'd' THEN json_extract(tl_env, '$.before') ELSE json_extract(tl_env, '$.after') END AS tl_doc
  FROM op
), `, kindSkip, kindDelete, kindUpsert, kindBad)
	} else {
		kind := p.kindExpr("json_extract_string(tl_event, " + sqltext.String(p.m.Action.Path) + ")")
		fmt.Fprintf(&b, `doc AS (
  SELECT *, tl_event AS tl_doc, CASE WHEN tl_event IS NULL THEN '%s' ELSE %s END AS tl_kind FROM src
), `, kindSkip, kind)
	}
	// One call per kind of extraction with every path: DuckDB parses the
	// document once per call, not once per column.
	var textPaths, jsonPaths []string
	raw := make([]string, len(p.m.Columns))
	for i, c := range p.m.Columns {
		if strings.EqualFold(c.Type, "JSON") {
			jsonPaths = append(jsonPaths, sqltext.String(c.Path))
			raw[i] = fmt.Sprintf("tl_json[%d] AS tl_raw_%d", len(jsonPaths), i)
		} else {
			textPaths = append(textPaths, sqltext.String(c.Path))
			raw[i] = fmt.Sprintf("tl_text[%d] AS tl_raw_%d", len(textPaths), i)
		}
	}
	var extracts []string
	if len(textPaths) > 0 {
		extracts = append(extracts, "json_extract_string(tl_doc, ["+strings.Join(textPaths, ", ")+"]) AS tl_text")
	}
	if len(jsonPaths) > 0 {
		extracts = append(extracts, "json_extract(tl_doc, ["+strings.Join(jsonPaths, ", ")+"]) AS tl_json")
	}
	fmt.Fprintf(&b, "paths AS (\n  SELECT *, %s FROM doc\n), ", strings.Join(extracts, ", "))
	fmt.Fprintf(&b, "ext AS (\n  SELECT *, %s FROM paths\n), ", strings.Join(raw, ", "))
	fmt.Fprintf(&b, "typed AS (\n  SELECT *, %s FROM ext\n)\n", list(p.m.Columns, ", ", func(c config.Column, i int) string {
		return fmt.Sprintf("%s AS %s", sqltext.TryCast(fmt.Sprintf("tl_raw_%d", i), c.Type), sqltext.Ident(c.Name))
	}))
	// Keep only what the later steps read: the documents and the raw texts
	// are large, and every later step copies what tl_inc holds.
	fmt.Fprintf(&b, "SELECT tl_topic, tl_partition, tl_offset, tl_kind, %s, %s AS tl_reason FROM typed", p.columnList(""), p.reasonExpr(true))
	return b.String()
}

// reasonExpr says why a row is rejected, or NULL: a value that does not cast
// to its column's type or whose fraction an integer or DECIMAL column would
// round (sqltext.FractionLost), a number past a floating column's range,
// which the cast makes infinity (sqltext.InfinityLost), a missing key or
// version. With duck (DuckDB), also a list, struct or map value one element of which does not
// cast (TRY_CAST nulls the element, not the value) or has a fraction an
// integer element would round.
func (p *plan) reasonExpr(duck bool) string {
	regexp := "regexp_like" // Databend's
	if duck {
		regexp = "regexp_matches"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "CASE WHEN tl_kind = '%s' THEN NULL", kindSkip)
	if p.m.Format == config.FormatDebezium {
		fmt.Fprintf(&b, " WHEN tl_kind = '%s' THEN 'not a Debezium change event: op is ' || coalesce(tl_op, 'missing')", kindBad)
	}
	for i, c := range p.m.Columns {
		when := p.checkedWhen(c)
		fmt.Fprintf(&b, "%s tl_raw_%d IS NOT NULL AND %s IS NULL THEN %s || left(tl_raw_%d::VARCHAR, 200) || %s",
			when, i, sqltext.Ident(c.Name), p.lit("column "+c.Name+": cannot cast "), i, p.lit(" to "+c.Type))
		if lost := sqltext.FractionLost(fmt.Sprintf("tl_raw_%d", i), c.Type, regexp); lost != "" {
			fmt.Fprintf(&b, "%s %s IS NOT NULL AND %s THEN %s || left(tl_raw_%d::VARCHAR, 200) || %s",
				when, sqltext.Ident(c.Name), lost, p.lit("column "+c.Name+": "), i, p.lit(" does not fit "+c.Type+" without rounding"))
		}
		if lost := sqltext.InfinityLost(fmt.Sprintf("tl_raw_%d", i), sqltext.Ident(c.Name), c.Type, regexp); lost != "" {
			fmt.Fprintf(&b, "%s %s IS NOT NULL AND %s THEN %s || left(tl_raw_%d::VARCHAR, 200) || %s",
				when, sqltext.Ident(c.Name), lost, p.lit("column "+c.Name+": "), i, p.lit(" is past the range of "+c.Type+" (its cast would be infinity)"))
		}
		if duck && sqltext.Nested(c.Type) {
			fmt.Fprintf(&b, "%s tl_raw_%d IS NOT NULL AND %s THEN %s || left(tl_raw_%d::VARCHAR, 200) || %s",
				when, i, sqltext.NestedCastLost(sqltext.Ident(c.Name), fmt.Sprintf("tl_raw_%d", i), c.Type),
				p.lit("column "+c.Name+": an element does not cast: "), i, p.lit(" to "+c.Type))
			if lost := sqltext.NestedFractionLost(sqltext.Ident(c.Name), fmt.Sprintf("tl_raw_%d", i), c.Type); lost != "" {
				// An integer element given 1.5 is cast to 2, not NULL.
				fmt.Fprintf(&b, "%s tl_raw_%d IS NOT NULL AND %s IS NOT NULL AND %s THEN %s || left(tl_raw_%d::VARCHAR, 200) || %s",
					when, i, sqltext.Ident(c.Name), lost, p.lit("column "+c.Name+": an element "), i, p.lit(" does not fit "+c.Type+" without rounding"))
			}
		}
	}
	for _, c := range p.keys {
		fmt.Fprintf(&b, " WHEN %s IS NULL THEN %s", sqltext.Ident(c.Name), p.lit("key column "+c.Name+" is missing or null"))
	}
	if p.version != "" {
		fmt.Fprintf(&b, " WHEN %s IS NULL THEN %s", p.version, p.lit("version column "+p.m.Version+" is missing or null"))
	}
	b.WriteString(" END")
	return b.String()
}

// checkedWhen opens the CASE branches that check column c's value: for
// every change when c is a key or the version, else for all but deletes.
// A delete removes its key's row (older than its version) and stores
// nothing else, so a value of its other columns that would not fit (a
// before image's 1.239 into DECIMAL(18,2), as the update before it had)
// must not reject it: rejected, the row it deletes stayed in the model.
func (p *plan) checkedWhen(c config.Column) string {
	if c.Name == p.m.Version || slices.Contains(p.m.Key, c.Name) {
		return " WHEN"
	}
	return fmt.Sprintf(" WHEN tl_kind <> '%s' AND", kindDelete)
}

func (p *plan) rejectSQL() string {
	return fmt.Sprintf(`INSERT INTO %s SELECT tl_topic, tl_partition, tl_offset, tl_reason, now() FROM tl_inc WHERE tl_reason IS NOT NULL`, p.rejects)
}

// latestSQL keeps the change per key that decides the key's row (see
// latestQuery), then (with a version) drops those older, by latestOrder,
// than the change that decided the key's row or delete in an earlier
// merge (p.deciding): a change tying with it in version goes by
// partition, offset and topic, as it would merged in one increment with it
// (a rebuild), not by which came last. A key decided before the table
// kept coordinates (filled from the target and tombstones with NULL
// ones, see decidingFillSQL) is given to the incoming change on a tie,
// as before; a rebuild fills them.
//
// Changes older than the key's last delete are dropped by the tombstones
// too: a release from before the table of deciding changes (gone back to
// for a while) merges deletes without updating it, and a late change
// between the stale deciding version and the delete's would re-create
// the deleted row.
func (p *plan) latestSQL() []string {
	q := []string{"CREATE OR REPLACE TEMP TABLE tl_latest AS\n" + p.latestQuery("tl_inc", "tl_partition", "tl_offset", "tl_topic")}
	if p.version != "" {
		q = append(q,
			fmt.Sprintf(`DELETE FROM tl_latest l USING %s d WHERE %s AND d.%s > l.%s`,
				p.tombstones, p.keyMatch("d", "l"), p.version, p.version),
			fmt.Sprintf(`DELETE FROM tl_latest l USING %s d WHERE %s AND %s`,
				p.deciding, p.keyMatch("d", "l"), p.newerSQL("d", "l")))
	}
	return q
}

// newerSQL is true when the change of a (version, tl_partition,
// tl_offset, tl_topic) is newer than b's by latestOrder (version, then
// partition, then offset, then topic); NULL, not true, on a tie in
// version when either lacks coordinates, or in version, partition and
// offset when either lacks a topic (a deciding change recorded before
// the table kept topics).
func (p *plan) newerSQL(a, b string) string {
	v := p.version
	return fmt.Sprintf(`(%[1]s.%[3]s > %[2]s.%[3]s OR %[1]s.%[3]s = %[2]s.%[3]s AND (%[1]s.tl_partition > %[2]s.tl_partition OR %[1]s.tl_partition = %[2]s.tl_partition AND (%[1]s.tl_offset > %[2]s.tl_offset OR %[1]s.tl_offset = %[2]s.tl_offset AND %[1]s.tl_topic > %[2]s.tl_topic)))`,
		a, b, v)
}

// mergeSQL applies tl_latest to the target.
func (p *plan) mergeSQL() string {
	return fmt.Sprintf("MERGE INTO %s AS t USING tl_latest AS s ON (%s)\n%s", p.target, p.keyMatch("t", "s"), p.mergeClauses())
}

// latestQuery selects, from the increment's good changes (from, in either
// dialect), one change per key with tl_deleted, such that merging it gives
// the row merging the key's changes one at a time would.
//
// With a version that is the newest change. Without one an "insert" only
// inserts if the key is absent, so the newest change does not decide: the
// key's last upsert or delete does, and of the inserts after it only the
// first can apply — and only if that last change was a delete (or there is
// none: then the first insert, if the target lacks the key). So the
// candidates are the last upsert/delete and the inserts after it; an
// upsert wins, else the first insert, else the delete. tl_deleted says the
// candidates hold a delete: the chosen insert then replaces whatever the
// target holds, as it would right after the delete.
func (p *plan) latestQuery(from, partition, offset, topic string) string {
	good := fmt.Sprintf("%s WHERE tl_reason IS NULL AND tl_kind <> '%s'", from, kindSkip)
	if p.version != "" {
		coords := partition + ", " + offset
		if topic != "" {
			coords += ", " + topic
		}
		return fmt.Sprintf(`SELECT %s, tl_kind, false AS tl_deleted, %s FROM %s
QUALIFY row_number() OVER (PARTITION BY %s ORDER BY %s) = 1`, p.columnList(""), coords, good, p.keyList(), p.latestOrder(partition, offset, topic))
	}
	return fmt.Sprintf(`SELECT %s, tl_kind, max(CASE WHEN tl_kind = '%s' THEN 1 ELSE 0 END) OVER (PARTITION BY %s) = 1 AS tl_deleted, %s, %s FROM (
  SELECT *, min(CASE WHEN tl_kind <> '%s' THEN tl_rn END) OVER (PARTITION BY %s) AS tl_last FROM (
    SELECT *, row_number() OVER (PARTITION BY %s ORDER BY %s) AS tl_rn FROM %s
  ) AS tl_ranked
) AS tl_candidates WHERE tl_last IS NULL OR tl_rn <= tl_last
QUALIFY row_number() OVER (PARTITION BY %s ORDER BY CASE WHEN tl_kind = '%s' THEN 0 WHEN tl_kind = '%s' THEN 1 ELSE 2 END, tl_rn DESC) = 1`,
		p.columnList(""), kindDelete, p.keyList(), partition, offset,
		kindInsert, p.keyList(),
		p.keyList(), p.latestOrder(partition, offset, topic), good,
		p.keyList(), kindUpsert, kindInsert)
}

// mergeClauses are the WHEN clauses of the MERGE of source s into target t,
// the same in every dialect. With a version, a change older than the
// target's row is ignored; without one, an "insert" never overwrites (a
// replayed insert) unless the key's deciding change in the increment is a
// delete before it (s.tl_deleted, see latestQuery), an upsert or delete
// always applies.
func (p *plan) mergeClauses() string {
	newer := ""
	upsert := fmt.Sprintf("(s.tl_kind = '%s' OR s.tl_kind = '%s' AND s.tl_deleted)", kindUpsert, kindInsert)
	if p.version != "" {
		newer = fmt.Sprintf(" AND s.%s >= t.%s", p.version, p.version)
		upsert = fmt.Sprintf("s.tl_kind <> '%s'", kindDelete)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "WHEN MATCHED AND s.tl_kind = '%s'%s THEN DELETE\n", kindDelete, newer)
	if len(p.values) > 0 {
		fmt.Fprintf(&b, "WHEN MATCHED AND %s%s THEN UPDATE SET %s\n", upsert, newer, list(p.values, ", ", func(c config.Column, _ int) string {
			q := sqltext.Ident(c.Name)
			return q + " = s." + q
		}))
	}
	fmt.Fprintf(&b, "WHEN NOT MATCHED AND s.tl_kind <> '%s' THEN INSERT (%s) VALUES (%s)", kindDelete, p.columnList(""), p.columnList("s."))
	return b.String()
}

// columnList is the model's columns, quoted, each after prefix.
func (p *plan) columnList(prefix string) string {
	return list(p.m.Columns, ", ", func(c config.Column, _ int) string { return prefix + sqltext.Ident(c.Name) })
}

// tombstoneSQL remembers the version of each key's last delete, so that an
// older change arriving later cannot bring the row back, and forgets it
// once a newer change re-creates the key.
func (p *plan) tombstoneSQL() []string {
	if p.version == "" {
		return nil
	}
	cols := p.keyList() + ", " + p.version
	return []string{
		fmt.Sprintf(`MERGE INTO %s AS d USING (SELECT %s FROM tl_latest WHERE tl_kind = '%s') AS s ON (%s)
WHEN MATCHED AND s.%s > d.%s THEN UPDATE SET %s = s.%s
WHEN NOT MATCHED THEN INSERT (%s) VALUES (%s)`, p.tombstones, cols, kindDelete, p.keyMatch("d", "s"),
			p.version, p.version, p.version, p.version, cols,
			list(append(append([]config.Column{}, p.keys...), config.Column{Name: p.m.Version}), ", ",
				func(c config.Column, _ int) string { return "s." + sqltext.Ident(c.Name) })),
		// >=: a change tying with the delete applies only when newer by
		// partition and offset (latestSQL), and then re-creates the key.
		fmt.Sprintf(`DELETE FROM %s d USING tl_latest s WHERE %s AND s.tl_kind <> '%s' AND s.%s >= d.%s`,
			p.tombstones, p.keyMatch("d", "s"), kindDelete, p.version, p.version),
	}
}

// decidingSQL records each merged key's deciding change: every change
// left in tl_latest applies (latestSQL dropped the older ones), to the
// target or the tombstones.
func (p *plan) decidingSQL() []string {
	if p.version == "" {
		return nil
	}
	return []string{fmt.Sprintf(`MERGE INTO %s AS d USING tl_latest AS s ON (%s)
WHEN MATCHED THEN UPDATE SET %s = s.%s, tl_partition = s.tl_partition, tl_offset = s.tl_offset, tl_topic = s.tl_topic
WHEN NOT MATCHED THEN INSERT (%s, %s, tl_partition, tl_offset, tl_topic) VALUES (%s, s.%s, s.tl_partition, s.tl_offset, s.tl_topic)`,
		p.deciding, p.keyMatch("d", "s"), p.version, p.version,
		p.keyList(), p.version, list(p.keys, ", ", func(c config.Column, _ int) string { return "s." + sqltext.Ident(c.Name) }), p.version)}
}

// watermarkSQL advances the model's watermark past every row of tl_inc.
func (p *plan) watermarkSQL() string {
	return advanceWatermarkSQL(p.lit(p.m.Name), "tl_inc", "tl_topic", "tl_partition", "tl_offset")
}

// advanceWatermarkSQL moves model's watermark, per partition, past the
// highest offset of the rows of from (the increment), in either dialect.
// model is a string literal, quoted for the dialect (sqltext.String for
// DuckDB, sqltext.DatabendString for Databend, whose lexer unescapes
// backslashes): quoted here, a Databend model's watermark rows would be
// kept under another name than its claim row's.
func advanceWatermarkSQL(model, from, topic, partition, offset string) string {
	return fmt.Sprintf(`MERGE INTO %s AS w USING (
  SELECT %s AS topic, %s AS "partition", MAX(%s) + 1 AS next_offset FROM %s GROUP BY %s, %s
) AS s ON w.model = %s AND w.topic = s.topic AND w."partition" = s."partition"
WHEN MATCHED THEN UPDATE SET next_offset = s.next_offset, merged_at = NOW()
WHEN NOT MATCHED THEN INSERT (model, topic, "partition", next_offset, merged_at) VALUES (%s, s.topic, s."partition", s.next_offset, NOW())`,
		WatermarkTable, topic, partition, offset, from, topic, partition, model, model)
}

// forgetWatermarksSQL deletes model's watermarks (model: a string
// literal quoted for the dialect), in either dialect, when its target is
// created anew: they say what a target dropped held. The Databend claim
// row (partition -1) stays: it is the model's, not the target's.
func forgetWatermarksSQL(model string) string {
	return fmt.Sprintf(`DELETE FROM %s WHERE model = %s AND "partition" >= 0`, WatermarkTable, model)
}

// watermarkTableSQL creates the watermark table, shared by every model.
var watermarkTableSQL = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (model VARCHAR, topic VARCHAR, "partition" INTEGER, next_offset BIGINT, merged_at TIMESTAMP)`, WatermarkTable)

// lowestSQL is the lowest watermark of the model over the source's
// partitions (0 for a partition never merged): every raw row below it is
// merged, so the increment scan can skip those row groups.
func (p *plan) lowestSQL() string { return lowestWatermarkSQL(p.ledger, sqltext.String(p.m.Name)) }

// lowestWatermarkSQL is the lowest watermark of model (a string literal)
// over the partitions of ledger (quoted), 0 for a partition it never
// merged.
func lowestWatermarkSQL(ledger, model string) string {
	return fmt.Sprintf(`SELECT coalesce(min(coalesce(w.next_offset, 0)), 0) FROM (SELECT DISTINCT topic, "partition" FROM %s) l
LEFT JOIN %s w ON w.model = %s AND w.topic = l.topic AND w."partition" = l."partition"`, ledger, WatermarkTable, model)
}

// tableSQL creates the tables a model needs if they are absent.
func (p *plan) tableSQL() []string {
	return append(p.besideTableSQL(), p.targetTableSQL())
}

// besideTableSQL creates the tables a model's merges keep beside its
// target if they are absent: the watermarks, the rejects and, with a
// version column, the tombstones.
func (p *plan) besideTableSQL() []string {
	q := []string{watermarkTableSQL, p.rejectsTableSQL()}
	if p.version != "" {
		q = append(q, p.tombstonesTableSQL())
	}
	return q
}

// tombstonesTableSQL creates the model's tombstones table (its key
// columns and version) if it is absent; "" without a version column.
func (p *plan) tombstonesTableSQL() string {
	if p.version == "" {
		return ""
	}
	v, _ := p.m.Columns.Lookup(p.m.Version)
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (%s)`, p.tombstones, columnDefs(append(append([]config.Column{}, p.keys...), v)))
}

// decidingTableSQL creates the model's table of deciding changes (its
// key columns, version and the change's Kafka partition, offset and
// topic) if
// it is absent; none without a version column. DuckDB's alone: a
// Databend merge does not keep it.
func (p *plan) decidingTableSQL() []string {
	if p.version == "" {
		return nil
	}
	v, _ := p.m.Columns.Lookup(p.m.Version)
	return []string{fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (%s, tl_partition INTEGER, tl_offset BIGINT, tl_topic VARCHAR)`, p.deciding,
		columnDefs(append(append([]config.Column{}, p.keys...), v)))}
}

// decidingFillSQL creates the table of deciding changes of a target
// merged before it existed, with each key of the target or its
// tombstones at its highest version and no coordinates (partition,
// offset, topic): which change
// gave the row is not known (newerSQL is then not true on a tie, and
// the incoming change applies, as before the table).
func (p *plan) decidingFillSQL() string {
	return fmt.Sprintf(`CREATE TABLE %[1]s AS SELECT %[2]s, max(%[3]s) AS %[3]s, NULL::INTEGER AS tl_partition, NULL::BIGINT AS tl_offset, NULL::VARCHAR AS tl_topic
FROM (SELECT %[2]s, %[3]s FROM %[4]s UNION ALL SELECT %[2]s, %[3]s FROM %[5]s) GROUP BY %[2]s`,
		p.deciding, p.keyList(), p.version, p.target, p.tombstones)
}

// targetTableSQL creates the model's target if it is absent.
func (p *plan) targetTableSQL() string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (%s)`, p.target, columnDefs(p.m.Columns))
}

// rejectsTableSQL creates the model's rejects table if it is absent.
func (p *plan) rejectsTableSQL() string {
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (topic VARCHAR, "partition" INTEGER, "offset" BIGINT, reason VARCHAR, rejected_at TIMESTAMP)`, p.rejects)
}
