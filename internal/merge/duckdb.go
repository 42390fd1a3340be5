package merge

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Merger merges models in a DuckDB database. One merge is one transaction:
// the target, the rejects, the tombstones and the watermark move together,
// so a crash at any moment leaves them consistent and a merge run twice
// changes nothing the second time. Merges of one model must not run
// concurrently (the second would fail on a write conflict and roll back).
type Merger struct {
	db  *sql.DB
	log *slog.Logger
}

// NewMerger merges in db.
func NewMerger(db *sql.DB, log *slog.Logger) *Merger { return &Merger{db: db, log: log} }

// Result is what one merge did.
type Result struct {
	Model    string
	Read     int64 // raw rows past the watermark
	Changed  int64 // target rows inserted, updated or deleted
	Rejected int64 // rows written to the model's rejects table
	Took     time.Duration
	// Uncounted: the engine did not report the counts (Databend's replies
	// here carry none), so Read, Changed and Rejected are not known.
	Uncounted bool
}

func (r Result) String() string {
	if r.Uncounted {
		return fmt.Sprintf("model %s: merged (row counts not reported by the engine), %s", r.Model, r.Took.Round(time.Millisecond))
	}
	return fmt.Sprintf("model %s: %d raw rows read, %d target rows changed, %d rejected, %s",
		r.Model, r.Read, r.Changed, r.Rejected, r.Took.Round(time.Millisecond))
}

// Merge merges the raw rows past the model's watermark into its target.
func (mg *Merger) Merge(ctx context.Context, m config.Model) (Result, error) {
	p := newPlan(m)
	res := Result{Model: m.Name}
	start := time.Now()
	err := mg.inTx(ctx, func(tx *sql.Tx) error {
		if err := mg.prepare(ctx, tx, p); err != nil {
			return err
		}
		var lo int64
		if err := tx.QueryRowContext(ctx, p.lowestSQL()).Scan(&lo); err != nil {
			return fmt.Errorf("read watermarks of model %s: %w", m.Name, err)
		}
		return mg.step(ctx, tx, p, lo, math.MaxInt64, &res)
	})
	res.Took = time.Since(start)
	return res, err
}

// Rebuild recreates the model's target (with the model's current columns)
// from the whole raw table, in one transaction: readers see the old target
// until the new one is complete. The raw table is merged in slices of
// chunk offsets, each merged into what the earlier slices built (rows whose
// keys a slice does not touch stay, the slice's latest changes replace or
// join them) — never one sort of everything. chunk <= 0 merges all at once.
func (mg *Merger) Rebuild(ctx context.Context, m config.Model, chunk int64) (Result, error) {
	res := Result{Model: m.Name}
	start := time.Now()
	err := mg.inTx(ctx, func(tx *sql.Tx) error { return mg.rebuild(ctx, tx, newPlan(m), chunk, &res) })
	res.Took = time.Since(start)
	return res, err
}

// Check rebuilds the model on the fly into a scratch table, inside a
// transaction that is always rolled back (the database is left as it was),
// and calls check with the transaction and the scratch table's name. The
// rebuild reads the raw rows the target has merged, those below the
// model's watermarks, as of the transaction's snapshot: loads land
// between merges (merge.every in a running `tracelake run`, which
// reconcile goes through), and their rows past the watermarks are not yet
// the target's to hold, while a row below them that the target lacks is a
// difference.
func (mg *Merger) Check(ctx context.Context, m config.Model, chunk int64, check func(tx *sql.Tx, rebuilt string) error) error {
	scratch := m
	scratch.Name = m.Name + "__check"
	scratch.Target = m.Target + "__check"
	p := newPlan(scratch)
	p.upto = m.Name
	tx, err := mg.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var res Result
	if err := mg.rebuild(ctx, tx, p, chunk, &res); err != nil {
		return err
	}
	return check(tx, scratch.Target)
}

func (mg *Merger) rebuild(ctx context.Context, tx *sql.Tx, p *plan, chunk int64, res *Result) error {
	m := p.m
	if _, err := tx.ExecContext(ctx, "DROP TABLE IF EXISTS "+p.target); err != nil {
		return fmt.Errorf("rebuild model %s: %w", m.Name, err)
	}
	// The target gone, prepare forgets the watermarks, rejects and
	// tombstones and creates the tables anew.
	if err := mg.prepare(ctx, tx, p); err != nil {
		return err
	}
	var top sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT max(koffset) FROM "+p.source).Scan(&top); err != nil {
		return fmt.Errorf("read %s: %w", m.Source, err)
	}
	if chunk <= 0 {
		chunk = math.MaxInt64 / 2
	}
	for lo := int64(0); lo <= top.Int64; lo += chunk {
		if err := mg.step(ctx, tx, p, lo, lo+chunk, res); err != nil {
			return err
		}
		mg.log.Debug("rebuild slice merged", "model", m.Name, "up_to_offset", lo+chunk, "read", res.Read)
	}
	return nil
}

