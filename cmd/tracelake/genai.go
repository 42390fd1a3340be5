package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// rebuildFileBytes bounds one file of a rebuild's rows.
const rebuildFileBytes = 64 << 20

// rebuildGenAI rebuilds genai_operations from the spans table with the
// price table and mapping of now (after `tracelake prices update`, or a
// newer tracelake): the rows are written to files in the stage directory,
// then replace the table's in one transaction. It returns the rows.
func rebuildGenAI(ctx context.Context, cfg *config.Config, snk *duckdb.Sink) (int64, error) {
	table, err := prices.Load(cfg.GenAI.PricesFile)
	if err != nil {
		return 0, fmt.Errorf("genai.prices_file %s: %w", cfg.GenAI.PricesFile, err)
	}
	m := genai.NewMapper(table, cfg.GenAI.CaptureContent)
	q := fmt.Sprintf(`SELECT tenant_id, service_name, name, trace_id, span_id, parent_span_id, coalesce(epoch_us(start_time), 0),
		duration_ns, status_code = 'error', span_attributes::VARCHAR, ktopic, kpartition, koffset, kindex
		FROM %s ORDER BY ktopic, kpartition, koffset, kindex`, sqltext.Name(cfg.Sink.Table))
	rows, err := snk.DB().QueryContext(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", cfg.Sink.Table, err)
	}
	defer rows.Close()
	var (
		files   []string
		buf     []byte
		longest int
		spans   int64
	)
	defer func() {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}()
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		path := filepath.Join(cfg.StageDir(), "rebuild-"+cfg.GenAI.Table+"-"+strconv.Itoa(len(files))+".ndjson")
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			return err
		}
		files = append(files, path)
		buf = buf[:0]
		return nil
	}
	for rows.Next() {
		var (
			s                      otel.SpanRow
			service, parent        *string
			traceID, spanID, attrs string
			startMicros            int64
		)
		if err := rows.Scan(&s.Tenant, &service, &s.Name, &traceID, &spanID, &parent, &startMicros, &s.DurationNs,
			&s.StatusError, &attrs, &s.Topic, &s.Partition, &s.Offset, &s.Index); err != nil {
			return 0, fmt.Errorf("read %s: %w", cfg.Sink.Table, err)
		}
		s.Service = deref(service)
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
		if spans++; spans%1_000_000 == 0 {
			slog.Info("rebuilding", "table", cfg.GenAI.Table, "spans read", spans, "operations", m.Stats().Operations.Load())
		}
		if len(buf) >= rebuildFileBytes {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", cfg.Sink.Table, err)
	}
	rows.Close()
	if err := flush(); err != nil {
		return 0, err
	}
	n, err := snk.ReplaceDerived(ctx, files, longest)
	if err != nil {
		return 0, err
	}
	if u := m.Stats().Unpriced.Load(); u > 0 {
		slog.Info("operations without a price keep a null cost", "operations", u, "see", "tracelake prices match MODEL")
	}
	return n, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
