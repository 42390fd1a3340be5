package merge

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// ChangelogModels is the registry of the models of changelog tables: one
// row per model, with the primary key it is merged by (a JSON array of
// column names, fixed by its first merge) and the position of the latest
// truncation of its source table ("" for none), below which no change
// applies.
const ChangelogModels = "tracelake_cdc_models"

// ChangelogMerger merges each changelog table of database change capture
// (kafka.format debezium, canal or maxwell; see pipeline.ChangelogDecoder)
// into its model: the latest row per primary key in source order, deletes
// applied, with the source's columns. There is nothing to configure: the
// tables come from the sink's registry of routed tables, the models'
// names from the cdc: templates, the keys from the changes, the columns
// from the changelog table.
//
// One merge of a table is one transaction, like Merger's: the model, its
// tombstones, its registry row and its watermark move together. The
// increment (the changelog rows past the watermark) is merged the way
// the seed's CDC pipeline does it: the model's rows of the increment's
// keys are removed (the anti-join) and the increment's latest row per key
// inserted, unless it is a delete, or older than what the model or a
// tombstone already holds for the key. Source order is the changes'
// position (cdc_position, which sorts as the source's log), then their
// Kafka order: a change delivered twice or late, a snapshot row read after
// the row's later change, never undoes a newer one.
type ChangelogMerger struct {
	mg                      *Merger
	snk                     *duckdb.Sink
	routes, reached, ledger string // quoted
	landing                 string // quoted: duckdb.Landing
	// schemaTopics are the topics that carried a Debezium server's
	// schema change messages, whatever their names (quoted:
	// duckdb.RoutesSchemaTopics).
	schemaTopics string
	schema       string // the tables' schema, "" for main
	route        func(database, schemaName, table string) (*cdc.Table, error)
	// dec decodes dead-lettered changes, which hold their tables' done
	// marks back (MarkReady).
	dec *cdc.Decoder
	dlq string // quoted
	// dead holds what each dead letter said at the last round
	// (deadLetters).
	deadMu sync.Mutex
	dead   map[deadKey]deadLetter
	// concurrency is how many merges run side by side (merge.concurrency,
	// SetConcurrency); 0: the default.
	concurrency int
}

// NewChangelogMerger merges the changelog tables of snk, a DuckDB sink
// with routed tables (registered in <sink.table>_routes of its database,
// which mg merges in), naming their models as dec routes them.
func NewChangelogMerger(mg *Merger, snk *duckdb.Sink, dec *cdc.Decoder) *ChangelogMerger {
	table := snk.Table()
	c := &ChangelogMerger{mg: mg, snk: snk, routes: sqltext.Name(table + "_routes"), reached: sqltext.Name(table + duckdb.RoutesReached),
		ledger: sqltext.Name(table + "_ledger"), landing: sqltext.Name(table + duckdb.Landing), route: dec.Route,
		schemaTopics: sqltext.Name(table + duckdb.RoutesSchemaTopics),
		dec:          dec, dlq: snk.Tables().DLQ}
	if s, _, ok := strings.Cut(table, "."); ok {
		c.schema = s + "."
	}
	return c
}

// SetConcurrency tells c that up to n of its merges run at once
// (merge.concurrency; 0 or less: config.DefaultMergeConcurrency), which
// share DuckDB's memory_limit: each cuts its increment into chunks of its
// share (chunkBytes). Set before the first merge.
func (c *ChangelogMerger) SetConcurrency(n int) { c.concurrency = n }

// Models lists the models of the registered changelog tables: Name and
// Target are the model table, Source the changelog table. A model keeps
// the name it was created with (the registry's model_table); one not
// created yet the name the cdc: templates gave it when its changelog
// table was created (model_named: after a restart with new templates, a
// changelog table not merged yet still merges into the model its changes
// were routed for, not into the new templates' model, whose own
// changelog table the new changes go into), or, for a changelog table of
// a release that did not record that, the name the templates give now.
// A table that cannot be named (two source tables claim the name: see
// cdc.Decoder.Claim) is left out with a warning, so that it holds back no
// other table's model.
func (c *ChangelogMerger) Models(ctx context.Context) ([]config.Model, error) {
	rows, err := c.mg.db.QueryContext(ctx, `SELECT log_table, source_database, source_schema, source_table, coalesce(model_table, model_named, '') FROM `+
		c.routes+` ORDER BY log_table`)
	if err != nil {
		return nil, fmt.Errorf("list the changelog tables of %s: %w", c.routes, err)
	}
	defer rows.Close()
	type entry struct{ log, model string }
	var entries []entry
	logs := map[string]bool{}
	for rows.Next() {
		var log, database, schemaName, table, model string
		if err := rows.Scan(&log, &database, &schemaName, &table, &model); err != nil {
			return nil, fmt.Errorf("list the changelog tables of %s: %w", c.routes, err)
		}
		logs[log] = true
		if model == "" {
			t, err := c.route(database, schemaName, table)
			if err != nil {
				c.mg.log.Warn("a changelog table has no model: its model's name is taken", "table", log, "err", err)
				continue
			}
			model = t.Model
		}
		entries = append(entries, entry{log, model})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the changelog tables of %s: %w", c.routes, err)
	}
	var out []config.Model
	for _, e := range entries {
		if logs[e.model] {
			// Never merge into another source table's changelog table.
			c.mg.log.Warn("a changelog table has no model: its model's name is a changelog table's", "table", e.log, "model", e.model)
			continue
		}
		out = append(out, config.Model{Name: e.model, Source: c.schema + e.log, Target: c.schema + e.model})
	}
	return out, nil
}

