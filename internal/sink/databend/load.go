package databend

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Load runs one transaction: read the ledger positions of the files'
// partitions, COPY the files nothing of which is loaded yet (one COPY INTO
// for all raw files, one for all dead-letter files), insert the rows past
// the ledger from files that are partly loaded, insert the ledger rows,
// COMMIT. Any failure rolls the whole load back; the retry starts again
// from the ledger, so a COPY or COMMIT whose reply was lost is never
// loaded twice. On success the files are removed from the stage (purge).
func (s *Sink) Load(ctx context.Context, files []sink.File) (sink.Loaded, error) {
	if len(files) == 0 {
		return sink.Loaded{}, nil
	}
	loaded, err := s.loadTx(ctx, files)
	if err != nil {
		return sink.Loaded{}, fmt.Errorf("load %d files into %s: %w", len(files), s.opt.Table, err)
	}
	if s.opt.Purge {
		if err := s.remove(ctx, files); err != nil {
			s.log.Warn("loaded files stay in the stage: remove failed", "files", len(files), "err", err)
		}
	}
	return loaded, nil
}

func (s *Sink) loadTx(ctx context.Context, files []sink.File) (_ sink.Loaded, err error) {
	ss := s.c.session()
	if _, err := ss.query(ctx, "BEGIN"); err != nil {
		return sink.Loaded{}, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		// A failed statement may leave the transaction open on the server;
		// after a lost COMMIT reply this is a no-op. Either way the ledger
		// decides on the retry.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, rerr := ss.query(rctx, "ROLLBACK"); rerr != nil {
			s.log.Debug("rollback after a failed load", "err", rerr)
		}
	}()

	var parts []sink.TopicPartition
	for _, f := range files {
		for _, r := range f.Ranges {
			if !slices.Contains(parts, r.TopicPartition) {
				parts = append(parts, r.TopicPartition)
			}
		}
	}
	fence, err := s.lastLoaded(ctx, ss, parts)
	if err != nil {
		return sink.Loaded{}, err
	}
	fenced := sink.Fence(files, fence)
	var whole, partial []sink.File
	for _, f := range files {
		switch f.Overlap(fence) {
		case sink.OverlapNone:
			whole = append(whole, f)
		case sink.OverlapPartial:
			partial = append(partial, f)
		}
	}
	if len(whole) < len(files) {
		s.log.Info("load overlaps the ledger; skipping rows already loaded",
			"files", len(files), "whole", len(whole), "partial", len(partial))
	}

	if err := s.copyFiles(ctx, ss, s.tables.main, whole, rowsOf); err != nil {
		return sink.Loaded{}, err
	}
	if err := s.copyFiles(ctx, ss, s.tables.dlq, whole, dlqOf); err != nil {
		return sink.Loaded{}, err
	}
	if len(partial) > 0 {
		if err := s.insertPast(ctx, ss, partial, fenced.Skip); err != nil {
			return sink.Loaded{}, err
		}
	}
	ranges := fenced.Ranges
	if !fenced.Exact {
		if ranges, err = s.countLoaded(ctx, ss, ranges); err != nil {
			return sink.Loaded{}, err
		}
	}
	loadID := uuid.NewString()
	if len(ranges) > 0 {
		if _, err := ss.query(ctx, ledgerInsert(s.tables.ledger, ranges, loadID, len(files))); err != nil {
			return sink.Loaded{}, fmt.Errorf("insert ledger rows: %w", err)
		}
	}
	if _, err := ss.query(ctx, "COMMIT"); err != nil {
		return sink.Loaded{}, fmt.Errorf("commit: %w", err)
	}
	committed = true
	return sink.Loaded{LoadID: loadID, Ranges: ranges}, nil
}

// staged picks one of a file's staged names and the rows it holds.
type staged func(f sink.File) (name string, rows int64)

func rowsOf(f sink.File) (string, int64) { return f.RowsPath, sumRanges(f, false) }
func dlqOf(f sink.File) (string, int64)  { return f.DLQPath, sumRanges(f, true) }

