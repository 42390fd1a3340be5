package merge

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Dialects SQL prints in.
const (
	DialectDatabend = "databend"
	DialectDuckDB   = "duckdb"
)

// SQL returns the statements that maintain the model in dialect, as text
// for people (tracelake merge --print-sql) and for the Databend sink.
func SQL(m config.Model, dialect string) (string, error) {
	p := newPlan(m)
	switch dialect {
	case DialectDatabend:
		return p.databend(), nil
	case DialectDuckDB:
		var b strings.Builder
		fmt.Fprintf(&b, "-- model %s: %s -> %s (one transaction per merge; tracelake runs this)\n", m.Name, m.Source, m.Target)
		stmts := append(append(p.tableSQL(), p.decidingTableSQL()...), p.incrementSQL(0, math.MaxInt64), p.rejectSQL())
		stmts = append(stmts, p.latestSQL()...)
		stmts = append(stmts, p.mergeSQL())
		stmts = append(stmts, p.tombstoneSQL()...)
		stmts = append(stmts, p.decidingSQL()...)
		stmts = append(stmts, p.watermarkSQL())
		b.WriteString("BEGIN;\n")
		for _, s := range stmts {
			b.WriteString(s + ";\n")
		}
		b.WriteString("COMMIT;\n")
		return b.String(), nil
	}
	return "", fmt.Errorf("dialect %q: want databend or duckdb", dialect)
}

// DatabendStatements are a model's statements for Databend. They need
// no Enterprise licence and no Databend Cloud: like the DuckDB merge, the
// increment is the raw rows past the model's watermark per partition
// (tracelake_merge_watermarks), and one transaction moves everything
// together — databend-query reads its own writes inside a transaction and
// commits all tables at once (tests/sqllogictests/suites/http_handler/
// transaction/txn_merge_into.test), so a merge that fails or is killed at
// any moment leaves nothing, and a merge repeated after it reads the same
// increment again; a merge repeated after a commit reads nothing.
//
// One merge:
//
//  1. Claim: update the model's claim row in the watermark table. Two
//     merges of one model at once both rewrite that row, and Databend fails
//     the second commit with UnresolvableConflict (fuse operations/common/
//     generators/mutation_generator.rs: a mutation whose segments changed
//     since it read them), so they cannot both apply one increment;
//  2. Increment: project the raw rows past the watermark into
//     <model>_increment (a scratch table, empty outside a merge), typed,
//     each with the reason it is rejected if it is;
//  3. the rejects to <model>_rejects, 4. the latest good change per key
//     into the target (and, with a version column, the deletes into the
//     tombstones), 5. the watermark past every row of the increment,
//  6. the increment emptied.
type DatabendStatements struct {
	Setup []string // tables beside the target and the claim row, idempotent; run outside the transaction
	// Create makes the target if it is absent (idempotent, outside the
	// transaction), after Setup and, when the target was absent, Reset.
	Create []string
	Merge  []string // one merge, run between BEGIN and COMMIT
	Task   []string // a Databend Cloud task running Merge every minute, resumed
	// Absent, if set, is a query answering one count: 0 when the model's
	// target is absent (dropped to be built again, or never made). The
	// merger asks it before Setup, runs Reset after Setup when it
	// answered 0, then Create. Empty, whoever creates the target tells
	// (the dedup model's: the Databend sink's Prepare, which creates it).
	Absent string
	// Tombstones, set for a model with a version, is a query listing the
	// columns (name, type) of its tombstones table, asked when Absent
	// found the target there, before Setup (which makes the tombstones
	// if absent); TombstoneColumns are the names it must list, the
	// model's key and version, sorted. The tombstones are made with the
	// target: absent (and no reset unfinished, Unfinished: its drop
	// took them), the model got its version after the target was
	// built (and the deletes merged before left none, so a change older
	// than a key's delete arriving later brought the row back); with
	// other columns its key or version changed (and the merge failed on
	// them). Either way the target is another model's, and the merger
	// says to drop it (Target, as configured), as merge.Merger.prepare
	// says to rebuild it.
	Tombstones       string
	TombstoneColumns []string
	Target           string
	// Reset, run after Setup and before the target is created when it was
	// absent, forgets what the model's merges kept beside the target: its
	// watermarks (not its claim row), and its rejects and tombstones; the
	// increment and tombstones tables are made again with the model's
	// columns now.
	// Kept, they would say the new target holds what the one dropped
	// held, and the next merge would read only the rows loaded since.
	// Run after the CREATE, a start stopped between the two would find
	// the target at the next start and keep them.
	Reset []string
	// Forget, when set, runs after Reset in one transaction that takes
	// the model's claim: the watermarks and rejects forgotten together,
	// after the tables Reset makes anew (see Databend).
	Forget []string
	// Unfinished, set with Forget, is a query answering one count: the
	// resets of the model begun (Reset's first statement marks one in
	// the watermark table) and not finished (Forget deletes the marks).
	// The merger asks it when Absent found the target there, the
	// watermark table made first, before the tombstones' check (absent
	// tombstones are then the reset's drop) and Setup, and resets when
	// it is not 0; and again before each later merge, going through the
	// setup again when it is not 0 (see DatabendMerger.run).
	Unfinished string
}

