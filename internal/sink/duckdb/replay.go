package duckdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// ReplayResult says what a replay did (or would do, in a dry run).
type ReplayResult struct {
	Candidates int64            // dead-letter rows matching the filter
	Loaded     int64            // moved into the main table
	Failing    map[string]int64 // still failing, by error
}

// ReplayOptions say which dead-letter rows a replay takes and how.
type ReplayOptions struct {
	// Where is SQL over the dead-letter table's columns; "" for all.
	Where string
	// DryRun rolls the replay back: it reports what would happen.
	DryRun bool
	// Decode, for a sink of routed tables, makes the rows of a
	// dead-lettered record as the pipeline does
	// (pipeline.ChangelogDecoder.AppendRows), or says why it cannot; an
	// error wrapping sink.ErrTransient stops the replay.
	Decode func(b *sink.Batch, r *kgo.Record) (int, error)
	// Replayed runs in the replay's transaction with the lowest offset
	// replayed into each table (with Decode, each routed table; else the
	// main table), by partition: the rows land below what the tables'
	// models merged, so it lowers their watermarks
	// (merge.ChangelogMerger.LowerWatermarks, merge.LowerWatermarks).
	Replayed func(ctx context.Context, tx *sql.Tx, lowest map[string]map[sink.TopicPartition]int64) error
}

