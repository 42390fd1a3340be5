package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// rebuildFileBytes bounds one file of a rebuild's rows.
const rebuildFileBytes = 64 << 20

// rebuildSpanColumns are the spans table's columns a rebuild reads.
var rebuildSpanColumns = []string{"tenant_id", "service_name", "name", "trace_id", "span_id", "parent_span_id", "start_time",
	"duration_ns", "status_code", "span_attributes", "scope_name", "scope_version", "ktopic", "kpartition", "koffset", "kindex"}

// rebuildGenAI rebuilds genai_operations from the spans table with the
// price table and mapping of now (after `tracelake prices update`, or a
// newer tracelake), replacing the table's rows in one transaction. On
// Databend and Iceberg the spans are read into an in-memory DuckDB first
// (the whole table: mind its size); Databend then stages and copies the
// rows, Iceberg commits them in one commit. Both cover only the spans up
// to positions read before them (loads may commit while the rebuild reads
// and replaces): the spans past those are left out here, and their
// operations stay as loaded. It returns the rows.
func rebuildGenAI(ctx context.Context, cfg *config.Config) (int64, error) {
	table, err := prices.Load(cfg.GenAI.PricesFile)
	if err != nil {
		return 0, fmt.Errorf("genai.prices_file %s: %w", cfg.GenAI.PricesFile, err)
	}
	m := genai.NewMapper(table, cfg.GenAI.CaptureContent)
	defer func() {
		if u := m.Stats().Unpriced.Load(); u > 0 {
			slog.Info("operations without a price keep a null cost", "operations", u, "see", "tracelake prices match MODEL")
		}
	}()
	if cfg.Sink.Type != config.SinkDuckDB {
		lake, err := openLake(ctx, cfg)
		if err != nil {
			return 0, err
		}
		defer lake.Close()
		db, err := memoryDuckDB()
		if err != nil {
			return 0, err
		}
		defer db.Close()
		upTo, err := lake.beginRebuild(ctx)
		if err != nil {
			return 0, err
		}
		cols := selectColumns(duckdbsink.TypedColumns(typedTable(cfg)), rebuildSpanColumns)
		if err := lake.copyInto(ctx, db, cfg.Sink.Table, cols, time.Time{}); err != nil {
			return 0, err
		}
		if err := keepSpansUpTo(ctx, db, cfg.Sink.Table, upTo); err != nil {
			return 0, err
		}
		chunks, err := operationChunks(ctx, db, cfg.Sink.Table, m)
		if err != nil {
			return 0, err
		}
		return lake.ReplaceDerived(ctx, chunks)
	}
	snk, err := openDuckDB(cfg, false)
	if err != nil {
		return 0, err
	}
	defer snk.Close()
	if err := snk.Prepare(ctx); err != nil {
		return 0, fmt.Errorf("prepare tables: %w", err)
	}
	var files []string
	defer func() {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}()
	longest, err := writeOperations(ctx, snk.DB(), cfg.Sink.Table, m, func(chunk []byte) error {
		path := filepath.Join(cfg.StageDir(), "rebuild-"+cfg.GenAI.Table+"-"+strconv.Itoa(len(files))+".ndjson")
		files = append(files, path)
		return os.WriteFile(path, chunk, 0o644)
	})
	if err != nil {
		return 0, err
	}
	return snk.ReplaceDerived(ctx, files, longest)
}

// writeOperations reads the spans of table spans in db (DuckDB) and hands
// their operations' rows (NDJSON) to emit in chunks of about
// rebuildFileBytes; it returns the longest row.
func writeOperations(ctx context.Context, db *sql.DB, spans string, m *genai.Mapper, emit func([]byte) error) (int, error) {
	q := fmt.Sprintf(`SELECT tenant_id, service_name, name, trace_id, span_id, parent_span_id, coalesce(epoch_us(start_time), 0),
		duration_ns, status_code = 'error', span_attributes::VARCHAR, coalesce(scope_name, ''), coalesce(scope_version, ''), ktopic, kpartition, koffset, kindex
		FROM %s ORDER BY ktopic, kpartition, koffset, kindex`, sqltext.Name(spans))
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", spans, err)
	}
	defer rows.Close()
	var (
		buf     []byte
		longest int
		read    int64
	)
	for rows.Next() {
		var (
			s                      otel.SpanRow
			service, parent        *string
			traceID, spanID, attrs string
			startMicros            int64
			duration               sql.NullInt64
		)
		if err := rows.Scan(&s.Tenant, &service, &s.Name, &traceID, &spanID, &parent, &startMicros, &duration,
			&s.StatusError, &attrs, &s.ScopeName, &s.ScopeVersion, &s.Topic, &s.Partition, &s.Offset, &s.Index); err != nil {
			return 0, fmt.Errorf("read %s: %w", spans, err)
		}
		s.Service = deref(service)
		s.DurationNs, s.NoDuration = duration.Int64, !duration.Valid
		s.Start = pcommon.Timestamp(startMicros * 1000)
		_, _ = hex.Decode(s.TraceID[:], []byte(traceID))
		_, _ = hex.Decode(s.SpanID[:], []byte(spanID))
		_, _ = hex.Decode(s.ParentSpanID[:], []byte(deref(parent)))
		if s.Attributes, err = otel.AttributesFromJSON([]byte(attrs)); err != nil {
			return 0, fmt.Errorf("span %s at offset %d of %s/%d: %w", spanID, s.Offset, s.Topic, s.Partition, err)
		}
		start := len(buf)
		buf, _ = otel.AppendOperation(buf, m, &s)
		longest = max(longest, len(buf)-start)
		if read++; read%1_000_000 == 0 {
			slog.Info("rebuilding", "spans read", read, "operations", m.Stats().Operations.Load())
		}
		if len(buf) >= rebuildFileBytes {
			if err := emit(buf); err != nil {
				return 0, err
			}
			buf = nil
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", spans, err)
	}
	if len(buf) > 0 {
		if err := emit(buf); err != nil {
			return 0, err
		}
	}
	return longest, nil
}