// Databend returns the model's statements for Databend.
func Databend(m config.Model) DatabendStatements {
	p := newPlan(m)
	p.lit = sqltext.DatabendString
	inc := sqltext.Name(m.Name + "_increment")
	incTable := fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (tl_topic VARCHAR, kpartition INT, koffset BIGINT, tl_kind VARCHAR, tl_reason VARCHAR, %s)", inc, columnDefs(m.Columns))
	st := DatabendStatements{
		// The tables the DuckDB merge uses (the same SQL in both), the
		// increment, and the claim row: partition -1 of no topic, never a
		// raw row's.
		Setup:  append(p.besideTableSQL(), incTable, claimRowSQL(m.Name)),
		Create: []string{p.targetTableSQL()},
		Merge: []string{
			claimSQL(m.Name),
			p.databendIncrement(inc),
			fmt.Sprintf(`INSERT INTO %s (topic, "partition", "offset", reason, rejected_at) SELECT tl_topic, kpartition, koffset, tl_reason, NOW() FROM %s WHERE tl_reason IS NOT NULL`, p.rejects, inc),
			p.databendMerge(inc),
		},
	}
	st.Merge = append(st.Merge, p.databendTombstones(inc)...)
	st.Merge = append(st.Merge, advanceWatermarkSQL(p.lit(m.Name), inc, "tl_topic", "kpartition", "koffset"),
		"DELETE FROM "+inc)
	// Reset runs when the target is absent. The increment and the
	// tombstones have the model's columns (the tombstones its key and
	// version) as they were when the setup first made them: a target is
	// dropped to be built again after the model's columns changed, and
	// kept, they made every merge fail on a column they lack (or cast a
	// value to a type the model no longer has). They are dropped and made
	// again with the model's columns now: the increment is empty outside
	// a merge (one transaction), and the tombstones describe the target
	// dropped. The configuration keeps <name>_increment the model's own
	// (config validateModelTables), as the drop would take any table so
	// named.
	//
	// Then Forget, one transaction: the claim, the watermarks (not the
	// claim row) and the rejects (columns of their own, emptied). The
	// watermarks go last, with the rejects, and the claim makes a merge
	// of the model in flight either commit before them or fail: two
	// processes may both find the target absent, and one make it and
	// merge while the other resets. Forgotten first, as until 2026-12-07,
	// the other's merge then committed its watermarks, and the tombstones
	// and rejects it wrote beside them were dropped after: below those
	// watermarks they were never read again, so a key's delete was lost
	// (a change older than it, arriving later, brought the row back) and
	// so were the rejects. Forgotten last, whatever merged before is read
	// again from the first raw row, to the same rows (one per key, the
	// merge's), tombstones and rejects (each once: deleted with the
	// watermarks).
	//
	// A merger stopped or failing between Reset's drops and Forget's
	// commit may find the target there next time: another process made
	// it meanwhile, and that process's merges may have written
	// tombstones the drops took while their watermarks stay. So Reset
	// first marks the reset begun in the watermark table (partition -2,
	// never a raw row's, committed before the drops; again after the
	// tombstones' drop, see Reset below), Forget deletes the
	// model's marks with the watermarks, and any merger's next setup
	// finding a mark resets, target there or not. Kept only in the
	// memory of the merger that began it (until 2026-12-07), the reset
	// was never finished once that process ended (killed, or `tracelake
	// merge` ended by the failure), and a deleted row came back with an
	// older change.
	st.Absent = targetCountSQL(m.Target)
	st.Forget = []string{claimSQL(m.Name), forgetWatermarksSQL(p.lit(m.Name)), resetsDoneSQL(p.lit(m.Name)), "DELETE FROM " + p.rejects}
	st.Unfinished = fmt.Sprintf(`SELECT count(*) FROM %s WHERE model = %s AND "partition" = %d`, WatermarkTable, p.lit(m.Name), resetPartition)
	if p.tombstones != "" {
		st.Tombstones, st.Target = sqltext.DatabendColumns(m.Target+"_tombstones"), m.Target
		for _, c := range p.keys {
			st.TombstoneColumns = append(st.TombstoneColumns, c.Name)
		}
		st.TombstoneColumns = append(st.TombstoneColumns, m.Version)
		slices.Sort(st.TombstoneColumns)
	}
	st.Reset = []string{resetBegunSQL(p.lit(m.Name)), "DROP TABLE IF EXISTS " + inc, incTable}
	if p.tombstones != "" {
		// Marked again after the drop: another process's reset begun at
		// once may finish (its Forget deleting every mark of the model,
		// this one's too) and merge between this reset's first mark and
		// its drop, which then takes that merge's tombstones. The first
		// mark covers a stop between the two.
		st.Reset = append(st.Reset, "DROP TABLE IF EXISTS "+p.tombstones, resetBegunSQL(p.lit(m.Name)), p.tombstonesTableSQL())
	}
	task := sqltext.Name(m.Name + "_merge")
	body := "BEGIN\n" + indent("BEGIN;\n"+strings.Join(st.Merge, ";\n")+";\nCOMMIT;") + "\nEND"
	st.Task = []string{
		// tests/sqllogictests/suites/task/task_ddl_transaction_test.test:
		// a task body may hold a transaction; a new task is Suspended
		// until resumed (task_ddl_test.test).
		fmt.Sprintf("CREATE TASK IF NOT EXISTS %s WAREHOUSE = 'default' SCHEDULE = 60 SECOND\nAS %s", task, body),
		// A task made by an earlier setup keeps the SQL of the model
		// then: after its columns, paths or key changed (its target
		// dropped to be built again, its tables made again by Reset),
		// it would go on merging the old way. Its SQL is set to the
		// model's merge now (ALTER TASK … MODIFY AS takes the SQL
		// CREATE TASK does: ast AlterTaskOptions::ModifyAs(TaskSql)).
		fmt.Sprintf("ALTER TASK %s MODIFY AS %s", task, body),
		fmt.Sprintf("ALTER TASK %s RESUME", task),
	}
	return st
}

