package merge

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Dedup is the built-in model of an OpenTelemetry table: the table's rows
// once each in <table>_dedup. OTLP has no request id, so a client that
// retries after a lost answer (or a Collector whose Kafka produce is
// retried) stores a request twice; the copies are the same spans, log
// records or points. A span is identified by (tenant_id, trace_id,
// span_id); a log record or a point, which have no id, by a hash of all
// its columns but the Kafka coordinates, and so is a span without an id
// (Identity). The first copy (lowest coordinates) is kept.
type Dedup struct {
	Table *schema.Table
	Name  string // the source table's name (sink.table)
}

// Target is the deduplicated table's name.
func (d Dedup) Target() string { return d.Name + "_dedup" }

// model is the name the watermarks are kept under.
func (d Dedup) model() string { return d.Target() }

// Identity is the columns that identify a row (a span's tenant, trace
// and span id); nil for a table whose rows have no id, identified by all
// their columns but the coordinates. A row null in one of them has no
// identity and is identified by its content too: a span whose trace or
// span id is all zero (invalid in OTLP, stored null). Joined, the ids of
// all such spans of a trace were one key, and the model kept one of
// them. Every sink keys a row so (keyOf in SQL; iceberg.Sink.Dedup).
func (d Dedup) Identity() []string {
	if d.Table.Name == "otel_spans" {
		return []string{"tenant_id", "trace_id", "span_id"}
	}
	return nil
}

// keyOf is the SQL of a row's key, over columns prefixed by alias ("s.",
// or "" for none): its ids joined (idsKey) or, for a row without an
// identity (Identity), content: the dialect's hash of its content. The
// key of a span with its ids is the one the releases before content keys
// for spans made, so the keys a target holds stay valid.
func (d Dedup) keyOf(content func(alias string) string, alias string) string {
	if d.Identity() == nil {
		return content(alias)
	}
	return "CASE WHEN " + d.idless(alias) + " THEN " + content(alias) + " ELSE " + d.idsKey(alias) + " END"
}

// idsKey is a row's identity joined by '/', in DuckDB's SQL and
// Databend's alike. concat_ws skips a null on both (Databend:
// functions/src/scalars/string_multi_args.rs, the nullable concat_ws), so
// the key is never NULL, which NOT IN would turn into "insert nothing";
// a row null in an id is keyed by its content anyway.
func (d Dedup) idsKey(alias string) string {
	return "concat_ws('/', " + alias + strings.Join(d.Identity(), ", "+alias) + ")"
}

// idless is the condition, alike in DuckDB and Databend, that a row has
// no identity: a null in one of its identity columns.
func (d Dedup) idless(alias string) string {
	var nulls []string
	for _, c := range d.Identity() {
		nulls = append(nulls, alias+c+" IS NULL")
	}
	return "(" + strings.Join(nulls, " OR ") + ")"
}

// rekeySQL is the UPDATE that carries the target's rows without an
// identity that a release before content keys for spans merged over to
// their content key (content: the dialect's): it kept them under their
// ids joined, the nulls skipped (one key for all of a trace's), and
// against that key a copy sent again after the upgrade (a client's
// retry), keyed by its content now, would be kept twice. Only rows null
// in an id whose key is still that join are written: none once carried
// over. The filter on the null ids lets an engine skip the parts of a
// large target its statistics show have none. No row with its ids is
// touched.
func (d Dedup) rekeySQL(content func(alias string) string, target string) string {
	return fmt.Sprintf(`UPDATE %s SET dedup_key = %s
WHERE %s AND dedup_key = %s`, target, content(""), d.idless(""), d.idsKey(""))
}

// duckdbContent is the hash of a row's content in DuckDB's SQL: the md5
// of its JSON, 128 bits, so billions of distinct rows do not collide (a
// 64-bit hash would, by the birthday bound).
func (d Dedup) duckdbContent(alias string) string {
	var cols []string
	for _, c := range d.Table.Columns {
		if schema.InContentKey(c.Name) {
			cols = append(cols, sqltext.Ident(c.Name)+" := "+alias+sqltext.Ident(c.Name))
		}
	}
	return "md5(to_json(struct_pack(" + strings.Join(cols, ", ") + "))::VARCHAR)"
}