// Pending moves the changes landed so far into their changelog tables
// (duckdb.Sink.Distribute), then lists the models (as Models) whose
// changelog tables hold rows past their watermarks: the tables that
// reached further than the model's last merge (<table>_routes_reached,
// which each move keeps in its transaction), found in one query whatever
// the count of tables, so that a round over a thousand tables of which
// ten changed merges ten. A table whose changes cannot move holds back
// its own model alone: the others merge what moved. Its model is listed
// too, and its Merge fails with the reason, so that a round reports it
// (status page, metrics, `tracelake merge`'s exit code).
func (c *ChangelogMerger) Pending(ctx context.Context) ([]config.Model, error) {
	if _, err := c.snk.Distribute(ctx); err != nil {
		c.mg.log.Error("changes could not be moved from the landing table into their changelog tables; their models merge what moved before", "err", err)
	}
	all, err := c.Models(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(all))
	for i, m := range all {
		names[i] = "(" + sqltext.String(m.Name) + ", " + sqltext.String(strings.TrimPrefix(m.Source, c.schema)) + ")"
	}
	if len(names) == 0 {
		return nil, nil
	}
	// The tables every merge writes exist, committed, before any merge
	// of the round: merges side by side (merge.concurrency) that each
	// created them would conflict in DuckDB's catalog, and a first merge
	// that failed would take them with it.
	if err := exec(ctx, c.mg.db, sharedTablesSQL...); err != nil {
		return nil, fmt.Errorf("create the tables of changelog models: %w", err)
	}
	// Pending too: a model merged before whose table is gone (dropped to
	// be built again), which its next merge makes from the first change.
	// Its table was made: the registry holds its key, which the merge
	// that makes the table records. A changelog table of truncations
	// alone has watermarks and no model table either, and nothing to
	// merge until a change comes.
	q := fmt.Sprintf(`SELECT DISTINCT m.model FROM (VALUES %s) AS m(model, log_table) JOIN %s r ON r.log_table = m.log_table
LEFT JOIN %s w ON w.model = m.model AND w.topic = r.topic AND w."partition" = r."partition"
WHERE r.next_offset > coalesce(w.next_offset, 0)
	OR w.model IS NOT NULL AND EXISTS (SELECT 1 FROM %s k WHERE k.model = m.model AND coalesce(k.key_columns, '') <> '')
	AND NOT EXISTS (SELECT 1 FROM duckdb_tables() t
		WHERE t.database_name = current_database() AND lower(t.schema_name) = lower(%s) AND lower(t.table_name) = lower(m.model))`,
		strings.Join(names, ", "), c.reached, WatermarkTable, ChangelogModels, sqltext.String(cmp.Or(strings.TrimSuffix(c.schema, "."), "main")))
	rows, err := c.mg.db.QueryContext(ctx, q)
	if duckdb.IsMissing(err) {
		return all, nil // no watermark table yet: every table is new
	}
	if err != nil {
		return nil, fmt.Errorf("find the changelog tables with new rows: %w", err)
	}
	defer rows.Close()
	pending := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("find the changelog tables with new rows: %w", err)
		}
		pending[name] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find the changelog tables with new rows: %w", err)
	}
	unmoved := c.snk.Unmoved()
	var out []config.Model
	for _, m := range all {
		if _, stuck := unmoved[strings.TrimPrefix(m.Source, c.schema)]; pending[m.Name] || stuck {
			out = append(out, m)
		}
	}
	return out, nil
}

// sharedTablesSQL creates the tables every changelog model's merge
// writes: the watermarks and the registry of models.
var sharedTablesSQL = []string{watermarkTableSQL,
	`CREATE TABLE IF NOT EXISTS ` + ChangelogModels + ` (model VARCHAR, log_table VARCHAR, key_columns VARCHAR, truncated_at VARCHAR)`}

// changelogPlan is one changelog model's merge, its names quoted.
type changelogPlan struct {
	m                             config.Model
	log, target, tombstones, name string // quoted; name as a string literal
	keys                          []string
	columns                       []duckdb.Column // the model's: the source's, then position and source time
	// unavailable: the changelog table has cdc.UnavailableColumn (a
	// change of it left a value unread), so the merge fills such values.
	unavailable bool
	// partial: the increment merged is a chunk, the rest of it left
	// for the next transaction (chunk).
	partial bool
	// continued: an earlier chunk of this merge committed, whose
	// watermarks hold for the model even if its table is not made yet
	// (the chunk held truncations alone).
	continued bool
	// merged: the next offset, by partition, past the changes the
	// earlier chunks of this merge merged, which the watermark committed
	// may stay below (advance); a chunk reads past both.
	merged map[sink.TopicPartition]int64
	// until: the last offset, by partition, of the increment the first
	// chunk of this merge found (nil for a merge of one transaction); the
	// later chunks merge no further (changes landed since are the next
	// merge's).
	until map[sink.TopicPartition]int64
	// floor: the position of the latest truncation, the increment's
	// too (prepare; "" for none): a change below it is gone.
	floor string
}

// Merge merges m's changelog rows past its watermark into its model
// (m as Models lists it).
func (c *ChangelogMerger) Merge(ctx context.Context, m config.Model) (Result, error) {
	res := Result{Model: m.Name}
	start := time.Now()
	var err error
	continued := false
	merged := map[sink.TopicPartition]int64{}
	var until map[sink.TopicPartition]int64
	for {
		// One transaction a chunk of the increment (see chunk): the
		// model after each is the one its changes so far make.
		p := &changelogPlan{m: m, log: sqltext.Name(m.Source), target: sqltext.Name(m.Target),
			tombstones: sqltext.Name(m.Target + cdc.TombstonesSuffix), name: sqltext.String(m.Name)}
		p.continued, p.merged, p.until = continued, merged, until
		var part Result
		err = c.mg.inTx(ctx, func(tx *sql.Tx) error { return c.step(ctx, tx, p, &part) })
		res.Read, res.Changed = res.Read+part.Read, res.Changed+part.Changed
		if err != nil || !p.partial {
			break
		}
		continued, merged, until = true, p.merged, p.until
	}
	res.Took = time.Since(start)
	if stuck := c.snk.Unmoved()[strings.TrimPrefix(m.Source, c.schema)]; err == nil && stuck != nil {
		// Merged up to what moved; the rest waits in the landing table,
		// and the model is reported failed until it moves.
		err = fmt.Errorf("changes of changelog table %s cannot move there from the landing table, so its model is merged only up to the changes before them: %w", m.Source, stuck)
	}
	return res, err
}

// incrementSQL selects the changelog rows past the model's watermark
// (per Kafka partition), skipping by the lowest watermark of the ledger's
// partitions the row groups every one of which is merged.
// A chunk after the first reads past the earlier chunks' changes too
// (p.merged).
func (c *ChangelogMerger) incrementSQL(p *changelogPlan) string {
	q := fmt.Sprintf(`SELECT l.* FROM %s l LEFT JOIN %s w ON w.model = %s AND w.topic = l.ktopic AND w."partition" = l.kpartition
WHERE l.koffset >= (%s) AND l.koffset >= coalesce(w.next_offset, 0)`, p.log, WatermarkTable, p.name, lowestWatermarkSQL(c.ledger, p.name))
	// Plain conditions, no join: one (a semi join on a VALUES list)
	// that DuckDB builds from the changelog's side holds the big values
	// of the whole increment, which chunks are there to avoid.
	if len(p.until) > 0 {
		q += " AND (" + offsetConditions(p.until, func(tp sink.TopicPartition, last int64) string {
			return fmt.Sprintf("l.ktopic = %s AND l.kpartition = %d AND l.koffset <= %d", sqltext.String(tp.Topic), tp.Partition, last)
		}, " OR ") + ")"
	}
	if len(p.merged) > 0 {
		q += " AND " + offsetConditions(p.merged, func(tp sink.TopicPartition, next int64) string {
			return fmt.Sprintf("NOT (l.ktopic = %s AND l.kpartition = %d AND l.koffset < %d)", sqltext.String(tp.Topic), tp.Partition, next)
		}, " AND ")
	}
	return q
}