// targetCountSQL counts the tables named target (name or db.name, as
// merge.models allows) in Databend's system.tables, which lists the
// tables there are: not views, not dropped ones (storages/system/src/
// tables_table.rs, "tables" is TablesTable without history; its filters
// on database and name are pushed down to the catalog). A table name
// quoted when created is stored as written, so the name is compared as
// it is.
func targetCountSQL(target string) string {
	db, name := "current_database()", target
	if i := strings.IndexByte(target, '.'); i >= 0 {
		db, name = sqltext.DatabendString(target[:i]), target[i+1:]
	}
	return fmt.Sprintf("SELECT count(*) FROM system.tables WHERE database = %s AND name = %s", db, sqltext.DatabendString(name))
}

// databend renders the model's Databend statements as a script.
func (p *plan) databend() string {
	m := p.m
	return Databend(m).Script(fmt.Sprintf("model %s: %s -> %s (tracelake merge runs this; no streams, no licence needed)", m.Name, m.Source, m.Target))
}

// Script renders the statements for people (tracelake merge --print-sql),
// under the comment title, in the order they run: the query for the
// target, the setup, the reset, the target's creation, one merge
// transaction, and the task if there is one.
func (st DatabendStatements) Script(title string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- %s\n", title)
	if st.Absent != "" {
		b.WriteString("-- first, is the target there (0: dropped to be built again, or never made)?\n" + st.Absent + ";\n")
	}
	if st.Unfinished != "" {
		b.WriteString("-- when it is: a reset begun and not finished (not 0) is finished, target there or not\n" + watermarkTableSQL + ";\n" + st.Unfinished + ";\n")
	}
	if st.Tombstones != "" {
		b.WriteString("-- when it is, its tombstones must be there with the model's key and version (" + strings.Join(st.TombstoneColumns, ", ") + "), or absent with a reset unfinished: else drop the target to build it again\n" + st.Tombstones + ";\n")
	}
	for _, q := range st.Setup {
		b.WriteString(q + ";\n")
	}
	if len(st.Reset) > 0 {
		when := "when the sink is about to create the target anew (dropped to be built again), after the setup"
		if st.Absent != "" {
			when = "when the target's count above was 0 (or a reset's not), before the target is made anew"
		}
		b.WriteString("\n-- " + when + ": forget what the merges kept beside the target that was there, so that the next merge reads from the first raw row\n")
		for _, q := range st.Reset {
			b.WriteString(q + ";\n")
		}
		if len(st.Forget) > 0 {
			b.WriteString("BEGIN;\n")
			for _, q := range st.Forget {
				b.WriteString(q + ";\n")
			}
			b.WriteString("COMMIT;\n")
		}
	}
	if len(st.Create) > 0 {
		b.WriteString("\n-- the target\n")
		for _, q := range st.Create {
			b.WriteString(q + ";\n")
		}
	}
	b.WriteString("\n-- one merge, one transaction\nBEGIN;\n")
	for _, q := range st.Merge {
		b.WriteString(q + ";\n")
	}
	b.WriteString("COMMIT;\n")
	if len(st.Task) > 0 {
		b.WriteString("\n-- with tracelake merge --task (Databend Cloud): the same merge, scheduled inside Databend\n")
		for _, q := range st.Task {
			b.WriteString(q + ";\n")
		}
	}
	return b.String()
}