// keyExpr is the SQL of a row's key in DuckDB, over the source's columns.
func (d Dedup) keyExpr() string { return d.keyOf(d.duckdbContent, "") }

// DedupResult is what one deduplicating merge did.
type DedupResult struct {
	Target         string
	Read, Inserted int64 // rows of the increment, and those new to the target
	Took           time.Duration
}

func (r DedupResult) String() string {
	return fmt.Sprintf("model %s: %d rows read, %d inserted, %d duplicates left out, %s",
		r.Target, r.Read, r.Inserted, r.Read-r.Inserted, r.Took.Round(time.Millisecond))
}

// Dedup merges the source's rows past the model's watermark into the
// target, each identity once, in one transaction with the watermark: a
// merge repeated after a crash inserts nothing twice.
func (mg *Merger) Dedup(ctx context.Context, d Dedup) (DedupResult, error) {
	res := DedupResult{Target: d.Target()}
	start := time.Now()
	src, dst := sqltext.Name(d.Name), sqltext.Name(d.Target())
	model := sqltext.String(d.model())
	err := mg.inTx(ctx, func(tx *sql.Tx) error {
		have, err := duckdb.TableColumns(ctx, tx, d.Target())
		if err != nil {
			return err
		}
		if len(have) == 0 {
			// A target dropped to be built again: its watermarks say
			// what the one dropped held.
			if err := forget(ctx, tx, d.model()); err != nil {
				return fmt.Errorf("start %s from the first row of %s: %w", d.Target(), d.Name, err)
			}
		}
		if err := exec(ctx, tx,
			watermarkTableSQL,
			fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s AS SELECT *, ''::VARCHAR AS dedup_key FROM %s LIMIT 0`, dst, src),
		); err != nil {
			return fmt.Errorf("create %s: %w", d.Target(), err)
		}
		if err := mg.growTarget(ctx, tx, d); err != nil {
			return err
		}
		if err := exec(ctx, tx,
			fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_dedup AS
				SELECT s.*, %s AS dedup_key FROM %s s LEFT JOIN %s w
					ON w.model = %s AND w.topic = s.ktopic AND w."partition" = s.kpartition
				WHERE s.koffset >= coalesce(w.next_offset, 0)`, d.keyExpr(), src, WatermarkTable, model),
		); err != nil {
			return fmt.Errorf("read the increment of %s: %w", d.Name, err)
		}
		defer tx.ExecContext(ctx, `DROP TABLE IF EXISTS tl_dedup`) //nolint:errcheck // temp table
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM tl_dedup`).Scan(&res.Read); err != nil {
			return err
		}
		if res.Read == 0 {
			return nil
		}
		if err := mg.rekeyIdless(ctx, tx, d); err != nil {
			return err
		}
		// By name: the target of an older release has the source's added
		// columns after its dedup_key (growTarget).
		r, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO %s BY NAME SELECT * EXCLUDE (tl_rn) FROM (
				SELECT *, row_number() OVER (PARTITION BY dedup_key ORDER BY ktopic, kpartition, koffset, kindex) AS tl_rn FROM tl_dedup)
			WHERE tl_rn = 1 AND dedup_key NOT IN (SELECT dedup_key FROM %s)`, dst, dst))
		if err != nil {
			return fmt.Errorf("insert into %s: %w", d.Target(), err)
		}
		res.Inserted = rowsAffected(r)
		if _, err := tx.ExecContext(ctx, advanceWatermarkSQL(model, "tl_dedup", "ktopic", "kpartition", "koffset")); err != nil {
			return fmt.Errorf("advance the watermark of %s: %w", d.Target(), err)
		}
		return nil
	})
	res.Took = time.Since(start)
	return res, err
}