// offsetConditions joins with sep the condition each partition's offset
// makes, in a stable order.
func offsetConditions(offsets map[sink.TopicPartition]int64, cond func(sink.TopicPartition, int64) string, sep string) string {
	conds := make([]string, 0, len(offsets))
	for tp, offset := range offsets {
		conds = append(conds, "("+cond(tp, offset)+")")
	}
	slices.Sort(conds)
	return strings.Join(conds, sep)
}

// chunkUntil sets p.until to the last offsets of the increment sized in
// tl_ccut, by partition: a merge ends with the increment it began with.
// Read afresh at each chunk, changes landing meanwhile (the pipeline
// loads on) kept a table loaded faster than its chunks merged partial
// for ever, and its merge round never ended.
func chunkUntil(ctx context.Context, tx *sql.Tx, p *changelogPlan) error {
	rows, err := tx.QueryContext(ctx, `SELECT ktopic, kpartition, final FROM tl_ccut`)
	if err != nil {
		return err
	}
	defer rows.Close()
	until := map[sink.TopicPartition]int64{}
	for rows.Next() {
		var tp sink.TopicPartition
		var last int64
		if err := rows.Scan(&tp.Topic, &tp.Partition, &last); err != nil {
			return err
		}
		until[tp] = last
	}
	if err := rows.Err(); err != nil {
		return err
	}
	p.until = until
	return nil
}

// chunkMerged adds to p.merged the next offset past tl_cinc's changes
// (the chunk just merged), by partition.
func chunkMerged(ctx context.Context, tx *sql.Tx, p *changelogPlan) error {
	rows, err := tx.QueryContext(ctx, `SELECT ktopic, kpartition, max(koffset) + 1 FROM tl_cinc GROUP BY ALL`)
	if err != nil {
		return err
	}
	defer rows.Close()
	merged := maps.Clone(p.merged)
	if merged == nil {
		merged = map[sink.TopicPartition]int64{}
	}
	for rows.Next() {
		var tp sink.TopicPartition
		var next int64
		if err := rows.Scan(&tp.Topic, &tp.Partition, &next); err != nil {
			return err
		}
		merged[tp] = max(merged[tp], next)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	p.merged = merged
	return nil
}

// chunkBytes is the most bytes of values a merge's transaction takes of
// its increment, given DuckDB's memory_limit (0: DuckDB's default, of
// which nothing is known here) and how many merges run at once
// (merge.concurrency; at least 2 counted): the merges' chunks together
// take a quarter of it, as each merge holds its chunk's rows several
// times over (the increment, sorted to pick each key's latest change,
// those picked) and loads run beside them. A share fixed by the
// concurrency rather than one handed out among the merges in flight: it
// holds whichever merges happen to overlap, and costs only more, smaller
// transactions to a big increment. Until 2026-12-07 each merge took an
// eighth whatever merge.concurrency, and eight merges of big increments
// at once passed the limit at every round, their models never merged
// (TestChangelogChunksOfConcurrentMergesFitTheMemoryLimit). At least
// 1 MiB: a chunk smaller than that is mostly its statements' fixed cost
// (a chunk takes one whole record at least whatever the budget).
func chunkBytes(memoryLimit int64, concurrency int) int64 {
	if memoryLimit <= 0 {
		memoryLimit = 256 << 20
	}
	return max(1<<20, memoryLimit/(4*int64(max(concurrency, 2))))
}

// chunk is the SQL of the increment this transaction merges: the whole
// increment when its values fit chunkBytes, else a prefix of each
// partition's (whole Kafka records, at least one) that does, ordered by
// topic, partition and offset (p.partial). A model is the same whichever
// prefixes of its partitions' changes merges take
// (TestChangelogModelWhicheverRoundsRandomized): until 2026-12-07 a merge
// copied and sorted its whole increment, and one of more 12 MB rows than
// memory_limit holds (15 at 256 MiB) ran out of memory at every round, its
// model never merged again. The sizes are read from the strings' lengths,
// which DuckDB keeps beside them.
func (c *ChangelogMerger) chunk(ctx context.Context, tx *sql.Tx, p *changelogPlan) (string, error) {
	cols, err := duckdb.TableColumns(ctx, tx, p.m.Source)
	if err != nil {
		return "", err
	}
	size := []string{"64"} // a row's fixed part, roughly
	for _, col := range cols {
		switch {
		case col.Type == "BLOB":
			size = append(size, "coalesce(octet_length(l."+sqltext.Ident(col.Name)+"), 0)")
		case col.Type == "VARCHAR" || col.Type == "JSON":
			size = append(size, "coalesce(strlen(l."+sqltext.Ident(col.Name)+"::VARCHAR), 0)")
		}
	}
	budget := chunkBytes(c.snk.MemoryLimit(), cmp.Or(c.concurrency, config.DefaultMergeConcurrency))
	increment := c.incrementSQL(p)
	q := fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_ccut AS
WITH records AS (
	SELECT ktopic, kpartition, koffset, sum(%s) AS size FROM (%s) l GROUP BY ALL
), running AS (
	SELECT *, sum(size) OVER (ORDER BY ktopic, kpartition, koffset ROWS UNBOUNDED PRECEDING) - size AS before FROM records
)
SELECT ktopic, kpartition, max(koffset) FILTER (WHERE before < %d) AS last, bool_or(before >= %d) AS cut, max(koffset) AS final FROM running GROUP BY ALL`,
		strings.Join(size, " + "), increment, budget, budget)
	if err := exec(ctx, tx, q); err != nil {
		return "", fmt.Errorf("size the increment of %s: %w", p.m.Source, err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(bool_or(cut), false) FROM tl_ccut`).Scan(&p.partial); err != nil {
		return "", fmt.Errorf("size the increment of %s: %w", p.m.Source, err)
	}
	if !p.partial {
		return increment, nil
	}
	if p.until == nil {
		if err := chunkUntil(ctx, tx, p); err != nil {
			return "", fmt.Errorf("size the increment of %s: %w", p.m.Source, err)
		}
	}
	return fmt.Sprintf(`SELECT i.* FROM (%s) i JOIN tl_ccut k ON k.ktopic = i.ktopic AND k.kpartition = i.kpartition AND i.koffset <= k.last`, increment), nil
}