// databendPath renders a JSON path ($.a.b[0]) as Databend variant access,
// its keys as Databend literals (sqltext.DatabendString).
func databendPath(doc, path string) string {
	var b strings.Builder
	b.WriteString(doc)
	rest := strings.TrimPrefix(path, "$")
	for rest != "" {
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			b.WriteString(rest[:end+1])
			rest = rest[end+1:]
			continue
		}
		rest = rest[1:] // past the dot
		if rest[0] == '"' {
			// A quoted key: ."gen_ai.request.model"
			end := strings.IndexByte(rest[1:], '"') + 1
			b.WriteString("[" + sqltext.DatabendString(rest[1:end]) + "]")
			rest = rest[end+1:]
			continue
		}
		end := strings.IndexAny(rest, ".[")
		if end < 0 {
			end = len(rest)
		}
		b.WriteString("[" + sqltext.DatabendString(rest[:end]) + "]")
		rest = rest[end:]
	}
	return b.String()
}

// databendTryCast is the Databend SQL casting the variant v to typ as the
// DuckDB merge casts the path's text (TRY_CAST of json_extract_string), so
// that a model gives the same rows and rejects on both sinks. Databend's
// TRY_CAST of a variant reads it with the jsonb crate, which differs from
// that where a JSON boolean meets a number or a number a boolean
// (functions/src/scalars/variant.rs try_to_<number>, try_to_boolean;
// scalars/decimal/src/cast_from_jsonb.rs; jsonb src/functions/scalar.rs
// to_i64, to_f64, to_bool):
//   - into a number a JSON boolean is 1 or 0 on Databend, while DuckDB
//     cannot cast the text "true" to a number: it does not cast here either
//     (a key of true would otherwise be the key 1, overwriting its row);
//   - into a boolean Databend takes a JSON boolean and the strings
//     true/yes/false/no, DuckDB's text cast also t/y/1 and f/n/0 (so the
//     numbers 1 and 0), in any case and without spaces: the variant's text
//     is matched against DuckDB's words.
func databendTryCast(v, typ string) string {
	base, _, _ := strings.Cut(strings.ToUpper(strings.TrimSpace(typ)), "(")
	switch strings.TrimSpace(base) {
	case "BOOLEAN", "BOOL", "LOGICAL":
		return fmt.Sprintf("CASE WHEN LOWER(%[1]s::VARCHAR) IN ('true', 't', 'yes', 'y', '1') THEN TRUE WHEN LOWER(%[1]s::VARCHAR) IN ('false', 'f', 'no', 'n', '0') THEN FALSE END", v)
	case "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "HUGEINT", "INT1", "INT2", "INT4", "INT8", "INT16", "INT32", "INT64",
		"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "UINT8", "UINT16", "UINT32", "UINT64",
		"FLOAT", "FLOAT4", "FLOAT8", "FLOAT32", "FLOAT64", "REAL", "DOUBLE", "DECIMAL", "NUMERIC":
		// JSON_TYPEOF answers BOOLEAN for a JSON boolean (jsonb src/constants.rs TYPE_BOOLEAN).
		return fmt.Sprintf("CASE WHEN JSON_TYPEOF(%[1]s) = 'BOOLEAN' THEN NULL ELSE TRY_CAST(%[1]s AS %[2]s) END", v, typ)
	}
	return fmt.Sprintf("TRY_CAST(%s AS %s)", v, typ)
}