// operationChunks is writeOperations into memory.
func operationChunks(ctx context.Context, db *sql.DB, spans string, m *genai.Mapper) ([][]byte, error) {
	var chunks [][]byte
	_, err := writeOperations(ctx, db, spans, m, func(chunk []byte) error {
		chunks = append(chunks, chunk)
		return nil
	})
	return chunks, err
}

// keepSpansUpTo deletes from table spans in db (DuckDB) the spans past
// upTo: those of a partition upTo lacks, or past its last offset there.
// Their loads committed after the rebuild began; their operations are not
// the rebuild's to replace.
func keepSpansUpTo(ctx context.Context, db *sql.DB, spans string, upTo map[sink.TopicPartition]int64) error {
	values := make([]string, 0, len(upTo))
	for tp, last := range upTo {
		values = append(values, fmt.Sprintf("(%s, %d, %d)", sqltext.String(tp.Topic), tp.Partition, last))
	}
	keep := "FALSE" // nothing loaded when the rebuild began
	if len(values) > 0 {
		keep = fmt.Sprintf(`EXISTS (SELECT 1 FROM (VALUES %s) AS up_to(ktopic, kpartition, last_offset)
			WHERE up_to.ktopic = s.ktopic AND up_to.kpartition = s.kpartition AND s.koffset <= up_to.last_offset)`, strings.Join(values, ", "))
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s AS s WHERE NOT %s", sqltext.Name(spans), keep)); err != nil {
		return fmt.Errorf("leave out the spans loaded after the rebuild began: %w", err)
	}
	return nil
}

// selectColumns are the columns of cols named in names, in names' order.
func selectColumns(cols []duckdbsink.Column, names []string) []duckdbsink.Column {
	var out []duckdbsink.Column
	for _, n := range names {
		for _, c := range cols {
			if c.Name == n {
				out = append(out, c)
			}
		}
	}
	return out
}

// lake is a sink whose tables tracelake reads through an in-memory DuckDB
// (Databend, Iceberg): the report and the GenAI rebuild.
type lake interface {
	// copyInto copies columns cols of table (its rows from the start_time
	// from on, unless zero) into a new table of the same name in db.
	copyInto(ctx context.Context, db *sql.DB, table string, cols []duckdbsink.Column, from time.Time) error
	// beginRebuild is called before the spans are read for a rebuild,
	// ReplaceDerived after: it replaces genai_operations' rows (see the
	// sinks'). beginRebuild returns the last offset per partition of the
	// spans the rebuild covers: the operations are derived from those
	// spans only, and ReplaceDerived replaces only theirs.
	beginRebuild(ctx context.Context) (upTo map[sink.TopicPartition]int64, err error)
	ReplaceDerived(ctx context.Context, chunks [][]byte) (int64, error)
	Close() error
}

// openLake opens and prepares the Databend or Iceberg sink of cfg.
func openLake(ctx context.Context, cfg *config.Config) (lake, error) {
	var l lake
	var prepare func(context.Context) error
	switch cfg.Sink.Type {
	case config.SinkDatabend:
		snk, err := openDatabend(cfg)
		if err != nil {
			return nil, err
		}
		l, prepare = &databendLake{Sink: snk}, snk.Prepare
	case config.SinkIceberg:
		snk, err := openIceberg(ctx, cfg)
		if err != nil {
			return nil, err
		}
		l, prepare = &icebergLake{Sink: snk, namespace: cfg.Sink.Iceberg.Namespace}, snk.Prepare
	default:
		return nil, fmt.Errorf("BUG: no lake for sink %s", cfg.Sink.Type)
	}
	if err := prepare(ctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("prepare tables: %w", err)
	}
	return l, nil
}