// step merges the increment in tx.
func (c *ChangelogMerger) step(ctx context.Context, tx *sql.Tx, p *changelogPlan, res *Result) error {
	if err := exec(ctx, tx, sharedTablesSQL...); err != nil {
		return fmt.Errorf("create the tables of changelog models: %w", err)
	}
	have, err := duckdb.TableColumns(ctx, tx, p.m.Target)
	if err != nil {
		return err
	}
	if len(have) == 0 && !p.continued {
		// A model dropped (to be built again) or never made: its
		// watermarks and tombstones describe a model that is not there,
		// and kept, the model made again held only the changes after
		// them. It is made from the first change of its changelog table.
		if err := forget(ctx, tx, p.m.Name, p.tombstones); err != nil {
			return fmt.Errorf("start model %s from the first change of %s: %w", p.m.Target, p.m.Source, err)
		}
	}
	increment, err := c.chunk(ctx, tx, p)
	if err != nil {
		return err
	}
	if err := exec(ctx, tx, `CREATE OR REPLACE TEMP TABLE tl_cinc AS `+increment); err != nil {
		return fmt.Errorf("read the increment of %s: %w", p.m.Source, err)
	}
	defer exec(context.WithoutCancel(ctx), tx, "DROP TABLE IF EXISTS tl_cinc", "DROP TABLE IF EXISTS tl_clatest", "DROP TABLE IF EXISTS tl_crekey", "DROP TABLE IF EXISTS tl_cfill", "DROP TABLE IF EXISTS tl_ccut")
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tl_cinc").Scan(&res.Read); err != nil {
		return fmt.Errorf("count the increment of %s: %w", p.m.Source, err)
	}
	if res.Read == 0 {
		return c.advance(ctx, tx, p)
	}
	past, err := c.prepare(ctx, tx, p)
	if err != nil {
		return err
	}
	if len(p.keys) == 0 {
		// Truncations of a table with no change yet: nothing to remove.
		return c.advance(ctx, tx, p)
	}
	if err := positionLive(ctx, tx, p); err != nil {
		return err
	}
	changes, err := candidates(ctx, tx, p, past)
	if err != nil {
		return err
	}
	keys := p.keyMatch("t", "x")
	stmts := []string{
		// The latest change per key past the latest truncation, dropped
		// when the model or a tombstone holds a newer one.
		fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_clatest AS SELECT * EXCLUDE (tl_rn) FROM (
	SELECT *, row_number() OVER (PARTITION BY %s ORDER BY %s DESC, ktopic DESC, kpartition DESC, koffset DESC, kindex DESC) AS tl_rn
	FROM (%s)) WHERE tl_rn = 1`,
			p.keyList(), pos(""), changes),
		fmt.Sprintf(`DELETE FROM tl_clatest x WHERE EXISTS (SELECT 1 FROM %s t WHERE %s AND %s > %s)
	OR EXISTS (SELECT 1 FROM %s t WHERE %s AND %s > %s)`,
			p.target, keys, pos("t."), pos("x."), p.tombstones, keys, pos("t."), pos("x.")),
	}
	if err := exec(ctx, tx, stmts...); err != nil {
		return fmt.Errorf("pick the latest change per key of %s: %w", p.m.Source, err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tl_clatest").Scan(&res.Changed); err != nil {
		return fmt.Errorf("count the changes of %s: %w", p.m.Source, err)
	}
	if p.unavailable {
		if err := c.fillUnavailable(ctx, tx, p, changes); err != nil {
			return err
		}
	}
	if err := exec(ctx, tx,
		fmt.Sprintf(`DELETE FROM %s t USING tl_clatest x WHERE %s`, p.target, keys),
		fmt.Sprintf(`INSERT INTO %s BY NAME SELECT %s FROM tl_clatest WHERE %s <> 'd'`, p.target, p.columnList(), sqltext.Ident(cdc.OpColumn)),
		fmt.Sprintf(`DELETE FROM %s t USING tl_clatest x WHERE %s`, p.tombstones, keys),
		fmt.Sprintf(`INSERT INTO %s BY NAME SELECT %s, %s FROM tl_clatest WHERE %s = 'd'`, p.tombstones, p.keyList(),
			sqltext.Ident(cdc.PositionColumn), sqltext.Ident(cdc.OpColumn)),
	); err != nil {
		return fmt.Errorf("merge into %s: %w", p.m.Target, err)
	}
	if failAfterMerge != nil {
		if err := failAfterMerge(); err != nil {
			return err
		}
	}
	return c.advance(ctx, tx, p)
}

// advance moves the model's watermark past the increment, and up to the
// offsets its changelog table is reached to (in this transaction's
// snapshot, every row below them is merged or in the increment), so that
// Pending no longer finds it.
func (c *ChangelogMerger) advance(ctx context.Context, tx *sql.Tx, p *changelogPlan) error {
	reached := fmt.Sprintf(`MERGE INTO %s AS w USING (SELECT topic, "partition", next_offset FROM %s WHERE log_table = %s) AS s
ON w.model = %s AND w.topic = s.topic AND w."partition" = s."partition"
WHEN MATCHED AND s.next_offset > w.next_offset THEN UPDATE SET next_offset = s.next_offset, merged_at = NOW()
WHEN NOT MATCHED THEN INSERT (model, topic, "partition", next_offset, merged_at) VALUES (%s, s.topic, s."partition", s.next_offset, NOW())`,
		WatermarkTable, c.reached, sqltext.String(strings.TrimPrefix(p.m.Source, c.schema)), p.name, p.name)
	// Never past a change of the table still in the landing table: one
	// below what moved (a replayed dead letter, whose table's move
	// failed) would be left behind for good.
	landed := fmt.Sprintf(`UPDATE %s AS w SET next_offset = l.next_offset FROM (
	SELECT "row"->>'%s' AS topic, ("row"->>'%s')::INTEGER AS "partition", min(("row"->>'%s')::BIGINT) AS next_offset
	FROM %s WHERE log_table = %s GROUP BY ALL) AS l
WHERE w.model = %s AND w.topic = l.topic AND w."partition" = l."partition" AND w.next_offset > l.next_offset`,
		WatermarkTable, schema.TopicColumn, schema.PartitionColumn, schema.OffsetColumn, c.landing,
		sqltext.String(strings.TrimPrefix(p.m.Source, c.schema)), p.name)
	from := "tl_cinc"
	if len(p.merged) > 0 {
		// A chunk after the first leaves a watermark below the offsets
		// the earlier chunks merged where it is (held at a landed change,
		// or lowered by a replay since): this chunk reads past those
		// offsets, and a change below them that is no longer landed (the
		// pipeline moved it meanwhile) would be passed and never merged.
		// The next merge reads from the watermark.
		from = fmt.Sprintf(`(SELECT ktopic, kpartition, koffset FROM tl_cinc c WHERE NOT EXISTS (SELECT 1 FROM %s h
	WHERE h.model = %s AND h.topic = c.ktopic AND h."partition" = c.kpartition AND (%s)))`, WatermarkTable, p.name,
			offsetConditions(p.merged, func(tp sink.TopicPartition, next int64) string {
				return fmt.Sprintf(`h.topic = %s AND h."partition" = %d AND h.next_offset < %d`, sqltext.String(tp.Topic), tp.Partition, next)
			}, " OR "))
	}
	stmts := []string{advanceWatermarkSQL(p.name, from, "ktopic", "kpartition", "koffset"), reached, landed}
	if p.until != nil {
		// A chunk: the changes landed since the merge began, past
		// p.until and in what the table reached, are not merged.
		stmts = []string{stmts[0], landed}
	}
	if p.partial {
		// Past the chunk alone (the rest of the increment is not merged),
		// and held at the landed changes as every commit is: a chunk's
		// watermark past a replayed dead letter still landed, and the
		// merge stopped before its last chunk, the dead letter moved
		// below the watermark and was never merged. The next chunk reads
		// past this one by p.merged, not by the watermark (held at the
		// landed changes, it would merge the same chunk for ever).
		if err := chunkMerged(ctx, tx, p); err != nil {
			return fmt.Errorf("note the changes of %s merged: %w", p.m.Source, err)
		}
	}
	if err := exec(ctx, tx, stmts...); err != nil {
		return fmt.Errorf("advance the watermark of %s: %w", p.m.Target, err)
	}
	return nil
}

// pos is the SQL of a change's position (alias "t." or ""). A change
// without one (Maxwell's bootstrap rows) sorts before every position
// (cdc.Position's zero), here as in the window's NULLS LAST: compared as
// "", never as NULL, which would let it overwrite a newer row or a
// tombstone of an earlier merge.
func pos(alias string) string {
	return "coalesce(" + alias + sqltext.Ident(cdc.PositionColumn) + ", '')"
}

// prepare reads the model's key (from the registry, or the increment on
// its first merge), creates its tables or adds the columns the changelog
// gained, applies a truncation in the increment, and returns the SQL
// condition of the increment's changes that come after the latest
// truncation.
func (c *ChangelogMerger) prepare(ctx context.Context, tx *sql.Tx, p *changelogPlan) (string, error) {
	var keyJSON, truncated sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT key_columns, truncated_at FROM `+ChangelogModels+` WHERE model = ?`, p.m.Name).Scan(&keyJSON, &truncated)
	registered := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read the registry of changelog models: %w", err)
	}
	// The keys the increment's changes name (Debezium's key schema,
	// Canal's pkNames, Maxwell's primary key); a truncation names none.
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT DISTINCT %s::VARCHAR FROM tl_cinc WHERE %s <> 't'`,
		sqltext.Ident(cdc.KeyColumn), sqltext.Ident(cdc.OpColumn)))
	if err != nil {
		return "", fmt.Errorf("read the keys of %s: %w", p.m.Source, err)
	}
	var named []sql.NullString
	for rows.Next() {
		var k sql.NullString
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return "", fmt.Errorf("read the keys of %s: %w", p.m.Source, err)
		}
		named = append(named, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read the keys of %s: %w", p.m.Source, err)
	}
	if keyJSON.String == "" && len(named) > 0 {
		keyJSON = named[0]
	}
	for _, k := range named {
		if !k.Valid || len(k.String) == 0 {
			return "", fmt.Errorf("changelog table %s holds a change without a primary key: a table without one has no model (its changes stay in the changelog table)", p.m.Source)
		}
		if !sameKey(k.String, keyJSON.String) {
			return "", fmt.Errorf("the primary key of the source of %s changed from %s to %s: model %s is not merged further (a primary key that changes is not supported: its changes stay in the changelog table)",
				p.m.Source, keyJSON.String, k.String, p.m.Target)
		}
	}
	// Without a key (only truncations so far) the model is made with the
	// first change.
	if keyJSON.String != "" {
		if err := json.Unmarshal([]byte(keyJSON.String), &p.keys); err != nil || len(p.keys) == 0 {
			return "", fmt.Errorf("changelog table %s: primary key %s is not a list of column names", p.m.Source, keyJSON.String)
		}
	}
	if err := c.columns(ctx, tx, p); err != nil {
		return "", err
	}
	if len(p.keys) > 0 {
		// The keys whose rows are derived again from the changelog
		// table's changes without a position (step).
		if err := exec(ctx, tx, fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_crekey AS SELECT %s FROM tl_cinc WHERE false`, p.keyList())); err != nil {
			return "", fmt.Errorf("list the keys of %s to derive again: %w", p.m.Source, err)
		}
	}
	// The latest truncation of the increment, in source order and then in
	// the log's. Positions can tie (Canal's (es, ts, id): the messages of
	// one batch made within a millisecond); a change at the truncation's
	// position goes with it only if it is before it in the same Kafka
	// partition. Across partitions the log does not order them, and the
	// change stays: the same model whichever merges the changes fall in.
	// A change without a position (Maxwell's bootstrap rows) is ordered
	// against every truncation by Kafka order alone (untruncated): below
	// every position, it would be below the floor, and a table dropped,
	// made again and bootstrapped would lose every bootstrap row.
	positioned := fmt.Sprintf("%s >= %s AND %s <> ''", pos("c."), sqltext.String(truncated.String), pos("c."))
	past := fmt.Sprintf("(%s OR %s = '' AND %s)", positioned, pos("c."), untruncated("c", "tl_cinc"))
	var cut sql.NullString
	var topic string
	var partition, offset, index int64
	err = tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT %s, ktopic, kpartition, koffset, kindex FROM tl_cinc WHERE %s = 't'