// databendIncrement projects the raw rows past the model's watermark into
// the scratch table inc.
func (p *plan) databendIncrement(inc string) string {
	m := p.m
	var inner string
	if m.Format == config.FormatDebezium {
		env := "COALESCE(raw_data['payload'], raw_data)"
		op := env + "['op']::VARCHAR"
		inner = fmt.Sprintf("%s AS tl_op, IF(%s = 'd', %s['before'], %s['after']) AS tl_doc,\n      CASE WHEN raw_data IS NULL THEN '%s' WHEN %s = 'd' THEN '%s' WHEN %s IN ('c', 'r', 'u') THEN '%s' ELSE '%s' END AS tl_kind",
			op, op, env, env, kindSkip, op, kindDelete, op, kindUpsert, kindBad)
	} else {
		inner = fmt.Sprintf("raw_data AS tl_doc, CASE WHEN raw_data IS NULL THEN '%s' ELSE %s END AS tl_kind",
			kindSkip, p.kindExpr(databendPath("raw_data", m.Action.Path)+"::VARCHAR"))
	}
	proj := list(m.Columns, ", ", func(c config.Column, i int) string {
		v := databendPath("tl_doc", c.Path)
		if strings.EqualFold(c.Type, "JSON") || strings.EqualFold(c.Type, "VARIANT") {
			return fmt.Sprintf("%s AS tl_raw_%d, %s AS %s", v, i, v, sqltext.Ident(c.Name))
		}
		return fmt.Sprintf("%s::VARCHAR AS tl_raw_%d, %s AS %s", v, i, databendTryCast(v, c.Type), sqltext.Ident(c.Name))
	})
	topic := "r.record_metadata['topic']::VARCHAR"
	return fmt.Sprintf(`INSERT INTO %s (tl_topic, kpartition, koffset, tl_kind, tl_reason, %s)
SELECT tl_topic, kpartition, koffset, tl_kind, %s AS tl_reason, %s FROM (
  SELECT *, %s FROM (
    SELECT r.kpartition, r.koffset, %s AS tl_topic,
      %s
    FROM %s AS r LEFT JOIN %s AS w ON w.model = %s AND w.topic = %s AND w."partition" = r.kpartition
    WHERE r.koffset >= COALESCE(w.next_offset, 0)
  )
)`, inc, p.columnList(""), p.reasonExpr(false), p.columnList(""), proj, topic, inner, p.source, WatermarkTable, p.lit(m.Name), topic)
}

// databendLatest selects the deciding change per key of the increment (latestQuery),
// without the changes older than the key's last delete.
func (p *plan) databendLatest(inc string) string {
	q := p.latestQuery(inc, "kpartition", "koffset", "")
	if p.version == "" {
		return q
	}
	return fmt.Sprintf(`SELECT l.* FROM (
  %s
) AS l LEFT JOIN %s AS tb ON %s
WHERE tb.%s IS NULL OR l.%s >= tb.%s`, q, p.tombstones, p.keyMatch("tb", "l"), p.version, p.version, p.version)
}

