package duckdb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
)

// ReplayResult says what a replay did (or would do, in a dry run).
type ReplayResult struct {
	Candidates int64            // dead-letter rows matching the filter
	Loaded     int64            // moved into the main table
	Failing    map[string]int64 // still failing, by error
}

// Replay moves dead-letter rows matching where (SQL over the dead-letter
// table's columns; "" for all) back through the load path after a fix (a new
// column, a changed type). In one transaction the rows leave the
// dead-letter table, the ones that now load go into the main table and the
// others come back with their new error: a row is in one table or the
// other, never both. The filter is evaluated once: the rows it picks are
// noted by rowid, read and deleted by that note, so a filter that is not
// deterministic (random(), now()) cannot replay one set and delete
// another. With dryRun the transaction is rolled back.
func (s *Sink) Replay(ctx context.Context, where string, dryRun bool) (ReplayResult, error) {
	if s.opt.Typed != nil {
		// Its dead letters are messages that did not decode: a replay
		// would need the decoder, which only the pipeline has.
		return ReplayResult{}, fmt.Errorf("replay is not built for %s (decoded OpenTelemetry rows); the dead letters stay in %s", s.opt.Table, s.opt.Table+"_dlq")
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	filter := ""
	if where != "" {
		filter = " WHERE " + where
	}
	now := time.Now().UTC()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op

	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_replay AS SELECT rowid AS tl_rowid, topic, "partition", "offset", "key", "value" FROM %s%s`, s.tables.dlq, filter)); err != nil {
		return ReplayResult{}, fmt.Errorf("select dead-letter rows: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT topic, "partition", "offset", "key", "value" FROM tl_replay ORDER BY "partition", "offset", tl_rowid`)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("select dead-letter rows: %w", err)
	}
	var raw, dlq []byte
	maxLine := 0
	var res ReplayResult
	ids := envelope.NewUUIDs()
	var id [16]byte
	for rows.Next() {
		var r kgo.Record
		if err := rows.Scan(&r.Topic, &r.Partition, &r.Offset, &r.Key, &r.Value); err != nil {
			rows.Close()
			return ReplayResult{}, fmt.Errorf("read dead-letter rows: %w", err)
		}
		res.Candidates++
		p := envelope.Check(r.Value)
		if p.OK() && s.opt.Transform {
			p = envelope.CheckObject(r.Value)
		}
		start, startDLQ := len(raw), len(dlq)
		switch {
		case !p.OK():
			dlq = envelope.AppendDLQRow(dlq, &r, p.Reason, envelope.StageDecode)
		case s.opt.Transform:
			raw = envelope.AppendTransformRow(raw, &r, envelope.ValueText)
		default:
			ids.Next(&id)
			raw = envelope.AppendRawRow(raw, &r, &id, envelope.ValueVerbatim)
		}
		maxLine = max(maxLine, len(raw)-start, len(dlq)-startDLQ)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return ReplayResult{}, fmt.Errorf("read dead-letter rows: %w", err)
	}
	if res.Candidates == 0 {
		return res, nil
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`DELETE FROM %s WHERE rowid IN (SELECT tl_rowid FROM tl_replay)`, s.tables.dlq)); err != nil {
		return ReplayResult{}, fmt.Errorf("remove replayed rows from %s: %w", s.tables.dlq, err)
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE tl_replay`); err != nil {
		return ReplayResult{}, fmt.Errorf("drop the replay's temporary table: %w", err)
	}
	plan := loadPlan{maxLine: maxLine}
	for _, f := range []struct {
		name string
		data []byte
		dst  *[]string
	}{{"rows" + s.rowsExt(), raw, &plan.rowFiles}, {"dlq.ndjson", dlq, &plan.dlqFiles}} {
		if len(f.data) == 0 {
			continue
		}
		path := filepath.Join(s.opt.StageDir, fmt.Sprintf("replay-%d-%s", now.UnixNano(), f.name))
		if err := os.WriteFile(path, f.data, 0o644); err != nil {
			return ReplayResult{}, fmt.Errorf("stage replayed rows: %w", err)
		}
		defer os.Remove(path)
		*f.dst = []string{path}
	}
	if _, err := s.insertFiles(ctx, tx, plan, false, now); err != nil {
		return ReplayResult{}, err
	}
	if res.Failing, err = s.replayFailures(ctx, tx, now); err != nil {
		return ReplayResult{}, err
	}
	for _, n := range res.Failing {
		res.Loaded -= n
	}
	res.Loaded += res.Candidates
	if dryRun {
		return res, nil // rolled back by the deferred Rollback
	}
	if err := tx.Commit(); err != nil {
		return ReplayResult{}, fmt.Errorf("commit replay: %w", err)
	}
	return res, nil
}

// replayFailures counts, by error, the rows this replay put back into the
// dead-letter table (they carry its timestamp).
func (s *Sink) replayFailures(ctx context.Context, tx *sql.Tx, now time.Time) (map[string]int64, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(`SELECT error, count(*) FROM %s WHERE add_time = $1 GROUP BY ALL`, s.tables.dlq), now)
	if err != nil {
		return nil, fmt.Errorf("count rows still failing: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var reason string
		var n int64
		if err := rows.Scan(&reason, &n); err != nil {
			return nil, err
		}
		out[reason] = n
	}
	return out, rows.Err()
}
