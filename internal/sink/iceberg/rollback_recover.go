package iceberg

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// A rollback of the dead-letter or derived table alone (or further back
// than the main table's) drops rows whose records the main table still
// holds past its positions. Consumption resumes from the main table's
// positions, so the recovery the rollback error names (that table's
// positions set back) would read none of those records again, and the
// rows were lost; setting the main table's positions back as well would
// store its rows twice. Instead a start reads such a partition again
// from the other table's positions: the main table's positions fence
// its own rows out, and that table's commits are fenced by its own
// positions, not raised to the main table's (fenceByMain), until they
// reach the main table's positions of the start.

// startRecovery notes, from tables (each kind's, as Prepare read them),
// the partitions of the dead-letter and derived tables whose position
// was set back after a rollback (setBack) to below the main table's, of
// Kafka's topics (records that can be read again).
func (s *Sink) startRecovery(tables map[kind]*table.Table) error {
	main, err := positions(tables[mainTable])
	if err != nil {
		return err
	}
	rec := map[kind]map[sink.TopicPartition]int64{}
	for k, tbl := range tables {
		if k == mainTable {
			continue
		}
		set, err := setBack(tbl)
		if err != nil {
			return err
		}
		// A recovery an earlier process began and did not finish: its
		// commits named their own loads, so setBack no longer tells it.
		marked, err := recoveryMarks(tbl)
		if err != nil {
			return err
		}
		for tp, p := range set {
			if strings.HasPrefix(tp.Topic, sink.SequenceTopicPrefix) {
				// The OTLP receivers' own sequence: no Kafka to read
				// its requests again from. Resumed lower, its loader
				// would abandon the positions the main table holds
				// rows at; the rows lost stay a gap verify reports.
				continue
			}
			if until, ok := main[tp]; ok && p < until {
				addRecovery(rec, k, tp, until)
				s.log.Info("a table was rolled back alone and its position set back: reading the partition again from it, the main table's rows fenced by the main table's position",
					"table", name(tbl.Identifier()), "partition", tp.String(), "from", p, "main_position", until)
			}
		}
		own, err := positions(tbl)
		if err != nil {
			return err
		}
		for tp, until := range marked {
			if _, ok := rec[k][tp]; !ok && own[tp] < until {
				addRecovery(rec, k, tp, until)
				s.log.Info("a table rolled back alone is still reading a partition again: going on from its position",
					"table", name(tbl.Identifier()), "partition", tp.String(), "from", own[tp], "until", until)
			}
		}
	}
	s.recoverMu.Lock()
	defer s.recoverMu.Unlock()
	s.recovering = rec
	return nil
}

// setBack are the positions of tbl that were set back after a rollback:
// the partition's tracelake.load.* names a load that is not the newest
// kept load of the current branch that set its position (a load the
// rollback dropped; every commit moving a position names itself there),
// and the position is not ahead of what that branch's load set.
func setBack(tbl *table.Table) (map[sink.TopicPartition]int64, error) {
	have, err := positions(tbl)
	if err != nil {
		return nil, err
	}
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return nil, nil
	}
	branch := branchPositions(table.AncestorsOf(cur.SnapshotID, tbl.Metadata().SnapshotByID))
	out := map[sink.TopicPartition]int64{}
	for tp, p := range have {
		by := tbl.Properties()[loadKey(tp)]
		if b, ok := branch[tp]; ok && by != "" && by != b.load && p <= b.pos {
			out[tp] = p
		}
	}
	return out, nil
}

// resumeRecovering lowers out, the main table's positions of parts, to
// the position of a table that reads the partition again (startRecovery).
func (s *Sink) resumeRecovering(ctx context.Context, parts []sink.TopicPartition, out map[sink.TopicPartition]int64) error {
	s.recoverMu.Lock()
	rec := maps.Clone(s.recovering)
	s.recoverMu.Unlock()
	for k, until := range rec {
		var mine []sink.TopicPartition
		for _, tp := range parts {
			if _, ok := until[tp]; ok {
				mine = append(mine, tp)
			}
		}
		if len(mine) == 0 {
			continue
		}
		tbl, err := s.loadTable(ctx, s.id(k))
		if err != nil {
			return err
		}
		pos, err := positions(tbl)
		if err != nil {
			return err
		}
		for _, tp := range mine {
			if p, ok := pos[tp]; ok && p < out[tp] {
				out[tp] = p
			}
		}
	}
	return nil
}