func (p *plan) databendMerge(inc string) string {
	return fmt.Sprintf("MERGE INTO %s AS t USING (\n%s\n) AS s ON %s\n%s", p.target, p.databendLatest(inc), p.keyMatch("t", "s"), p.mergeClauses())
}

// databendTombstones remember each key's last delete and forget it once a
// newer change re-creates the key, as tombstoneSQL does in DuckDB.
func (p *plan) databendTombstones(inc string) []string {
	if p.version == "" {
		return nil
	}
	cols := p.keyList() + ", " + p.version
	sCols := list(append(slices.Clone(p.keys), config.Column{Name: p.m.Version}), ", ",
		func(c config.Column, _ int) string { return "s." + sqltext.Ident(c.Name) })
	return []string{
		fmt.Sprintf(`MERGE INTO %s AS d USING (
%s
) AS s ON %s
WHEN MATCHED AND s.tl_kind = '%s' AND s.%s > d.%s THEN UPDATE SET %s = s.%s
WHEN MATCHED AND s.tl_kind <> '%s' AND s.%s > d.%s THEN DELETE
WHEN NOT MATCHED AND s.tl_kind = '%s' THEN INSERT (%s) VALUES (%s)`, p.tombstones, p.databendLatest(inc), p.keyMatch("d", "s"),
			kindDelete, p.version, p.version, p.version, p.version,
			kindDelete, p.version, p.version,
			kindDelete, cols, sCols),
	}
}

// claimRowSQL adds model's claim row to the watermark table if absent:
// partition -1 of no topic, never a raw row's.
func claimRowSQL(model string) string {
	return fmt.Sprintf(`MERGE INTO %s AS w USING (SELECT %s AS model) AS s ON w.model = s.model AND w."partition" = -1
WHEN NOT MATCHED THEN INSERT (model, topic, "partition", next_offset, merged_at) VALUES (s.model, '', -1, 0, NOW())`, WatermarkTable, sqltext.DatabendString(model))
}

// resetPartition is the partition of a model's watermark rows marking a
// reset begun and not finished (DatabendStatements.Unfinished): never a
// raw row's, nor the claim row's (-1).
const resetPartition = -2

// resetBegunSQL marks a reset of model (a literal) begun.
func resetBegunSQL(model string) string {
	return fmt.Sprintf(`INSERT INTO %s (model, topic, "partition", next_offset, merged_at) VALUES (%s, '', %d, 0, NOW())`, WatermarkTable, model, resetPartition)
}

// resetsDoneSQL deletes the marks of model's resets begun (a literal).
func resetsDoneSQL(model string) string {
	return fmt.Sprintf(`DELETE FROM %s WHERE model = %s AND "partition" = %d`, WatermarkTable, model, resetPartition)
}