ORDER BY %s DESC, ktopic DESC, kpartition DESC, koffset DESC, kindex DESC LIMIT 1`, pos(""), sqltext.Ident(cdc.OpColumn), pos(""))).
		Scan(&cut, &topic, &partition, &offset, &index)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read the truncations of %s: %w", p.m.Source, err)
	}
	if cut.Valid {
		at := sqltext.String(cut.String)
		before := func(alias string) string {
			return fmt.Sprintf(`(%[1]sktopic = %[2]s AND %[1]skpartition = %[3]d AND (%[1]skoffset, %[1]skindex) < (%[4]d, %[5]d))`,
				alias, sqltext.String(topic), partition, offset, index)
		}
		if cut.String >= truncated.String {
			truncated = cut
			positioned = fmt.Sprintf(`(%s > %s OR %s = %s AND %s <> '' AND NOT %s)`, pos("c."), at, pos("c."), at, pos("c."), before("c."))
			past = fmt.Sprintf("(%s OR %s = '' AND %s)", positioned, pos("c."), untruncated("c", "tl_cinc"))
		}
		// Below the floor too (merged after a later truncation, read
		// first from another partition): it removes no positioned row,
		// each at or above the floor, but a row without a position that
		// it follows in its partition goes, as it would merged with it.
		if len(p.keys) > 0 {
			if err := c.truncate(ctx, tx, p, at, before); err != nil {
				return "", err
			}
		}
	}
	q := `INSERT INTO ` + ChangelogModels + ` VALUES (?, ?, ?, ?)`
	args := []any{p.m.Name, p.m.Source, keyJSON.String, truncated.String}
	if registered {
		q, args = `UPDATE `+ChangelogModels+` SET key_columns = ?, truncated_at = ? WHERE model = ?`, []any{keyJSON.String, truncated.String, p.m.Name}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return "", fmt.Errorf("register model %s: %w", p.m.Target, err)
	}
	p.floor = truncated.String
	return past, nil
}

// truncate removes from the model and its tombstones, in tx, the rows a
// truncation at position at (a string literal; before the SQL of the
// changes before it in its partition) removes: those of changes at a
// lower position, and at its own if such a change of the key is before
// it. A row without a position is removed too and its key derived again
// (tl_crekey): the row does not say which change it came from, and the
// key's changes without a position that no truncation follows in their
// partition (untruncated) stay, whichever merges they fell in. So does a
// key whose row the truncation removes: a change without a position
// merged before and beaten by one the truncation removes is its row now.
func (c *ChangelogMerger) truncate(ctx context.Context, tx *sql.Tx, p *changelogPlan, at string, before func(alias string) string) error {
	for _, t := range []string{p.target, p.tombstones} {
		gone := fmt.Sprintf(`%s < %s OR %s = '' OR %s = %s AND EXISTS (SELECT 1 FROM %s l WHERE %s AND %s = %s AND %s)`,
			pos("t."), at, pos("t."), pos("t."), at, p.log, p.keyMatch("t", "l"), pos("l."), pos("t."), before("l."))
		if err := exec(ctx, tx,
			fmt.Sprintf(`INSERT INTO tl_crekey SELECT %s FROM %s t WHERE %s`, p.keyList(), t, gone),
			fmt.Sprintf(`DELETE FROM %s t WHERE %s`, t, gone)); err != nil {
			return fmt.Errorf("truncate %s: %w", p.m.Target, err)
		}
	}
	return nil
}

// positionLive gives the increment's live changes without a position
// (livePositionSQL) their position, when it holds any: the changelog table
// is read for them alone.
func positionLive(ctx context.Context, tx *sql.Tx, p *changelogPlan) error {
	var n int64
	if err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM tl_cinc WHERE %s NOT IN ('r', 't') AND %s = ''`,
		sqltext.Ident(cdc.OpColumn), pos(""))).Scan(&n); err != nil {
		return fmt.Errorf("count the changes without a position of %s: %w", p.m.Source, err)
	}
	if n == 0 {
		return nil
	}
	if err := exec(ctx, tx, livePositionSQL(p)); err != nil {
		return fmt.Errorf("order the changes without a position of %s: %w", p.m.Source, err)
	}
	return nil
}