// rekeyIdless carries the target's rows without an identity kept by an
// older release over to their content key (rekeySQL), when the increment
// holds such rows: only then is a key compared with theirs, and the
// update's scan of the target is not paid by every merge.
func (mg *Merger) rekeyIdless(ctx context.Context, tx *sql.Tx, d Dedup) error {
	if d.Identity() == nil {
		return nil
	}
	var idless bool
	if err := tx.QueryRowContext(ctx, `SELECT count(*) > 0 FROM tl_dedup WHERE `+d.idless("")).Scan(&idless); err != nil {
		return fmt.Errorf("look for rows without an identity in the increment of %s: %w", d.Name, err)
	}
	if !idless {
		return nil
	}
	if _, err := tx.ExecContext(ctx, d.rekeySQL(d.duckdbContent, sqltext.Name(d.Target()))); err != nil {
		return fmt.Errorf("carry the keys of %s's rows without an identity over: %w", d.Target(), err)
	}
	return nil
}

// growTarget adds to a target created before the source gained columns
// (the sink adds a newly declared column to the source: duckdb.AddColumns)
// the columns it lacks, so that the copies keep every column; rows kept
// before read NULL in them, as they do in the source.
func (mg *Merger) growTarget(ctx context.Context, tx *sql.Tx, d Dedup) error {
	cols, err := duckdb.TableColumns(ctx, tx, d.Name)
	if err != nil {
		return err
	}
	added, err := duckdb.AddColumns(ctx, tx, d.Target(), append(cols, duckdb.Column{Name: "dedup_key", Type: "VARCHAR"}))
	if err != nil {
		return fmt.Errorf("bring %s up to the columns of %s: %w", d.Target(), d.Name, err)
	}
	if len(added) > 0 {
		mg.log.Info("added the source's new columns to the dedup target; rows kept before read null in them", "table", d.Target(), "columns", len(added))
	}
	return nil
}

// DedupCounts are what verify reports of an OpenTelemetry table's copies.
type DedupCounts struct {
	Rows       int64 // rows of the source table
	Identities int64 // distinct spans, log records or points among them
	Kept       int64 // rows of the target
	Pending    int64 // source rows past the model's watermark
}

// Counts counts the source's rows and identities and the target's rows.
func (mg *Merger) Counts(ctx context.Context, d Dedup) (DedupCounts, error) {
	return CountsIn(ctx, mg.db, d)
}

// CountsIn is Counts read in q: in a transaction, all of one snapshot,
// as the counts read beside it (verify's, while run loads and merges);
// on a database each query reads its own moment, and a load or merge
// between them counted the rows of one and the pending rows of another.
func CountsIn(ctx context.Context, q RowQuerier, d Dedup) (DedupCounts, error) {
	var c DedupCounts
	src, model := sqltext.Name(d.Name), sqltext.String(d.model())
	if err := q.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*), count(DISTINCT %s) FROM %s`, d.keyExpr(), src)).Scan(&c.Rows, &c.Identities); err != nil {
		return c, fmt.Errorf("count %s: %w", d.Name, err)
	}
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT count(*) > 0 FROM duckdb_tables() WHERE table_name = ? AND schema_name = 'main'`, d.Target()).Scan(&exists); err != nil || !exists {
		c.Pending = c.Rows
		return c, err
	}
	err := q.QueryRowContext(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %s), (SELECT count(*) FROM %s s LEFT JOIN %s w
			ON w.model = %s AND w.topic = s.ktopic AND w."partition" = s.kpartition WHERE s.koffset >= coalesce(w.next_offset, 0))`,
		sqltext.Name(d.Target()), src, WatermarkTable, model)).Scan(&c.Kept, &c.Pending)
	return c, err
}

// databendContent is the hash of a row's content in Databend's SQL: an
// md5 of every column but the coordinates, each written as its length
// and text so that no two rows meet by concatenation ("a","bc" and
// "ab","c"), a NULL marked apart from any text, and a VARIANT prefixed by
// its JSON type: Databend's cast of a VARIANT string to VARCHAR drops the
// quotes, so the string "1" and the number 1 would meet (functions/src/
// scalars/variant.rs: to_string, json_typeof). Every piece is non-null,
// so CONCAT's handling of NULL (which differs between engines) never
// matters.
func (d Dedup) databendContent(alias string) string {
	var parts []string
	for _, c := range d.Table.Columns {
		if !schema.InContentKey(c.Name) {
			continue
		}
		col := alias + sqltext.Ident(c.Name)
		text := "CAST(" + col + " AS VARCHAR)"
		if c.Type == schema.JSON {
			text = "CONCAT(COALESCE(JSON_TYPEOF(" + col + "), ''), ':', COALESCE(" + text + ", ''))"
		}
		parts = append(parts, fmt.Sprintf("CASE WHEN %s IS NULL THEN '-' ELSE CONCAT(CAST(LENGTH(%s) AS VARCHAR), ':', %s) END", col, text, text))
	}
	return "MD5(CONCAT(" + strings.Join(parts, ",\n    ") + "))"
}

// databendKey is a row's key in Databend's SQL, over columns prefixed by
// alias.
func (d Dedup) databendKey(alias string) string { return d.keyOf(d.databendContent, alias) }

// DatabendIncrement is the scratch table of the dedup model on Databend,
// holding one merge's increment (empty outside a merge); the Databend
// sink creates it beside the target, with the target's columns.
func (d Dedup) DatabendIncrement() string { return d.Target() + "_increment" }

// Databend returns the model's statements for Databend, the design of the
// other models there (DatabendStatements): one transaction claims the
// model, reads the rows past the watermark once into the increment,
// carries the target's rows without an identity that an older release
// kept over to their content key (rekeySQL; spans only), inserts each
// identity the target lacks (the first copy), advances the watermark and
// empties the increment. The tables are the sink's.
func (d Dedup) Databend() DatabendStatements {
	src, dst, inc := sqltext.Name(d.Name), sqltext.Name(d.Target()), sqltext.Name(d.DatabendIncrement())
	// Databend's lexer unescapes backslashes in literals (sqltext.DatabendString).
	model := sqltext.DatabendString(d.model())
	var names []string
	for _, c := range d.Table.AllColumns() {
		names = append(names, sqltext.Ident(c.Name))
	}
	cols := strings.Join(names, ", ")
	merge := []string{
		claimSQL(d.model()),
		fmt.Sprintf(`INSERT INTO %s (%s, dedup_key)