// recoveringOf reports whether table k reads tp again (startRecovery):
// its commits are then fenced by its own position of tp.
func (s *Sink) recoveringOf(k kind, tp sink.TopicPartition) bool {
	s.recoverMu.Lock()
	defer s.recoverMu.Unlock()
	_, ok := s.recovering[k][tp]
	return ok
}

// recovered ends the recovery of table k's partitions that its commit
// moved to next as far as the main table's positions of the start.
func (s *Sink) recovered(k kind, next map[sink.TopicPartition]int64) {
	s.recoverMu.Lock()
	defer s.recoverMu.Unlock()
	for tp, until := range s.recovering[k] {
		if next[tp] >= until {
			delete(s.recovering[k], tp)
			s.log.Info("a table rolled back alone has its rows of the partition again", "table", name(s.id(k)), "partition", tp.String())
		}
	}
}

// addRecovery notes that table k reads tp again until the main table's
// position until.
func addRecovery(rec map[kind]map[sink.TopicPartition]int64, k kind, tp sink.TopicPartition, until int64) {
	if rec[k] == nil {
		rec[k] = map[sink.TopicPartition]int64{}
	}
	rec[k][tp] = until
}

// recoverKeyPrefix begins the properties of a dead-letter or derived
// table naming, per partition it reads again (startRecovery), the main
// table's position the recovery ends at:
// tracelake.recover.<topic>.<partition> = that position. Each commit of
// the recovery writes it with the position it moves, atomically: the
// first one names its own load in tracelake.load.*, after which setBack
// no longer tells a start that the partition is still being read again.
const recoverKeyPrefix = "tracelake.recover."

func recoverKey(tp sink.TopicPartition) string {
	return recoverKeyPrefix + tp.Topic + "." + strconv.Itoa(int(tp.Partition))
}

// recoveryMarks reads tbl's recoverKeyPrefix properties.
func recoveryMarks(tbl *table.Table) (map[sink.TopicPartition]int64, error) {
	out := map[sink.TopicPartition]int64{}
	for key, v := range tbl.Properties() {
		tp, ok, err := partitionKey(key, recoverKeyPrefix)
		if !ok {
			continue
		}
		until, nerr := strconv.ParseInt(v, 10, 64)
		if err != nil || nerr != nil {
			return nil, fmt.Errorf("table %s: property %s=%q: want %s<topic>.<partition> = the main table's position its recovery ends at",
				name(tbl.Identifier()), key, v, recoverKeyPrefix)
		}
		out[tp] = until
	}
	return out, nil
}

// recoveryCommit is what a commit of table k moving its positions from
// start to next (tbl's, as read for it) does for the partitions k reads
// again: it must land even with no row (moved), so that the position
// records how far the recovery has read, and it writes the recovery's
// marks (set) until the position reaches the main table's, removing
// them (drop) then.
func (s *Sink) recoveryCommit(k kind, tbl *table.Table, start, next map[sink.TopicPartition]int64) (set iceberggo.Properties, drop []string, moved bool) {
	if k == mainTable {
		return nil, nil, false
	}
	s.recoverMu.Lock()
	rec := maps.Clone(s.recovering[k])
	s.recoverMu.Unlock()
	set = iceberggo.Properties{}
	for tp, until := range rec {
		if next[tp] == start[tp] {
			continue
		}
		moved = true
		if next[tp] < until {
			set[recoverKey(tp)] = strconv.FormatInt(until, 10)
		}
	}
	for key := range tbl.Properties() {
		if tp, ok, err := partitionKey(key, recoverKeyPrefix); ok && err == nil {
			if _, still := set[key]; !still && next[tp] != start[tp] {
				drop = append(drop, key)
			}
		}
	}
	return set, drop, moved
}

// markRecovery adds set and drop (recoveryCommit's) to txn.
func markRecovery(txn *table.Transaction, set iceberggo.Properties, drop []string) error {
	if len(set) > 0 {
		if err := txn.SetProperties(set); err != nil {
			return fmt.Errorf("set %s*: %w", recoverKeyPrefix, err)
		}
	}
	if len(drop) > 0 {
		if err := txn.RemoveProperties(drop); err != nil {
			return fmt.Errorf("remove %s*: %w", recoverKeyPrefix, err)
		}
	}
	return nil
}