// Replay moves dead-letter rows matching o.Where back through the load
// path after a fix (a new column, a changed type, an index dropped). In
// one transaction the rows leave the dead-letter table, the ones that now
// load go into the main table (with o.Decode, their changes into the
// landing table, moved into their changelog tables as any load's) and the
// others come back with their new error: a row is in one table or the
// other, never both. The filter is evaluated once: the rows it picks are
// noted by rowid, read and deleted by that note, so a filter that is not
// deterministic (random(), now()) cannot replay one set and delete
// another. With o.DryRun the transaction is rolled back.
func (s *Sink) Replay(ctx context.Context, o ReplayOptions) (ReplayResult, error) {
	switch {
	case s.opt.Typed != nil:
		// Its dead letters are messages that did not decode: a replay
		// would need the decoder, which only the pipeline has.
		return ReplayResult{}, fmt.Errorf("replay is not built for %s (decoded OpenTelemetry rows); the dead letters stay in %s", s.opt.Table, s.opt.Table+"_dlq")
	case s.opt.Routed && o.Decode == nil:
		return ReplayResult{}, errors.New("BUG: a replay of dead-lettered changes without their decoder")
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if err := s.freshRouted(ctx); err != nil {
		return ReplayResult{}, err
	}
	filter := ""
	if o.Where != "" {
		filter = " WHERE " + o.Where
	}
	now := time.Now().UTC()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op

	// The record's headers and timestamp too: the replayed row's
	// record_metadata is then the one a first load would have written (a
	// tenant sent as a header, the record's time). A row dead-lettered
	// before the table had them reads NULL: no headers, no time, as
	// replays did before.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`CREATE OR REPLACE TEMP TABLE tl_replay AS SELECT rowid AS tl_rowid, topic, "partition", "offset", "key", "value", headers, create_time FROM %s%s`, s.tables.dlq, filter)); err != nil {
		return ReplayResult{}, fmt.Errorf("select dead-letter rows: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT topic, "partition", "offset", "key", "value", headers::VARCHAR, create_time FROM tl_replay ORDER BY "partition", "offset", tl_rowid`)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("select dead-letter rows: %w", err)
	}
	// The rows that now load (and the dead letters that still fail) are
	// a batch, staged and inserted as a load's are.
	b := &sink.Batch{ID: sink.NewBatchID()}
	raw := rawReplay{b: b, table: s.opt.Table, lowest: map[string]map[sink.TopicPartition]int64{}}
	decoded := decodedReplay{decode: o.Decode, b: b, lowest: map[string]map[sink.TopicPartition]int64{}}
	var res ReplayResult
	for rows.Next() {
		var r kgo.Record
		var headers sql.NullString
		var created sql.NullTime
		if err := rows.Scan(&r.Topic, &r.Partition, &r.Offset, &r.Key, &r.Value, &headers, &created); err != nil {
			rows.Close()
			return ReplayResult{}, fmt.Errorf("read dead-letter rows: %w", err)
		}
		if headers.Valid {
			if r.Headers, err = envelope.ParseHeaders([]byte(headers.String)); err != nil {
				rows.Close()
				return ReplayResult{}, fmt.Errorf("read dead-letter row %s/%d at offset %d: %w", r.Topic, r.Partition, r.Offset, err)
			}
		}
		if created.Valid {
			r.Timestamp = created.Time.UTC()
		}
		res.Candidates++
		if o.Decode == nil {
			raw.add(&r, s.opt.Transform)
		} else if err := decoded.add(&r); err != nil {
			rows.Close()
			return ReplayResult{}, err
		}
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
	f, err := s.Stage(ctx, b)
	if err != nil {
		return ReplayResult{}, fmt.Errorf("stage replayed rows: %w", err)
	}
	defer s.Discard([]sink.File{f})
	plan := newLoadPlan([]sink.File{f}, nil, s.tables.mainTopic)
	clear(s.routedAdded)
	clear(s.routedCreated)
	clear(s.routedDefaultsAdded)
	s.checkpointAfterCommit = false
	// With the per-row JSON check a load falls back to (loadOnce): a
	// value DuckDB's parser refuses, dead-lettered at stage load, goes
	// back with that reason instead of failing the whole replay.
	if _, err := s.insertFiles(ctx, tx, plan, true, now); err != nil {
		return ReplayResult{}, err
	}
	if err := decoded.recount(ctx, tx, s.tables.ledger); err != nil {
		return ReplayResult{}, err
	}
	lowest := raw.lowest
	if o.Decode != nil {
		lowest = decoded.lowest
	}
	if o.Replayed != nil && len(lowest) > 0 {
		if err := o.Replayed(ctx, tx, lowest); err != nil {
			return ReplayResult{}, err
		}
	}
	if res.Failing, err = s.replayFailures(ctx, tx, now); err != nil {
		return ReplayResult{}, err
	}
	for _, n := range res.Failing {
		res.Loaded -= n
	}
	res.Loaded += res.Candidates
	if o.DryRun {
		return res, nil // rolled back by the deferred Rollback
	}
	if err := tx.Commit(); err != nil {
		// It may have committed all the same (see routedStale).
		s.routedStale = s.opt.Routed
		return ReplayResult{}, fmt.Errorf("commit replay: %w", err)
	}
	s.keepRouted()
	return res, nil
}

// rawReplay adds the raw (or transform) rows of replayed records to b,
// and dead letters of those that still do not fit.
type rawReplay struct {
	b   *sink.Batch
	ids *envelope.UUIDs
	id  [16]byte
	// lowest is the lowest offset of the rows that load into table, by
	// partition.
	table  string
	lowest map[string]map[sink.TopicPartition]int64
}

func (p *rawReplay) add(r *kgo.Record, transform bool) {
	problem := envelope.Check(r.Value)
	if problem.OK() && transform {
		problem = envelope.CheckObject(r.Value)
	}
	b := p.b
	start, startDLQ := len(b.Rows), len(b.DLQ)
	if problem.OK() {
		lower(p.lowest, p.table, r)
	}
	switch {
	case !problem.OK():
		b.DLQ = envelope.AppendDLQRow(b.DLQ, r, problem.Reason, envelope.StageDecode)
	case transform:
		b.Rows = envelope.AppendTransformRow(b.Rows, r, envelope.ValueText)
	default:
		if p.ids == nil {
			p.ids = envelope.NewUUIDs()
		}
		p.ids.Next(&p.id)
		b.Rows = envelope.AppendRawRow(b.Rows, r, &p.id, envelope.ValueVerbatim)
	}
	b.MaxLine = max(b.MaxLine, len(b.Rows)-start, len(b.DLQ)-startDLQ)
}

// decodedReplay builds the changes of replayed records into a batch, with
// the lowest offset replayed into each routed table by partition.
type decodedReplay struct {
	decode func(b *sink.Batch, r *kgo.Record) (int, error)
	b      *sink.Batch
	lowest map[string]map[sink.TopicPartition]int64
	// decoded are the records that now decode, as SQL rows (topic,
	// partition, offset, rows made).
	decoded []string
}

// recount moves the replayed records that now decode from the dead-letter
// count of the ledger's range that holds each to its count of rows, by
// the rows each made (a message of several changes, or of none): verify
// compares those counts with the rows stored.
func (p *decodedReplay) recount(ctx context.Context, tx *sql.Tx, ledger string) error {
	if len(p.decoded) == 0 {
		return nil
	}
	q := fmt.Sprintf(`UPDATE %[1]s AS l SET records = l.records + s.made, dlq_records = l.dlq_records - s.n FROM (
	SELECT g.topic, g."partition", g.first_offset, sum(d.made) AS made, count(*) AS n
	FROM %[1]s g JOIN (VALUES %[2]s) AS d(topic, "partition", "offset", made)
		ON g.topic = d.topic AND g."partition" = d."partition" AND d."offset" BETWEEN g.first_offset AND g.last_offset
	GROUP BY ALL) AS s
WHERE l.topic = s.topic AND l."partition" = s."partition" AND l.first_offset = s.first_offset`, ledger, strings.Join(p.decoded, ", "))
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("count the replayed records' rows in %s: %w", ledger, err)
	}
	return nil
}

func (p *decodedReplay) add(r *kgo.Record) error {
	sizes := make([]int, len(p.b.Routed))
	for i, t := range p.b.Routed {
		sizes[i] = len(t.Rows)
	}
	n, err := p.decode(p.b, r)
	switch {
	case errors.Is(err, sink.ErrTransient):
		return fmt.Errorf("replay %s/%d at offset %d: %w", r.Topic, r.Partition, r.Offset, err)
	case err != nil:
		start := len(p.b.DLQ)
		p.b.DLQ = envelope.AppendDLQRow(p.b.DLQ, r, err.Error(), envelope.StageDecode)
		p.b.MaxLine = max(p.b.MaxLine, len(p.b.DLQ)-start)
		return nil
	}
	p.decoded = append(p.decoded, fmt.Sprintf("(%s, %d, %d, %d)", sqltext.String(r.Topic), r.Partition, r.Offset, n))
	for i, t := range p.b.Routed {
		if i < len(sizes) && len(t.Rows) == sizes[i] {
			continue // no row of r
		}
		lower(p.lowest, t.Table, r)
	}
	return nil
}

// lower makes r's offset the lowest of table's in its partition, if lower.
func lower(lowest map[string]map[sink.TopicPartition]int64, table string, r *kgo.Record) {
	if lowest[table] == nil {
		lowest[table] = map[sink.TopicPartition]int64{}
	}
	tp := sink.TopicPartition{Topic: r.Topic, Partition: r.Partition}
	if at, ok := lowest[table][tp]; !ok || r.Offset < at {
		lowest[table][tp] = r.Offset
	}
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