SELECT %s, %s
FROM %s AS s LEFT JOIN %s AS w ON w.model = %s AND w.topic = s.ktopic AND w."partition" = s.kpartition
WHERE s.koffset >= COALESCE(w.next_offset, 0)`, inc, cols, "s."+strings.Join(names, ", s."), d.databendKey("s."), src, WatermarkTable, model),
	}
	if d.Identity() != nil {
		// Unconditional, unlike DuckDB's (a list of statements has no
		// branch): once the keys are carried over it writes nothing, and
		// what it reads, the target's ids (the blocks whose statistics
		// show a null), is of the order of what the insert's NOT IN reads
		// at every merge, every key. Not measured on a real Databend.
		merge = append(merge, d.rekeySQL(d.databendContent, dst))
	}
	merge = append(merge,
		fmt.Sprintf(`INSERT INTO %s (%s, dedup_key)
SELECT %s, dedup_key FROM %s WHERE dedup_key NOT IN (SELECT dedup_key FROM %s)
QUALIFY ROW_NUMBER() OVER (PARTITION BY dedup_key ORDER BY ktopic, kpartition, koffset, kindex) = 1`, dst, cols, cols, inc, dst),
		advanceWatermarkSQL(model, inc, "ktopic", "kpartition", "koffset"),
		"DELETE FROM "+inc,
	)
	return DatabendStatements{Setup: []string{watermarkTableSQL, claimRowSQL(d.model())}, Merge: merge,
		Reset: []string{forgetWatermarksSQL(model)}}
}

// DatabendCountsSQL is the query of DedupCounts on Databend: one row of
// the source's rows and identities, the target's rows and the source's
// rows past the watermark.
func (d Dedup) DatabendCountsSQL() string {
	src := sqltext.Name(d.Name)
	return fmt.Sprintf(`SELECT (SELECT COUNT(*) FROM %s), (SELECT COUNT(DISTINCT %s) FROM %s AS s), (SELECT COUNT(*) FROM %s),
  (SELECT COUNT(*) FROM %s AS s LEFT JOIN %s AS w ON w.model = %s AND w.topic = s.ktopic AND w."partition" = s.kpartition WHERE s.koffset >= COALESCE(w.next_offset, 0))`,
		src, d.databendKey("s."), src, sqltext.Name(d.Target()), src, WatermarkTable, sqltext.DatabendString(d.model()))
}