// claimSQL claims model for one merge transaction by rewriting its claim
// row: of two merges at once, Databend fails the second commit.
func claimSQL(model string) string {
	return fmt.Sprintf(`UPDATE %s SET merged_at = NOW() WHERE model = %s AND "partition" = -1`, WatermarkTable, sqltext.DatabendString(model))
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// Execer runs statements in Databend (the Databend sink).
type Execer interface {
	// Exec runs statements one after the other in one session.
	Exec(ctx context.Context, statements ...string) error
	// ExecTx runs statements in one transaction: all commit or none.
	ExecTx(ctx context.Context, statements ...string) error
	// QueryText runs a query and returns its rows as text.
	QueryText(ctx context.Context, q string) ([][]string, error)
}

// DatabendMerger runs models' Databend statements against the Databend
// sink: on first use the tables, then at each Merge one merge
// transaction. With task it creates each model's Databend task instead
// and leaves the merging to Databend.
type DatabendMerger struct {
	db   Execer
	task bool
	set  map[string]bool // models whose setup ran
}

// NewDatabendMerger returns a merger running on db; with task it creates
// each model's Databend task (Databend Cloud schedules it) and does not
// merge itself: two schedules merging one model would only conflict.
func NewDatabendMerger(db Execer, task bool) *DatabendMerger {
	return &DatabendMerger{db: db, task: task, set: map[string]bool{}}
}

// Merge merges the model's raw rows past its watermark once. Databend does
// not report row counts through statements' replies here, so Result is
// Uncounted. A target found absent when the merger sets the model up
// (dropped to be built again) is made from the first raw row, as on
// DuckDB (Merger.prepare): see setUp.
func (d *DatabendMerger) Merge(ctx context.Context, m config.Model) (Result, error) {
	return d.run(ctx, m.Name, Databend(m))
}

// Dedup merges an OpenTelemetry table's rows past the dedup model's
// watermark into its target once (Dedup.Databend). It never runs as a
// task: the model is tracelake's own, merged by merge.every.
func (d *DatabendMerger) Dedup(ctx context.Context, dd Dedup) (Result, error) {
	if d.task {
		return Result{}, fmt.Errorf("model %s: --task is for merge.models; the OpenTelemetry tables' dedup model is merged by tracelake (merge.every)", dd.Target())
	}
	return d.run(ctx, dd.Target(), dd.Databend())
}

// DedupCounts counts what verify reports of an OpenTelemetry table's
// copies, as Merger.Counts does on DuckDB.
func (d *DatabendMerger) DedupCounts(ctx context.Context, dd Dedup) (DedupCounts, error) {
	var c DedupCounts
	rows, err := d.db.QueryText(ctx, dd.DatabendCountsSQL())
	if err != nil {
		return c, fmt.Errorf("count %s and %s: %w", dd.Name, dd.Target(), err)
	}
	if len(rows) != 1 || len(rows[0]) != 4 {
		return c, fmt.Errorf("count %s and %s: %d rows answered, want one of 4 counts", dd.Name, dd.Target(), len(rows))
	}
	for i, dst := range []*int64{&c.Rows, &c.Identities, &c.Kept, &c.Pending} {
		if *dst, err = strconv.ParseInt(rows[0][i], 10, 64); err != nil {
			return c, fmt.Errorf("count %s and %s: %w", dd.Name, dd.Target(), err)
		}
	}
	return c, nil
}

// run sets the model up on first use (with its task, in task mode) and
// otherwise runs one merge transaction.
func (d *DatabendMerger) run(ctx context.Context, name string, st DatabendStatements) (Result, error) {
	start := time.Now()
	if d.set[name] && st.Unfinished != "" {
		// A reset begun by another process and left unfinished (it
		// stopped or failed before its Forget) may have dropped the
		// tombstones this merger's merges wrote while their watermarks
		// stay: merged on, a deleted row comes back with an older
		// change. Its mark sends this merger through its setup again,
		// which finishes the reset; a reset still running elsewhere is
		// only done twice, as two setups at once do.
		unfinished, err := d.resetUnfinished(ctx, name, st)
		if err != nil {
			return Result{}, err
		}
		if unfinished {
			d.set[name] = false
		}
	}
	if !d.set[name] {
		if err := d.setUp(ctx, name, st); err != nil {
			return Result{}, err
		}
		d.set[name] = true
	}
	if d.task {
		return Result{Model: name, Took: time.Since(start)}, nil
	}
	if err := d.db.ExecTx(ctx, st.Merge...); err != nil {
		return Result{}, fmt.Errorf("merge model %s in Databend: %w", name, err)
	}
	return Result{Model: name, Took: time.Since(start), Uncounted: true}, nil
}

// checkTombstones asks for the columns of the model's tombstones (its
// target there) and refuses a target built by another model: without
// tombstones, or with other columns than the model's key and version
// (DatabendStatements.Tombstones). With a reset unfinished, tombstones
// absent are that reset's drop, not a target built without a version:
// the reset makes them again.
func (d *DatabendMerger) checkTombstones(ctx context.Context, name string, st DatabendStatements, unfinished bool) error {
	rows, err := d.db.QueryText(ctx, st.Tombstones)
	if err != nil {
		return fmt.Errorf("read the tombstones' columns of model %s in Databend: %w", name, err)
	}
	var have []string
	for _, r := range rows {
		if len(r) > 0 {
			have = append(have, r[0])
		}
	}
	slices.Sort(have)
	switch {
	case len(have) == 0 && unfinished:
		return nil
	case len(have) == 0:
		return fmt.Errorf("model %s has a version, and its target was built without one (it has no tombstones for the deletes it merged): drop the target %s, and the next merge builds it again from the first raw row", name, st.Target)
	case !slices.Equal(have, st.TombstoneColumns):
		return fmt.Errorf("model %s: its target was built with another key or version (its tombstones have %s, the model %s): drop the target %s, and the next merge builds it again from the first raw row",
			name, strings.Join(have, ", "), strings.Join(st.TombstoneColumns, ", "), st.Target)
	}
	return nil
}

// count runs q, a query answering one count.
func (d *DatabendMerger) count(ctx context.Context, q string) (int64, error) {
	rows, err := d.db.QueryText(ctx, q)
	if err != nil {
		return 0, err
	}
	if len(rows) != 1 || len(rows[0]) != 1 {
		return 0, fmt.Errorf("%d rows answered, want one count", len(rows))
	}
	return strconv.ParseInt(rows[0][0], 10, 64)
}

// resetUnfinished asks whether a reset of the model was begun and not
// finished, by any merger (st.Unfinished).
func (d *DatabendMerger) resetUnfinished(ctx context.Context, name string, st DatabendStatements) (bool, error) {
	n, err := d.count(ctx, st.Unfinished)
	if err != nil {
		return false, fmt.Errorf("look for an unfinished reset of model %s in Databend: %w", name, err)
	}
	return n > 0, nil
}

// setUp runs what precedes the model's first merge in this process, in
// the order Script prints it: the query for the target (st.Absent), with
// the target there the query for an unfinished reset (st.Unfinished)
// and the check of its tombstones (st.Tombstones), the setup, the reset
// if the target was absent or a reset unfinished, the target's
// creation, and
// in task mode the task (last, so that the task's first merge reads from
// the first row too).
//
// The reset runs before the target is made again, outside a transaction
// (databend-query commits an open transaction before a CREATE TABLE:
// interpreters/interpreter.rs auto_commit_if_not_allowed_in_transaction):
// a merger stopped between the two finds the target absent at its next
// start and resets again, which is idempotent. Run after the CREATE, a
// merger stopped between them would leave the new target beside the
// watermarks of the one dropped, for good.
func (d *DatabendMerger) setUp(ctx context.Context, name string, st DatabendStatements) error {
	absent, unfinished := false, false
	if st.Absent != "" {
		n, err := d.count(ctx, st.Absent)
		if err != nil {
			return fmt.Errorf("look for the target of model %s in Databend: %w", name, err)
		}
		absent = n == 0
	}
	if !absent && st.Unfinished != "" {
		// A reset begun and not finished, by any merger, is finished
		// whatever the target's count says (DatabendStatements.
		// Unfinished). Asked before the tombstones' check, which a
		// reset stopped between their drop and their creation fails:
		// the watermark table, where the marks are, is made first
		// (Setup would make the tombstones the check looks for).
		if err := d.db.Exec(ctx, watermarkTableSQL); err != nil {
			return fmt.Errorf("look for an unfinished reset of model %s in Databend: %w", name, err)
		}
		var err error
		if unfinished, err = d.resetUnfinished(ctx, name, st); err != nil {
			return err
		}
	}
	if !absent && st.Tombstones != "" {
		if err := d.checkTombstones(ctx, name, st, unfinished); err != nil {
			return err
		}
	}
	absent = absent || unfinished
	if err := d.db.Exec(ctx, st.Setup...); err != nil {
		return fmt.Errorf("set up model %s in Databend: %w", name, err)
	}
	if absent && len(st.Reset) > 0 {
		if err := d.db.Exec(ctx, st.Reset...); err != nil {
			return fmt.Errorf("start model %s, its target to be made anew, from the first raw row: %w", name, err)
		}
		if len(st.Forget) > 0 {
			if err := d.db.ExecTx(ctx, st.Forget...); err != nil {
				return fmt.Errorf("start model %s, its target to be made anew, from the first raw row: forget its watermarks and rejects: %w", name, err)
			}
		}
	}
	if err := d.db.Exec(ctx, st.Create...); err != nil {
		return fmt.Errorf("create the target of model %s in Databend: %w", name, err)
	}
	if d.task {
		if err := d.db.Exec(ctx, st.Task...); err != nil {
			return fmt.Errorf("create the Databend task of model %s: %w", name, err)
		}
	}
	return nil
}
