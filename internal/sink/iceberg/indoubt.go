package iceberg

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// A load commits the dead-letter table first, the main table last. A
// process killed between the two leaves offsets in doubt: past the main
// table's position, below the dead-letter table's. The load that takes
// them again (a restart, another owner) may decode them otherwise — a new
// release, a changed declared type or tokens file — and the dead-letter
// table's positions fence its dead letters out. So the decision already
// committed is honoured offset by offset: an offset in doubt found in the
// dead-letter table stays a dead letter (its bytes are kept there) and no
// other table takes a row of it; one not found there goes to the main
// table if it decodes, else to the dead-letter table past its positions,
// for that offset only. Not the other way round (delete the dead letters
// in doubt, store them as now decoded): a load whose batch ends below the
// range deleted dead letters of an owner still running whose main commit
// then landed without them.
//
// Those late dead letters are committed after the main table's commit, and
// only for the offsets that commit moved the positions over: the killed
// load's process may still be running (a zombie: an old release, slow, its
// partition taken), its main commit yet to land with a row of the same
// offset. Committed first, a late dead letter would stand beside that row;
// after, the main table's positions fence the zombie's commit out. A
// process killed between the main commit and the late one loses those dead
// letters (verify reports the offsets missing).

// inDoubt is what one staged entry's load read of the offsets in doubt.
type inDoubt struct {
	// held are the offsets in doubt the dead-letter table held, per
	// partition.
	held map[sink.TopicPartition]map[int64]bool
	// late are the entry's dead letters of offsets in doubt the
	// dead-letter table did not hold.
	late stagedFiles
	// owned are the main table's positions the entry's main commit
	// moved from (nil while none landed, or another load's took the
	// range): its late dead letters past them are this load's.
	owned map[sink.TopicPartition]int64
	// settled: the dead-letter table was read for the entry
	// (settleDoubt).
	settled bool
	// derived are the ranges per partition ([first, end)) where the
	// derived table's positions were past the main table's as the
	// entry's derived commit read them: rows there are a killed load's
	// (its derived commit landed, its main one not), this load's own
	// fenced out (derivedAhead). Those at the entry's dead letters are
	// marked to delete by its main commit (deadDerivedMarks).
	derived map[sink.TopicPartition][2]int64
	// dead are the offsets in derived of the entry's dead letters its
	// dead-letter table's commit holds (its late ones aside), read when
	// derived is noted: that commit was just made, and maintenance may
	// compact its files away before the main commit (a retry).
	dead map[sink.TopicPartition][]int64
}

// decided reports whether offset o of tp was in doubt and is a dead
// letter already.
func (d *inDoubt) decided(tp sink.TopicPartition, o int64) bool {
	return d != nil && d.held[tp][o]
}

// decides reports whether an offset of ranges is a dead letter already.
func (d *inDoubt) decides(ranges []sink.Range) bool {
	if d == nil {
		return false
	}
	for _, r := range ranges {
		for o := range d.held[r.TopicPartition] {
			if o >= r.First && o <= r.Last {
				return true
			}
		}
	}
	return false
}

// own records from where the entry's main commit moves the positions.
func (d *inDoubt) own(from map[sink.TopicPartition]int64) {
	if d != nil {
		d.owned = from
	}
}