type databendLake struct {
	*databend.Sink
	rebuild *databend.Rebuild // begun by beginRebuild
}

// beginRebuild reads the ledger's positions: a load may commit while the
// rebuild reads the spans and before it replaces the operations (nothing
// stops tracelake run, and no Databend transaction reads one snapshot of
// tables it only reads), so the rebuild covers the spans up to them.
func (d *databendLake) beginRebuild(ctx context.Context) (map[sink.TopicPartition]int64, error) {
	r, err := d.Sink.BeginRebuild(ctx)
	if err != nil {
		return nil, err
	}
	d.rebuild = r
	return r.UpTo(), nil
}

func (d *databendLake) ReplaceDerived(ctx context.Context, chunks [][]byte) (int64, error) {
	if d.rebuild == nil {
		return 0, errors.New("BUG: a rebuild's rows replaced before it began")
	}
	return d.Sink.ReplaceDerived(ctx, d.rebuild, chunks)
}

func (d *databendLake) copyInto(ctx context.Context, db *sql.DB, table string, cols []duckdbsink.Column, from time.Time) error {
	since := ""
	if !from.IsZero() {
		since = databendTime(from)
	}
	return copyDatabendRows(ctx, d.Sink, db, table, cols, since)
}

type icebergLake struct {
	*iceberg.Sink
	namespace string
	rebuild   *iceberg.Rebuild // begun by beginRebuild
}

// beginRebuild reads the spans table's positions: a load may commit
// while the rebuild reads the spans and replaces the operations, so the
// rebuild covers the spans up to them and keeps the operations past them.
func (i *icebergLake) beginRebuild(ctx context.Context) (map[sink.TopicPartition]int64, error) {
	r, err := i.Sink.BeginRebuild(ctx)
	if err != nil {
		return nil, err
	}
	i.rebuild = r
	return r.UpTo(), nil
}

func (i *icebergLake) ReplaceDerived(ctx context.Context, chunks [][]byte) (int64, error) {
	if i.rebuild == nil {
		return 0, errors.New("BUG: a rebuild's rows replaced before it began")
	}
	return i.Sink.ReplaceDerived(ctx, i.rebuild, chunks)
}

// copyInto scans the table's current snapshot; from is a row filter, so
// the scan prunes the days before it.
func (i *icebergLake) copyInto(ctx context.Context, db *sql.DB, name string, cols []duckdbsink.Column, from time.Time) error {
	var scan []table.ScanOption
	if !from.IsZero() {
		scan = append(scan, table.WithRowFilter(iceberggo.GreaterThanEqual(iceberggo.Reference("start_time"), iceberggo.Timestamp(from.UnixMicro()))))
	}
	_, err := copyIcebergTable(ctx, i.Sink, table.Identifier{i.namespace, name}, db, name, cols, scan...)
	return err
}

// copyDatabendRows reads columns cols of a Databend table (its rows from
// since on, when set) into a new table of the same name in db (DuckDB):
// Databend answers text, written to an NDJSON file of strings and nulls
// that DuckDB reads and casts to the columns' types.
func copyDatabendRows(ctx context.Context, snk *databend.Sink, db *sql.DB, table string, cols []duckdbsink.Column, since string) error {
	names := make([]string, len(cols))
	read := make([]string, len(cols))
	casts := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
		read[i] = sqltext.Ident(c.Name) + ": 'VARCHAR'"
		casts[i] = fmt.Sprintf("CAST(%s AS %s) AS %s", sqltext.Ident(c.Name), c.Type, sqltext.Ident(c.Name))
	}
	q := fmt.Sprintf("SELECT %s FROM %s", strings.Join(names, ", "), sqltext.Name(table))
	if since != "" {
		q += fmt.Sprintf(" WHERE start_time >= '%s'", since)
	}
	rows, err := snk.QueryRows(ctx, q)
	if err != nil {
		return fmt.Errorf("read %s from databend: %w", table, err)
	}
	f, err := os.CreateTemp("", "tracelake-*.ndjson")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	enc := json.NewEncoder(f)
	obj := make(map[string]*string, len(cols))
	longest := 0
	for _, row := range rows {
		for i, v := range row {
			obj[names[i]] = v
			if v != nil {
				longest = max(longest, len(*v))
			}
		}
		if err := enc.Encode(obj); err != nil {
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE %s AS SELECT %s FROM read_ndjson(%s, columns = {%s}, maximum_object_size = %d)",
		sqltext.Name(table), strings.Join(casts, ", "), sqltext.String(f.Name()), strings.Join(read, ", "), max(16<<20, 2*longest*len(cols)+1024)))
	if err != nil {
		return fmt.Errorf("copy %s into duckdb: %w", table, err)
	}
	return nil
}

// databendTime writes t as Databend reads a TIMESTAMP literal.
func databendTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000000") }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