// candidates lists, in tl_crekey, the keys whose changes without a
// position tie with their model row or tombstone (beside those a
// truncation removed), and returns the SQL of the changes the latest per
// key is picked from: the increment's past the truncations (past), and
// the changes without a position of those keys in the whole changelog
// table, merged before or not, that no truncation follows in their
// partition. The model's row of such a key does not say which of its
// changes it came from, and the latest of them is the answer however
// the rounds cut the changes. Only those keys: the row is the latest of
// the key's changes merged, so a key with a positioned row or none has
// no change without a position merged that could beat the increment's,
// and its merge reads no more than the increment.
func candidates(ctx context.Context, tx *sql.Tx, p *changelogPlan, past string) (string, error) {
	op := sqltext.Ident(cdc.OpColumn)
	tie := func(t string) string {
		return fmt.Sprintf(`EXISTS (SELECT 1 FROM %s t WHERE %s AND %s = '')`, t, p.keyMatch("t", "c"), pos("t."))
	}
	var n int64
	if err := exec(ctx, tx, fmt.Sprintf(`INSERT INTO tl_crekey SELECT DISTINCT %s FROM tl_cinc c WHERE %s = '' AND %s <> 't' AND (%s OR %s)`,
		p.keyList(), pos("c."), op, tie(p.target), tie(p.tombstones))); err != nil {
		return "", fmt.Errorf("list the keys of %s changed without a position: %w", p.m.Source, err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tl_crekey").Scan(&n); err != nil {
		return "", fmt.Errorf("count the keys of %s changed without a position: %w", p.m.Source, err)
	}
	q := fmt.Sprintf(`SELECT * FROM tl_cinc c WHERE %s <> 't' AND %s`, op, past)
	if n == 0 {
		return q, nil
	}
	return q + fmt.Sprintf(`
	UNION ALL SELECT * FROM %s c WHERE %s = '' AND %s <> 't' AND %s AND EXISTS (SELECT 1 FROM tl_crekey r WHERE %s)`,
		p.log, pos("c."), op, untruncated("c", p.log), p.keyMatch("r", "c")), nil
}

// livePositionSQL gives each live change of the increment without a
// position the greatest position of its key's changes before it in its
// Kafka partition, in the changelog table: it applies after what came
// before it there (a delete removes it, an update replaces it), ties with
// a delete right before it (so a tombstone changes nothing), and a later
// change of its key applies. Debezium puts every change of a key in one
// partition. Live: every change but a read (a snapshot's or Maxwell's
// bootstrap row, read at some time the log does not place, and older than
// every position) and a truncation. Such changes are Debezium's tombstones
// (cdc.Decoder's debeziumTombstone) and the rows ExtractNewRecordState
// flattened without a position, which a connector sends after its
// positioned changes when the SMT is added to it: compared as "" they
// were older than the model's rows, and every update of a row the
// connector changed before was dropped. Changes below the floor (gone
// with the latest truncation) give none. Without any (a key whose changes
// were on another partition, or a source without positions) the change
// keeps none, and goes by Kafka order.
func livePositionSQL(p *changelogPlan) string {
	op := sqltext.Ident(cdc.OpColumn)
	return fmt.Sprintf(`UPDATE tl_cinc c SET %[1]s = l.at FROM (
	SELECT d.ktopic, d.kpartition, d.koffset, d.kindex, max(%[2]s) AS at FROM tl_cinc d JOIN %[3]s l
		ON %[4]s AND l.ktopic = d.ktopic AND l.kpartition = d.kpartition AND (l.koffset, l.kindex) < (d.koffset, d.kindex)
	WHERE d.%[5]s NOT IN ('r', 't') AND %[6]s = '' AND l.%[5]s <> 't' AND %[2]s <> '' AND %[2]s >= %[7]s
	GROUP BY ALL) AS l
WHERE c.ktopic = l.ktopic AND c.kpartition = l.kpartition AND c.koffset = l.koffset AND c.kindex = l.kindex`,
		sqltext.Ident(cdc.PositionColumn), pos("l."), p.log, p.keyMatch("d", "l"), op, pos("d."), sqltext.String(p.floor))
}

// untruncated is the SQL condition that no truncation in table (the
// increment or the whole changelog table) follows the change of alias in
// its Kafka partition: how a change without a position is ordered
// against a truncation. On another partition a truncation is not ordered
// against it, and it stays.
func untruncated(alias, table string) string {
	return fmt.Sprintf(`NOT EXISTS (SELECT 1 FROM %[1]s tr WHERE tr.%[2]s = 't' AND tr.ktopic = %[3]s.ktopic AND tr.kpartition = %[3]s.kpartition
	AND (tr.koffset, tr.kindex) > (%[3]s.koffset, %[3]s.kindex))`, table, sqltext.Ident(cdc.OpColumn), alias)
}

// sameKey compares two keys' JSON arrays of names.
func sameKey(a, b string) bool {
	var x, y []string
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && slices.Equal(x, y)
}

// columns sets the plan's columns from the changelog table's and brings
// the model and its tombstones up to them: created on the first merge,
// grown as the source's table gains columns (a column the source drops
// stays, null in the rows changed since, or its default where the
// changelog table has one: a change without the column reads as one from
// before it).
func (c *ChangelogMerger) columns(ctx context.Context, tx *sql.Tx, p *changelogPlan) error {
	logCols, err := duckdb.TableColumns(ctx, tx, p.m.Source)
	if err != nil {
		return err
	}
	own := map[string]bool{}
	for _, col := range append(slices.Clone(cdc.LogColumns), schema.Coordinates...) {
		own[col.Name] = true
	}
	own[cdc.UnavailableColumn] = true
	var position, sourceTime duckdb.Column
	p.columns = p.columns[:0]
	p.unavailable = false
	for _, col := range logCols {
		switch {
		case col.Name == cdc.UnavailableColumn:
			p.unavailable = true
		case col.Name == cdc.PositionColumn:
			position = col
		case col.Name == cdc.SourceTimeColumn:
			sourceTime = col
		case !own[col.Name]:
			p.columns = append(p.columns, col)
		}
	}
	p.columns = append(p.columns, position, sourceTime)
	if len(p.keys) == 0 {
		return nil
	}
	var keyCols []duckdb.Column
	for _, k := range p.keys {
		i := slices.IndexFunc(p.columns, func(col duckdb.Column) bool { return col.Name == k })
		if i < 0 {
			return fmt.Errorf("changelog table %s has no column %s of its primary key", p.m.Source, k)
		}
		keyCols = append(keyCols, p.columns[i])
	}
	for _, t := range []struct {
		name string
		cols []duckdb.Column
	}{{p.m.Target, p.columns}, {p.m.Target + cdc.TombstonesSuffix, append(keyCols, position)}} {
		have, err := duckdb.TableColumns(ctx, tx, t.name)
		if err != nil {
			return err
		}
		if len(have) == 0 {
			defs := make([]string, len(t.cols))
			for i, col := range t.cols {
				defs[i] = sqltext.Ident(col.Name) + " " + col.Type
			}
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", sqltext.Name(t.name), strings.Join(defs, ", "))); err != nil {
				return fmt.Errorf("create model table %s: %w", t.name, err)
			}
			// Registered in the transaction that creates it: the read
			// path keeps the model (and its tombstones) the operator's
			// from its first commit, its tenant_id being the source's.
			if _, err := tx.ExecContext(ctx, `UPDATE `+c.routes+` SET model_table = ? WHERE log_table = ?`,
				strings.TrimPrefix(p.m.Target, c.schema), strings.TrimPrefix(p.m.Source, c.schema)); err != nil {
				return fmt.Errorf("register model table %s: %w", p.m.Target, err)
			}
			continue
		}
		if err := duckdb.GrowColumns(ctx, tx, t.name, have, t.cols); err != nil {
			return fmt.Errorf("model %s: %w", p.m.Target, err)
		}
		if t.name == p.m.Target && gained(have, t.cols) {
			// Only when columns were gained are the changelog table's
			// defaults read, not at every merge.
			if err := fillDefaulted(ctx, tx, p, have); err != nil {
				return err
			}
		}
	}
	return nil
}