// settleDoubt reads, for the entries the dead-letter table's positions
// (start, of dlq as read) reach, the offsets in doubt the table holds, and
// sets aside each entry's dead letters of the others as its late ones.
// Once per entry: its dead-letter files are dropped as fenced afterwards.
func (s *Sink) settleDoubt(ctx context.Context, dlq *table.Table, start map[sink.TopicPartition]int64, entries []*staged, main *mainPositions) error {
	var reached []*staged
	for _, st := range entries {
		// Not where this load's own earlier attempt committed the
		// dead letters (a later table's commit failed): they are its
		// decision, and its files may be compacted away since.
		own := st.dlq.landed || committedBy(dlq, st.dlq.tried) || movedBy(dlq, st.ranges, st.dlq.tried)
		if (st.doubt == nil || !st.doubt.settled) && !own && covered(st.ranges, start) != coversNone {
			reached = append(reached, st)
		}
	}
	if len(reached) == 0 {
		return nil // the usual load: the dead-letter table lags its ranges
	}
	mainPos, err := main.get(ctx, s)
	if err != nil {
		return err
	}
	// The range in doubt per partition: past the main table's position,
	// below the dead-letter table's. Not of a partition a rollback is
	// being recovered in: its positions were set back on purpose. Nor of
	// an OTLP receivers' sequence: another process's load there holds
	// other requests at the same positions, not the same records
	// (fenced as abandoned instead).
	doubt := map[sink.TopicPartition][2]int64{}
	for _, st := range reached {
		for _, r := range st.ranges {
			tp := r.TopicPartition
			if s.recoveringOf(dlqTable, tp) || s.recoveringOf(mainTable, tp) || strings.HasPrefix(tp.Topic, sink.SequenceTopicPrefix) {
				continue
			}
			from, to := max(mainPos[tp], r.First), min(start[tp], r.Last+1)
			if from >= to {
				continue
			}
			if d, ok := doubt[tp]; ok {
				from, to = min(from, d[0]), max(to, d[1])
			}
			doubt[tp] = [2]int64{from, to}
		}
	}
	held := map[sink.TopicPartition]map[int64]bool{}
	if len(doubt) > 0 {
		if held, err = deadLettersIn(ctx, dlq, doubt); err != nil {
			return err
		}
	}
	for _, st := range reached {
		d := &inDoubt{}
		if st.doubt != nil {
			*d = *st.doubt // what the derived table's commit noted
		}
		d.held, d.settled = map[sink.TopicPartition]map[int64]bool{}, true
		for _, r := range st.ranges {
			if _, ok := doubt[r.TopicPartition]; ok {
				d.held[r.TopicPartition] = held[r.TopicPartition]
			}
		}
		if len(d.held) > 0 && len(st.dlq.files) > 0 {
			lateOnes := func(tp sink.TopicPartition, o int64) bool {
				b, ok := doubt[tp]
				return ok && o >= b[0] && o < b[1] && !held[tp][o]
			}
			files, cnt, err := s.refence(ctx, dlq, st.dlq.files, dlqTable, lateOnes)
			if err != nil {
				return fmt.Errorf("set aside the dead letters of offsets in doubt: %w", err)
			}
			s.setFiles(&d.late, files, cnt)
		}
		s.mu.Lock() // the lease renewal reads it
		st.doubt = d
		s.mu.Unlock()
	}
	return nil
}

// deadLettersIn reads the offsets of tbl's dead letters in ranges (per
// partition, [first, end)).
func deadLettersIn(ctx context.Context, tbl *table.Table, ranges map[sink.TopicPartition][2]int64) (map[sink.TopicPartition]map[int64]bool, error) {
	var parts []iceberggo.BooleanExpression
	for tp, r := range ranges {
		parts = append(parts, iceberggo.NewAnd(
			iceberggo.EqualTo(iceberggo.Reference("topic"), tp.Topic),
			iceberggo.EqualTo(iceberggo.Reference("partition"), tp.Partition),
			iceberggo.GreaterThanEqual(iceberggo.Reference("offset"), r[0]),
			iceberggo.LessThan(iceberggo.Reference("offset"), r[1])))
	}
	filter := parts[0]
	if len(parts) > 1 {
		filter = iceberggo.NewOr(parts[0], parts[1], parts[2:]...)
	}
	_, batches, err := tbl.Scan(table.WithSelectedFields("topic", "partition", "offset"), table.WithRowFilter(filter)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan %s for the dead letters in doubt: %w", name(tbl.Identifier()), err)
	}
	out := map[sink.TopicPartition]map[int64]bool{}
	for rec, err := range batches {
		if err != nil {
			return nil, fmt.Errorf("scan %s for the dead letters in doubt: %w", name(tbl.Identifier()), err)
		}
		sc := rec.Schema()
		topics := rec.Column(sc.FieldIndices("topic")[0]).(*array.String)
		parts := rec.Column(sc.FieldIndices("partition")[0]).(*array.Int32)
		offsets := rec.Column(sc.FieldIndices("offset")[0]).(*array.Int64)
		for i := range int(rec.NumRows()) {
			tp := sink.TopicPartition{Topic: topics.Value(i), Partition: parts.Value(i)}
			// The scan's filter prunes files; rows of other
			// offsets may come with the kept ones.
			if r, ok := ranges[tp]; ok && offsets.Value(i) >= r[0] && offsets.Value(i) < r[1] {
				if out[tp] == nil {
					out[tp] = map[int64]bool{}
				}
				out[tp][offsets.Value(i)] = true
			}
		}
		rec.Release()
	}
	return out, nil
}

