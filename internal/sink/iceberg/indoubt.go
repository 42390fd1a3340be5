package iceberg

import (
	"context"
	"fmt"
	"strings"
	"time"

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
		if st.doubt == nil && !own && covered(st.ranges, start) != coversNone {
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
		d := &inDoubt{held: map[sink.TopicPartition]map[int64]bool{}}
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
		if st.doubt != nil && (len(st.doubt.late.files) > 0 || st.doubt.late.landed || len(st.doubt.late.tried) > 0) {
			return true
		}
	}
	return false
}