// gained says whether want holds a column have lacks.
func gained(have, want []duckdb.Column) bool {
	return slices.ContainsFunc(want, func(c duckdb.Column) bool {
		return !slices.ContainsFunc(have, func(h duckdb.Column) bool { return h.Name == c.Name })
	})
}

// fillDefaulted fills the columns the model just gained (it had have)
// that have a default in its changelog table (the source's: a column the
// source added with ALTER TABLE … ADD COLUMN … DEFAULT, which fills every
// row the source has without a change of it) with that default in every
// row the model has: they are of changes from before the column, and the
// source's rows took the default. The other columns gained read null.
// Last of the model's changes of columns: DuckDB fails the commit of a
// transaction that adds a column after writing one (duckdb.GrowColumns).
func fillDefaulted(ctx context.Context, tx *sql.Tx, p *changelogPlan, have []duckdb.Column) error {
	defaults, err := duckdb.ColumnDefaults(ctx, tx, p.m.Source)
	if err != nil || len(defaults) == 0 {
		return err
	}
	var sets []string
	for _, col := range p.columns {
		def, ok := defaults[col.Name]
		if ok && !slices.ContainsFunc(have, func(h duckdb.Column) bool { return h.Name == col.Name }) {
			sets = append(sets, sqltext.Ident(col.Name)+" = "+def)
		}
	}
	if len(sets) == 0 {
		return nil
	}
	if err := exec(ctx, tx, fmt.Sprintf("UPDATE %s SET %s", p.target, strings.Join(sets, ", "))); err != nil {
		return fmt.Errorf("model %s: fill the columns it gained with their defaults: %w", p.m.Target, err)
	}
	return nil
}