// Pending counts the raw rows past the model's watermark: what the next
// merge would read.
func (mg *Merger) Pending(ctx context.Context, m config.Model) (int64, error) {
	return PendingIn(ctx, mg.db, m)
}

// RowQuerier reads one row: a database, or a transaction (one snapshot
// of it).
type RowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// PendingIn is Pending read in q: in a transaction, of its snapshot, as
// the counts read beside it (verify's, while run loads and merges).
func PendingIn(ctx context.Context, q RowQuerier, m config.Model) (int64, error) {
	p := newPlan(m)
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT count(*) > 0 FROM duckdb_tables() WHERE table_name = $1 AND schema_name = 'main'`,
		WatermarkTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("look up %s: %w", WatermarkTable, err)
	}
	text := "SELECT count(*) FROM " + p.source
	if exists {
		text = fmt.Sprintf(`SELECT count(*) FROM %s r LEFT JOIN %s w ON w.model = %s
  AND w.topic = json_extract_string(r.record_metadata, '$.topic') AND w."partition" = r.kpartition
WHERE r.koffset >= coalesce(w.next_offset, 0)`, p.source, WatermarkTable, sqltext.String(m.Name))
	}
	var n int64
	if err := q.QueryRowContext(ctx, text).Scan(&n); err != nil {
		return 0, fmt.Errorf("count raw rows not merged by model %s: %w", m.Name, err)
	}
	return n, nil
}

// step merges the rows with koffset in [lo, hi) past the watermark.
func (mg *Merger) step(ctx context.Context, tx *sql.Tx, p *plan, lo, hi int64, res *Result) error {
	if _, err := tx.ExecContext(ctx, p.incrementSQL(lo, hi)); err != nil {
		return fmt.Errorf("read the increment of model %s from %s: %w", p.m.Name, p.m.Source, err)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM tl_inc").Scan(&n); err != nil {
		return fmt.Errorf("count the increment of model %s: %w", p.m.Name, err)
	}
	res.Read += n
	if n > 0 {
		rejected, err := tx.ExecContext(ctx, p.rejectSQL())
		if err != nil {
			return fmt.Errorf("write rejects of model %s: %w", p.m.Name, err)
		}
		res.Rejected += rowsAffected(rejected)
		if err := exec(ctx, tx, p.latestSQL()...); err != nil {
			return fmt.Errorf("pick the latest change per key of model %s: %w", p.m.Name, err)
		}
		changed, err := tx.ExecContext(ctx, p.mergeSQL())
		if err != nil {
			return fmt.Errorf("merge into %s: %w", p.m.Target, err)
		}
		res.Changed += rowsAffected(changed)
		if failAfterMerge != nil {
			if err := failAfterMerge(); err != nil {
				return err
			}
		}
		if err := exec(ctx, tx, p.tombstoneSQL()...); err != nil {
			return fmt.Errorf("record deletes of model %s: %w", p.m.Name, err)
		}
		if err := exec(ctx, tx, p.decidingSQL()...); err != nil {
			return fmt.Errorf("record the deciding change per key of model %s: %w", p.m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, p.watermarkSQL()); err != nil {
			return fmt.Errorf("advance the watermark of model %s: %w", p.m.Name, err)
		}
	}
	return exec(ctx, tx, "DROP TABLE IF EXISTS tl_inc", "DROP TABLE IF EXISTS tl_latest")
}

// prepare creates the model's tables if absent and checks that an existing
// target has the model's columns. Without a target (a first merge, a
// rebuild, or a target dropped to be built again) it first forgets the
// model's watermarks, rejects and tombstones: they describe a target that
// is not there, and kept, a target created again held only the rows
// loaded after them.
func (mg *Merger) prepare(ctx context.Context, tx *sql.Tx, p *plan) error {
	want, err := canonicalTypes(ctx, tx, p.m)
	if err != nil {
		return err
	}
	have, err := duckdb.TableColumns(ctx, tx, p.m.Target)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		kept := []string{p.rejects}
		if p.tombstones != "" {
			kept = append(kept, p.tombstones, p.deciding)
		}
		if err := forget(ctx, tx, p.m.Name, kept...); err != nil {
			return fmt.Errorf("start model %s from its first raw row: %w", p.m.Name, err)
		}
	}
	if len(have) > 0 {
		if diff := diffColumns(have, want); len(diff) > 0 {
			return fmt.Errorf("target %s of model %s has other columns than the model (%s): after changing a model's columns run `tracelake merge --rebuild %s`",
				p.m.Target, p.m.Name, strings.Join(diff, "; "), p.m.Name)
		}
		if err := checkTombstones(ctx, tx, p, want); err != nil {
			return err
		}
		if err := fillDeciding(ctx, tx, p); err != nil {
			return err
		}
	}
	if err := exec(ctx, tx, append(p.tableSQL(), p.decidingTableSQL()...)...); err != nil {
		return fmt.Errorf("create the tables of model %s: %w", p.m.Name, err)
	}
	return nil
}

// fillDeciding creates, for a model with a version whose target was
// merged before the table of deciding changes existed, that table from
// the target and its tombstones (decidingFillSQL), once.
func fillDeciding(ctx context.Context, tx *sql.Tx, p *plan) error {
	if p.version == "" {
		return nil
	}
	have, err := duckdb.TableColumns(ctx, tx, p.m.Target+DecidingSuffix)
	if err != nil {
		return err
	}
	if len(have) > 0 {
		if !slices.ContainsFunc(have, func(c duckdb.Column) bool { return strings.EqualFold(c.Name, "tl_topic") }) {
			// Made before the table kept each change's topic: its
			// deciding changes tie with an incoming change of their
			// version, partition and offset (of another topic, or
			// merged again), which applies, as before.
			if _, err := tx.ExecContext(ctx, "ALTER TABLE "+p.deciding+" ADD COLUMN tl_topic VARCHAR"); err != nil {
				return fmt.Errorf("record the topics of the deciding changes of model %s: %w", p.m.Name, err)
			}
		}
		return nil
	}
	if _, err := tx.ExecContext(ctx, p.decidingFillSQL()); err != nil {
		return fmt.Errorf("record the keys model %s merged before it kept their deciding changes: %w", p.m.Name, err)
	}
	return nil
}

// checkTombstones checks, for a model with a version whose target
// exists, that its tombstones table is there with the model's key and
// version (want: the model's columns, canonical): the tombstones are the
// target's memory of its deletes, made with it. Absent, the model got its
// version after the target was built: the deletes merged before left
// none, and a change older than a key's delete arriving later brought the
// row back, which a rebuild (reading the delete and its version) keeps
// gone. With other columns the key or version changed, and the merge
// failed on them. Either way the target is another model's: rebuilt, it
// is this one's. A model without a version is not checked: its target
// may have been built with one, but <target>_tombstones is then not the
// model's (the configuration reserves it only with a version) to drop.
func checkTombstones(ctx context.Context, tx *sql.Tx, p *plan, want []duckdb.Column) error {
	if p.version == "" {
		return nil
	}
	m := p.m
	var keyed []duckdb.Column
	for i, c := range m.Columns {
		if slices.Contains(m.Key, c.Name) {
			keyed = append(keyed, want[i])
		}
	}
	for i, c := range m.Columns {
		if c.Name == m.Version {
			keyed = append(keyed, want[i])
		}
	}
	have, err := duckdb.TableColumns(ctx, tx, m.Target+"_tombstones")
	if err != nil {
		return err
	}
	if len(have) == 0 {
		return fmt.Errorf("target %s of model %s was built without its version %s (it has no tombstones, %s_tombstones, for the deletes it merged): after giving a model a version run `tracelake merge --rebuild %s`",
			m.Target, m.Name, m.Version, m.Target, m.Name)
	}
	if diff := diffColumns(have, keyed); len(diff) > 0 {
		return fmt.Errorf("target %s of model %s was built with another key or version (its tombstones %s_tombstones: %s): after changing a model's key or version run `tracelake merge --rebuild %s`",
			m.Target, m.Name, m.Target, strings.Join(diff, "; "), m.Name)
	}
	return nil
}

// forget deletes, in tx, what a model's merges keep beside its target:
// its watermarks, and the tables (quoted names) that describe what they
// merged. With its target gone they describe nothing, and the next
// merge starts from the first raw row.
func forget(ctx context.Context, tx *sql.Tx, model string, tables ...string) error {
	stmts := []string{watermarkTableSQL, forgetWatermarksSQL(sqltext.String(model))}
	for _, t := range tables {
		stmts = append(stmts, "DROP TABLE IF EXISTS "+t)
	}
	return exec(ctx, tx, stmts...)
}

// failAfterMerge, set by tests, fails a merge between its steps.
var failAfterMerge func() error

// canonicalTypes asks DuckDB for the canonical name of each column type
// (INT → INTEGER, DECIMAL(18, 2) → DECIMAL(18,2)), which also reports a
// type DuckDB does not know, by column.
func canonicalTypes(ctx context.Context, tx *sql.Tx, m config.Model) ([]duckdb.Column, error) {
	out := make([]duckdb.Column, len(m.Columns))
	for i, c := range m.Columns {
		var typ string
		if err := tx.QueryRowContext(ctx, "SELECT typeof(CAST(NULL AS "+c.Type+"))").Scan(&typ); err != nil {
			return nil, fmt.Errorf("merge.models %s: column %s: type %s: %w", m.Name, c.Name, c.Type, err)
		}
		out[i] = duckdb.Column{Name: c.Name, Type: typ}
	}
	return out, nil
}

// diffColumns lists what differs between the target's columns and the
// model's, in the model's order.
func diffColumns(have, want []duckdb.Column) []string {
	var diff []string
	for i, w := range want {
		switch {
		case i >= len(have):
			diff = append(diff, fmt.Sprintf("%s %s is missing", w.Name, w.Type))
		case have[i] != w:
			diff = append(diff, fmt.Sprintf("column %d is %s %s, the model says %s %s", i+1, have[i].Name, have[i].Type, w.Name, w.Type))
		}
	}
	for _, h := range have[min(len(have), len(want)):] {
		diff = append(diff, fmt.Sprintf("%s %s is not in the model", h.Name, h.Type))
	}
	return diff
}

func (mg *Merger) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := mg.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// exec runs stmts in order on db (a transaction, or the database for
// statements that commit each on its own), stopping at the first error.
func exec(ctx context.Context, db duckdb.DB, stmts ...string) error {
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func rowsAffected(r sql.Result) int64 {
	n, err := r.RowsAffected()
	if err != nil {
		return 0
	}
	return n
}

// LowerWatermarks is, for a replay of dead letters into raw tables
// (duckdb.ReplayOptions.Replayed), what lowers the watermarks of models
// to the lowest offset replayed into their source table, by partition:
// the replayed rows land at their own offsets, below what the models
// merged, and would never be read. The next merge reads again from
// there: a key's changes from that offset on are merged again, to the
// same result (the latest of them), the replayed one among them in its
// place.
func LowerWatermarks(models []config.Model) func(ctx context.Context, tx *sql.Tx, lowest map[string]map[sink.TopicPartition]int64) error {
	return func(ctx context.Context, tx *sql.Tx, lowest map[string]map[sink.TopicPartition]int64) error {
		var values []string
		for _, m := range models {
			var rows []string
			for table, parts := range lowest {
				// lowest is keyed by the sink's spelling of the raw
				// table, m.Source by the config's: DuckDB resolves both
				// to one table.
				if !sqltext.SameTable(table, m.Source) {
					continue
				}
				for tp, offset := range parts {
					rows = append(rows, fmt.Sprintf("(%s, %s, %d, %d)", sqltext.String(m.Name), sqltext.String(tp.Topic), tp.Partition, offset))
				}
			}
			if len(rows) == 0 {
				continue
			}
			// The rows from the lowered watermark on are merged again,
			// and those that do not fit rejected again: forget their
			// earlier rejects, so each is held once.
			p := newPlan(m)
			if err := exec(ctx, tx, p.rejectsTableSQL(), fmt.Sprintf(`DELETE FROM %s AS r USING (VALUES %s) AS v(model, topic, "partition", next_offset)
WHERE r.topic = v.topic AND r."partition" = v."partition" AND r."offset" >= v.next_offset`, p.rejects, strings.Join(rows, ", "))); err != nil {
				return fmt.Errorf("forget the rejects of model %s from the replayed offsets on: %w", m.Name, err)
			}
			values = append(values, rows...)
		}
		if len(values) == 0 {
			return nil
		}
		return lowerWatermarks(ctx, tx, "VALUES "+strings.Join(values, ", "))
	}
}

// lowerWatermarks lowers each model's watermark of a partition to the
// offset the rows of lowest (SQL of rows: model, topic, partition,
// offset) give it, if lower, in tx: a dead-letter replay's rows land
// below what the models merged.
func lowerWatermarks(ctx context.Context, tx *sql.Tx, lowest string) error {
	q := fmt.Sprintf(`UPDATE %s AS w SET next_offset = least(w.next_offset, v.next_offset)
FROM (%s) AS v(model, topic, "partition", next_offset)
WHERE w.model = v.model AND w.topic = v.topic AND w."partition" = v."partition"`, WatermarkTable, lowest)
	if err := exec(ctx, tx, watermarkTableSQL, q); err != nil {
		return fmt.Errorf("lower the watermarks of the replayed rows' models: %w", err)
	}
	return nil
}