func sumRanges(f sink.File, dlq bool) int64 {
	var n int64
	for _, r := range f.Ranges {
		if dlq {
			n += r.DLQ
		} else {
			n += r.Records
		}
	}
	return n
}

// copyFiles loads files into table with one COPY INTO naming every file,
// and checks that each file loaded all its rows. FORCE = FALSE: Databend's
// load history skips a file it has loaded before. The ledger, read in this
// transaction, says these files are not loaded, so a file the history
// skips is copied again with FORCE = TRUE (the ledger is what commits with
// the rows; the history is a second guard, not the truth).
func (s *Sink) copyFiles(ctx context.Context, ss *session, table string, files []sink.File, pick staged) error {
	want := map[string]int64{}
	var names []string
	for _, f := range files {
		if name, rows := pick(f); name != "" {
			want[name] = rows
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	res, err := ss.query(ctx, s.copySQL(table, names, false))
	if err != nil {
		return fmt.Errorf("copy %d files into %s: %w", len(names), table, err)
	}
	got := copyResult(res)
	var skipped []string
	for _, n := range names {
		if _, ok := got[n]; !ok {
			skipped = append(skipped, n)
		}
	}
	if len(skipped) > 0 {
		s.log.Warn("Databend's load history skipped files the ledger has not loaded; copying them again with FORCE = TRUE",
			"table", table, "files", len(skipped))
		res, err := ss.query(ctx, s.copySQL(table, skipped, true))
		if err != nil {
			return fmt.Errorf("copy %d files into %s again: %w", len(skipped), table, err)
		}
		for n, rows := range copyResult(res) {
			got[n] = rows
		}
	}
	for _, n := range names {
		if got[n] != want[n] {
			return fmt.Errorf("%w: COPY INTO %s loaded %d rows from %s, which holds %d", sink.ErrFatal, table, got[n], n, want[n])
		}
	}
	return nil
}

// copySQL is the reference's COPY, made exact: the files are named (no
// pattern), nothing is purged inside the transaction (a rolled-back load
// must find its files again), errors abort.
func (s *Sink) copySQL(table string, names []string, force bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "COPY INTO %s FROM %s FILES = (%s) FILE_FORMAT = (TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO) PURGE = FALSE FORCE = %s",
		table, s.location(), sqltext.Strings(names), strings.ToUpper(strconv.FormatBool(force)))
	if s.opt.DisableVariantCheck {
		b.WriteString(" DISABLE_VARIANT_CHECK = TRUE")
	}
	return b.String()
}

// copyResult reads COPY's reply, one row per file loaded: File,
// Rows_loaded, Errors_seen, First_error, First_error_line. Files are
// keyed by base name (the reply may include the stage path).
func copyResult(res *result) map[string]int64 {
	fileCol, rowsCol := 0, 1
	for i, c := range res.Columns {
		switch strings.ToLower(c) {
		case "file":
			fileCol = i
		case "rows_loaded":
			rowsCol = i
		}
	}
	out := map[string]int64{}
	for _, row := range res.Rows {
		if len(row) <= max(fileCol, rowsCol) || row[fileCol] == nil || row[rowsCol] == nil {
			continue
		}
		name := *row[fileCol]
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		n, _ := strconv.ParseInt(*row[rowsCol], 10, 64)
		out[name] += n
	}
	return out
}

// insertPast inserts the rows of partly loaded files that lie past the
// ledger, reading the staged files with a SELECT (COPY cannot filter
// rows). This happens only when two owners of a partition overlapped: a
// former owner's load landed after the new owner read its position.
func (s *Sink) insertPast(ctx context.Context, ss *session, files []sink.File, skip []sink.Range) error {
	var rowFiles, dlqFiles []string
	for _, f := range files {
		if f.RowsPath != "" {
			rowFiles = append(rowFiles, f.RowsPath)
		}
		if f.DLQPath != "" {
			dlqFiles = append(dlqFiles, f.DLQPath)
		}
	}
	var rawConds, dlqConds []string
	for _, r := range skip {
		rawConds = append(rawConds, fmt.Sprintf("($1:kpartition::INT = %d AND $1:record_metadata:topic::VARCHAR = %s AND $1:koffset::BIGINT <= %d)",
			r.Partition, sqltext.String(r.Topic), r.Last))
		dlqConds = append(dlqConds, fmt.Sprintf("($1:partition::INT = %d AND $1:topic::VARCHAR = %s AND $1:offset::BIGINT <= %d)",
			r.Partition, sqltext.String(r.Topic), r.Last))
	}
	from := func(names []string) string {
		return fmt.Sprintf("%s (FILES => (%s), FILE_FORMAT => %s)", s.location(), sqltext.Strings(names), sqltext.String(fileFormat))
	}
	if len(rowFiles) > 0 {
		q := fmt.Sprintf(`INSERT INTO %s (uuid, koffset, kpartition, raw_data, record_metadata) SELECT $1:uuid::VARCHAR, $1:koffset::BIGINT, $1:kpartition::INT, $1:raw_data, $1:record_metadata FROM %s WHERE NOT (%s)`,
			s.tables.main, from(rowFiles), strings.Join(rawConds, " OR "))
		if _, err := ss.query(ctx, q); err != nil {
			return fmt.Errorf("insert rows past the ledger from %d files: %w", len(rowFiles), err)
		}
	}
	if len(dlqFiles) > 0 {
		q := fmt.Sprintf(`INSERT INTO %s (topic, "partition", "offset", "key", "value", error, stage) SELECT $1:topic::VARCHAR, $1:partition::INT, $1:offset::BIGINT, $1:key::VARCHAR, $1:value::VARCHAR, $1:error::VARCHAR, $1:stage::VARCHAR FROM %s WHERE NOT (%s)`,
			s.tables.dlq, from(dlqFiles), strings.Join(dlqConds, " OR "))
		if _, err := ss.query(ctx, q); err != nil {
			return fmt.Errorf("insert dead-letter rows past the ledger from %d files: %w", len(dlqFiles), err)
		}
	}
	return nil
}

// countLoaded counts, per partition, the rows of this load's ranges in the
// raw and dead-letter tables (inside the transaction: nothing past the
// ledger is there but this load's rows). Only when rows were fenced.
func (s *Sink) countLoaded(ctx context.Context, ss *session, ranges []sink.Range) ([]sink.Range, error) {
	count := func(q string) (int64, error) {
		res, err := ss.query(ctx, q)
		if err != nil {
			return 0, err
		}
		if len(res.Rows) != 1 || len(res.Rows[0]) != 1 || res.Rows[0][0] == nil {
			return 0, fmt.Errorf("count answered %d rows", len(res.Rows))
		}
		return strconv.ParseInt(*res.Rows[0][0], 10, 64)
	}
	out := make([]sink.Range, 0, len(ranges))
	for _, r := range ranges {
		raw, err := count(fmt.Sprintf("SELECT count(*) FROM %s WHERE kpartition = %d AND record_metadata:topic::VARCHAR = %s AND koffset BETWEEN %d AND %d",
			s.tables.main, r.Partition, sqltext.String(r.Topic), r.First, r.Last))
		if err != nil {
			return nil, fmt.Errorf("count loaded rows: %w", err)
		}
		dlq, err := count(fmt.Sprintf(`SELECT count(*) FROM %s WHERE "partition" = %d AND topic = %s AND "offset" BETWEEN %d AND %d`,
			s.tables.dlq, r.Partition, sqltext.String(r.Topic), r.First, r.Last))
		if err != nil {
			return nil, fmt.Errorf("count loaded dead-letter rows: %w", err)
		}
		r.Records, r.DLQ = raw, dlq
		out = append(out, r)
	}
	return out, nil
}

func ledgerInsert(ledger string, ranges []sink.Range, loadID string, files int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `INSERT INTO %s (topic, "partition", first_offset, last_offset, records, dlq_records, load_id, files, loaded_at) VALUES `, ledger)
	for i, r := range ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%s, %d, %d, %d, %d, %d, %s, %d, NOW())",
			sqltext.String(r.Topic), r.Partition, r.First, r.Last, r.Records, r.DLQ, sqltext.String(loadID), files)
	}
	return b.String()
}