// keyMatch is "a.k1 IS NOT DISTINCT FROM b.k1 AND …": a key part may be
// NULL where the key is not the source's primary key (Debezium's
// message.key.columns naming a nullable unique key), and such a key is
// one key, as within an increment (PARTITION BY) and in reconcile; with
// = its changes never met its row, each adding one beside it.
func (p *changelogPlan) keyMatch(a, b string) string {
	parts := make([]string, len(p.keys))
	for i, k := range p.keys {
		parts[i] = a + "." + sqltext.Ident(k) + " IS NOT DISTINCT FROM " + b + "." + sqltext.Ident(k)
	}
	return strings.Join(parts, " AND ")
}

// keyList is "k1, k2" quoted.
func (p *changelogPlan) keyList() string {
	parts := make([]string, len(p.keys))
	for i, k := range p.keys {
		parts[i] = sqltext.Ident(k)
	}
	return strings.Join(parts, ", ")
}

// columnList is the model's columns quoted.
func (p *changelogPlan) columnList() string {
	parts := make([]string, len(p.columns))
	for i, col := range p.columns {
		parts[i] = sqltext.Ident(col.Name)
	}
	return strings.Join(parts, ", ")
}

// LowerWatermarks lowers, in tx, the watermarks of the models of the
// changelog tables in lowest to the lowest offset replayed into each table
// by partition (duckdb.ReplayOptions.Replayed): replayed dead letters land
// below what the models merged, and their next merges read from there. A
// change merged again changes nothing: a model keeps the latest change
// by source position.
func (c *ChangelogMerger) LowerWatermarks(ctx context.Context, tx *sql.Tx, lowest map[string]map[sink.TopicPartition]int64) error {
	var values []string
	for table, parts := range lowest {
		for tp, offset := range parts {
			values = append(values, fmt.Sprintf("(%s, %s, %d, %d)", sqltext.String(table), sqltext.String(tp.Topic), tp.Partition, offset))
		}
	}
	if len(values) == 0 {
		return nil
	}
	return lowerWatermarks(ctx, tx, fmt.Sprintf(`SELECT r.model_table, v.topic, v."partition", v.next_offset
FROM (VALUES %s) AS v(log_table, topic, "partition", next_offset) JOIN %s r ON r.log_table = v.log_table`, strings.Join(values, ", "), c.routes))
}

// SourceModel returns the changelog model to compare with source table
// database.table (reconcile --source): the model named name, when name
// is not "", or else the model of the changelog table the table's
// changes went to (the registry's source_database and source_table,
// ASCII case ignored: MySQL with lower_case_table_names names a table
// in any case), with Key the primary key its merges go by
// (tracelake_cdc_models). A table not in the registry, or whose model
// has not merged yet, is an error saying so.
func (c *ChangelogMerger) SourceModel(ctx context.Context, name, database, table string) (config.Model, error) {
	models, err := c.Models(ctx)
	if err != nil {
		return config.Model{}, err
	}
	var found []config.Model
	if name != "" {
		for _, m := range models {
			if m.Name == name || strings.TrimPrefix(m.Target, c.schema) == name {
				found = append(found, m)
			}
		}
		if len(found) == 0 {
			return config.Model{}, fmt.Errorf("no changelog model %s: the registry %s names none (has tracelake run loaded its changes?)", name, c.routes)
		}
	} else {
		rows, err := c.mg.db.QueryContext(ctx, `SELECT log_table FROM `+c.routes+
			` WHERE lower(source_database) = lower(?) AND lower(source_table) = lower(?) ORDER BY log_table`, database, table)
		if err != nil {
			return config.Model{}, fmt.Errorf("find the changelog table of %s.%s in %s: %w", database, table, c.routes, err)
		}
		var logs []string
		for rows.Next() {
			var log string
			if err := rows.Scan(&log); err != nil {
				rows.Close()
				return config.Model{}, fmt.Errorf("find the changelog table of %s.%s in %s: %w", database, table, c.routes, err)
			}
			logs = append(logs, log)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return config.Model{}, fmt.Errorf("find the changelog table of %s.%s in %s: %w", database, table, c.routes, err)
		}
		for _, m := range models {
			if slices.Contains(logs, strings.TrimPrefix(m.Source, c.schema)) && !slices.ContainsFunc(found, func(f config.Model) bool { return f.Name == m.Name }) {
				found = append(found, m)
			}
		}
		if len(found) == 0 {
			return config.Model{}, fmt.Errorf("no changelog model of source table %s.%s: the registry %s has no changelog table of it (has tracelake run loaded its changes?)", database, table, c.routes)
		}
	}
	if len(found) > 1 {
		names := make([]string, len(found))
		for i, m := range found {
			names[i] = m.Name
		}
		return config.Model{}, fmt.Errorf("%d changelog models could be %s.%s's (%s); name one with --model", len(found), database, table, strings.Join(names, ", "))
	}
	m := found[0]
	var key sql.NullString
	err = c.mg.db.QueryRowContext(ctx, `SELECT key_columns FROM `+ChangelogModels+` WHERE model = ?`, m.Name).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) || duckdb.IsMissing(err) || err == nil && key.String == "" {
		return config.Model{}, fmt.Errorf("changelog model %s has not merged a change yet (run tracelake merge)", m.Name)
	}
	if err != nil {
		return config.Model{}, fmt.Errorf("read the key of changelog model %s: %w", m.Name, err)
	}
	if err := json.Unmarshal([]byte(key.String), &m.Key); err != nil || len(m.Key) == 0 {
		return config.Model{}, fmt.Errorf("changelog model %s: primary key %s is not a list of column names", m.Name, key.String)
	}
	return m, nil
}