// commitLate adds the late dead letters of entries whose main commit made
// their range this load's, past the dead-letter table's positions, which it
// leaves as they are; it returns the dead letters added per entry and
// partition. Those of an entry another load's main commit fenced are
// dropped: the offsets are that load's.
func (s *Sink) commitLate(ctx context.Context, entries []*staged, loadID string) ([]map[sink.TopicPartition]int64, error) {
	counts := make([]map[sink.TopicPartition]int64, len(entries))
	if !anyLate(entries) {
		return counts, nil
	}
	// Its own load id: the load's commit of the dead-letter table has
	// the load's, and a retry tells this one apart by it.
	lateID := loadID + "-late"
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	fresh, err := s.loadTable(ctx, s.dlq)
	if err != nil {
		return nil, err
	}
	if err := s.checkBranch(fresh); err != nil {
		return nil, err
	}
	s.remember(fresh)
	start, err := positions(fresh)
	if err != nil {
		return nil, err
	}
	var add []iceberggo.DataFile
	for i, st := range entries {
		if st.doubt == nil {
			continue
		}
		lf := &st.doubt.late
		switch {
		case lf.landed || committedBy(fresh, lf.tried):
			counts[i] = lf.counts
			continue
		case len(lf.files) == 0:
			continue
		case st.doubt.owned == nil:
			s.dropFiles(ctx, dlqTable, lf)
			continue
		case covered(st.ranges, st.doubt.owned) != coversNone:
			// Another load's main commit took part of the range
			// first: its offsets are that load's.
			files, cnt, err := s.refence(ctx, fresh, lf.files, dlqTable, pastPositions(st.doubt.owned))
			if err != nil {
				return nil, err
			}
			s.dropFiles(ctx, dlqTable, lf)
			s.setFiles(lf, files, cnt)
		}
		counts[i] = lf.counts
		add = append(add, lf.files...)
	}
	if len(add) == 0 {
		return counts, nil
	}
	txn, summary, err := beginPositionsCommit(fresh, start, start, lateID)
	if err != nil {
		return nil, err
	}
	if err := s.acceptRollbacks(txn, fresh); err != nil {
		return nil, err
	}
	if err := addFiles(ctx, txn, fresh, dlqSchema, add, summary); err != nil {
		return nil, err
	}
	if s.beforeCatalogCommit != nil {
		s.beforeCatalogCommit(name(s.dlq))
	}
	began := time.Now()
	committed, err := txn.Commit(ctx)
	if err != nil && !LostRace(err) {
		if tbl := s.landedAfterAll(ctx, s.dlq, lateID, err); tbl != nil {
			committed, err = tbl, nil
		}
	}
	s.reportCommit(ctx, s.dlq, time.Since(began), committed, err)
	for _, st := range entries {
		if st.doubt == nil || len(st.doubt.late.files) == 0 {
			continue
		}
		lf := &st.doubt.late
		switch {
		case err == nil:
			lf.referenced, lf.landed = true, true
		case !LostRace(err):
			lf.referenced = true
			lf.tried = append(lf.tried, lateID)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	s.committedBranch(committed)
	s.remember(committed)
	return counts, nil
}

func anyLate(entries []*staged) bool {
	for _, st := range entries {
		if d := st.doubt; d != nil && (len(d.late.files) > 0 || d.late.landed || len(d.late.tried) > 0) {
			return true
		}
	}
	return false
}

// A load killed between its derived table's commit and its main table's
// leaves derived rows past the main table's positions (whether or not it
// had dead letters: the dead-letter table's commit is skipped when it has
// none). The load that takes the range again has its own derived rows
// there fenced out by the derived table's positions, and the killed
// load's stay: of an offset this load now stores as a dead letter, they
// would stay beside the dead letter, derived from a row no table holds.
// So this load's main commit, which makes the range its own (not before:
// an owner still running may yet land the main rows they came with),
// marks its dead letters' offsets there (deadDerivedKeyPrefix), and the
// derived rows at them are deleted after it, before its late dead letters
// are added (finishDeadDerived). A process stopped between the main commit
// and that deletion leaves the mark: the next load of the partition, or
// the next assignment, deletes them. Stopped before the late dead letters,
// an offset is a gap verify reports, not a dead letter beside a derived
// row.

// derivedAhead notes, for the entries the derived table's positions
// (start, of tbl as read) reach past the main table's, the ranges of
// those rows (inDoubt.derived). Once per entry, and not where this load's
// own earlier attempt committed the derived rows.
func (s *Sink) derivedAhead(ctx context.Context, tbl *table.Table, start map[sink.TopicPartition]int64, entries []*staged, main *mainPositions) error {
	var mainPos map[sink.TopicPartition]int64
	for _, st := range entries {
		own := st.derived.landed || committedBy(tbl, st.derived.tried) || movedBy(tbl, st.ranges, st.derived.tried)
		if (st.doubt != nil && st.doubt.derived != nil) || own || covered(st.ranges, start) == coversNone {
			continue // the usual load: the derived table lags its ranges
		}
		if mainPos == nil {
			var err error
			if mainPos, err = main.get(ctx, s); err != nil {
				return err
			}
		}
		ahead := map[sink.TopicPartition][2]int64{}
		for _, r := range st.ranges {
			tp := r.TopicPartition
			// As settleDoubt: not a rollback's recovery, nor an OTLP
			// receivers' sequence (other requests at the positions).
			if s.recoveringOf(derivedTable, tp) || strings.HasPrefix(tp.Topic, sink.SequenceTopicPrefix) {
				continue
			}
			if from, to := max(mainPos[tp], r.First), min(start[tp], r.Last+1); from < to {
				ahead[tp] = [2]int64{from, to}
			}
		}
		if len(ahead) == 0 {
			continue
		}
		// The dead-letter table's commit is behind: the staged files
		// left are those it (or an earlier attempt) committed, the
		// fenced ones dropped. Read now, while they are the table's
		// current files.
		dead := map[sink.TopicPartition][]int64{}
		in := func(tp sink.TopicPartition, o int64) bool {
			r, ok := ahead[tp]
			return ok && o >= r[0] && o < r[1]
		}
		if err := s.deadLetterOffsets(ctx, st.dlq.files, in, dead); err != nil {
			return fmt.Errorf("read the dead letters of a range the derived table's positions passed: %w", err)
		}
		s.mu.Lock() // the lease renewal reads st.doubt
		if st.doubt == nil {
			st.doubt = &inDoubt{}
		}
		st.doubt.derived, st.doubt.dead = ahead, dead
		s.mu.Unlock()
	}
	return nil
}

// deadDerivedKeyPrefix begins the main table's properties listing, in the
// form of abandoningKeyPrefix, a partition's offsets whose rows in the
// derived table are to delete: dead letters of a load, in a range its main
// commit made its own, where the derived table holds a killed load's rows
// (derivedAhead). Set by that commit, atomically with its positions;
// cleared once the rows are deleted (finishDeadDerived).
const deadDerivedKeyPrefix = "tracelake.dead-derived."

// deadDerivedMarks are the main table's properties (props, as read for its
// commit) marking the offsets of the entries' dead letters whose derived
// rows are to delete, added to those marked already: in the ranges
// derivedAhead noted, from where each entry's main commit moves the
// positions (inDoubt.owned). None for the usual load.
func (s *Sink) deadDerivedMarks(ctx context.Context, props iceberggo.Properties, entries []*staged) (iceberggo.Properties, error) {
	dead := map[sink.TopicPartition][]int64{}
	for _, st := range entries {
		d := st.doubt
		if d == nil || d.derived == nil || d.owned == nil {
			continue
		}
		in := func(tp sink.TopicPartition, o int64) bool {
			r, ok := d.derived[tp]
			return ok && o >= max(r[0], d.owned[tp]) && o < r[1]
		}
		// Those the dead-letter table's commit holds, as read when the
		// range was noted (its files may be compacted away since), and
		// the late ones, staged still: they commit after this.
		for tp, offs := range d.dead {
			for _, o := range offs {
				if in(tp, o) {
					dead[tp] = append(dead[tp], o)
				}
			}
		}
		if err := s.deadLetterOffsets(ctx, d.late.files, in, dead); err != nil {
			return nil, fmt.Errorf("read the dead letters of a range the derived table's positions passed: %w", err)
		}
	}
	set := iceberggo.Properties{}
	for tp, offs := range dead {
		key := runsKey(deadDerivedKeyPrefix, tp)
		runs, err := parseRuns(key, props[key])
		if err != nil {
			return nil, err
		}
		set[key] = formatRuns(append(runs, runsOfOffsets(offs)...))
	}
	return set, nil
}

// finishDeadDerivedOf is finishDeadDerived of the entries' partitions, by
// the main table as this load's commit left it.
func (s *Sink) finishDeadDerivedOf(ctx context.Context, entries []*staged) error {
	tbl, err := s.table(ctx, s.raw)
	if err != nil {
		return err
	}
	var parts []sink.TopicPartition
	for _, st := range entries {
		for _, r := range st.ranges {
			parts = append(parts, r.TopicPartition)
		}
	}
	return s.finishDeadDerived(ctx, tbl, parts)
}

// finishDeadDerived deletes the derived table's rows at the offsets of
// parts that the main table (tbl, as last read) marks as dead letters
// (deadDerivedKeyPrefix), then clears the marks; it reads nothing more
// where none is marked. Each partition's rows are deleted in one commit of
// the derived table that leaves its positions as they are; stopped before
// the mark is cleared, the next run deletes nothing more.
func (s *Sink) finishDeadDerived(ctx context.Context, tbl *table.Table, parts []sink.TopicPartition) error {
	var marked []sink.TopicPartition
	for _, tp := range parts {
		if _, ok := tbl.Properties()[runsKey(deadDerivedKeyPrefix, tp)]; ok {
			marked = append(marked, tp)
		}
	}
	if len(marked) == 0 {
		return nil
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	fresh, err := s.loadTable(ctx, s.raw)
	if err != nil {
		return err
	}
	for _, tp := range marked {
		key := runsKey(deadDerivedKeyPrefix, tp)
		runs, err := parseRuns(key, fresh.Properties()[key])
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			continue // another process finished it since tbl was read
		}
		if _, err := s.commitLostRaces(ctx, "the deletion of derived rows at dead letters", s.derived, func(tbl *table.Table) (*table.Transaction, error) {
			start, err := positions(tbl)
			if err != nil {
				return nil, err
			}
			txn, summary, err := beginPositionsCommit(tbl, start, start, newLoadID())
			if err != nil {
				return nil, err
			}
			return txn, txn.Delete(ctx, runsFilter(derivedTable, tp, runs), summary)
		}); err != nil {
			return fmt.Errorf("delete the rows of %s at the dead letters %s of %s: %w", name(s.derived), formatRuns(runs), tp, err)
		}
		committed, err := s.commitLostRaces(ctx, "the mark of derived rows deleted", s.raw, func(tbl *table.Table) (*table.Transaction, error) {
			return s.unmarkTxn(ctx, tbl, deadDerivedKeyPrefix, tp, runs)
		})
		if err != nil {
			return fmt.Errorf("clear the mark of the dead letters %s of %s, their derived rows deleted: %w", formatRuns(runs), tp, err)
		}
		if committed != nil {
			s.committedBranch(committed)
			s.remember(committed)
		}
		s.log.Info("deleted the derived rows of a killed load at dead letters", "table", name(s.derived), "partition", tp, "positions", formatRuns(runs))
	}
	return nil
}

// deadLetterOffsets adds to out the offsets of the dead letters in files
// (the dead-letter table's) that in takes.
func (s *Sink) deadLetterOffsets(ctx context.Context, files []iceberggo.DataFile, in func(sink.TopicPartition, int64) bool, out map[sink.TopicPartition][]int64) error {
	if len(files) == 0 {
		return nil
	}
	tbl, err := s.table(ctx, s.dlq)
	if err != nil {
		return err
	}
	sc, err := arrowSchema(tbl, dlqSchema)
	if err != nil {
		return err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return err
	}
	// Read, not written again: the filter takes no row, noting each.
	note := func(tp sink.TopicPartition, o int64) bool {
		if in(tp, o) {
			out[tp] = append(out[tp], o)
		}
		return false
	}
	for _, df := range files {
		if _, err := readFenced(ctx, fs, df.FilePath(), sc, true, note, map[sink.TopicPartition]int64{}, func(arrow.RecordBatch) bool { return true }); err != nil {
			return fmt.Errorf("read %s: %w", df.FilePath(), err)
		}
	}
	return nil
}

// runsOfOffsets are offs (unsorted, maybe repeated) as sorted runs.
func runsOfOffsets(offs []int64) []sink.Run {
	offs = slices.Compact(slices.Sorted(slices.Values(offs)))
	var runs []sink.Run
	for _, o := range offs {
		if n := len(runs); n > 0 && runs[n-1].Last+1 == o {
			runs[n-1].Last = o
			continue
		}
		runs = append(runs, sink.Run{First: o, Last: o})
	}
	return runs
}
