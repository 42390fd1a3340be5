package iceberg

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/tracelake/tracelake/internal/sink"
)

// RollbackCheckedKey is the table property listing (comma-separated) the
// snapshot ids of rolled-back loads whose records are accounted for: the
// first commit of a process started with the positions set back (the
// recovery the rollback error names) writes it, atomically with its rows,
// and a user may set it after dealing with records a load on top of a
// rollback skipped. A property, not a summary: it outlives the expiry of
// the snapshot that wrote it, and a branch moved back again still shows
// the loads it drops as rolled back.
const RollbackCheckedKey = "tracelake.rollback-checked"

// rollback is what a table's metadata says of loads its current branch
// dropped.
type rollback struct {
	// lost are tracelake loads (isLoad) the current branch does not
	// descend from and RollbackCheckedKey does not name, oldest first:
	// the branch was set back past them (an engine's
	// rollback_to_snapshot) and their rows are gone from the table.
	lost []table.Snapshot
	// onTop: a load on the current branch is newer than one of lost: it
	// committed after the rollback, from positions taken as they were,
	// and the records of the lost load it did not load again were
	// skipped.
	onTop bool
	// ahead: a position (the properties') is ahead of what the current
	// branch's loads record for a partition a lost load moved: the next
	// load would skip its records. Set back to at most those, and with no
	// load on top, the rollback is accounted for by the loads to come.
	ahead bool
	// gone says how loads the branch dropped were found when an expiry
	// has removed their snapshots (lost then lacks them): by a position
	// that a load off the branch set (goneLoads), or by the branch's
	// sequence number gone back (wentBack). "" if none was.
	gone string
}

// findRollback reads meta and props (a table's) for loads its current
// branch dropped; nil if there is none. In memory: a walk of the
// snapshots the metadata lists (sequence numbers alone cannot say it: a
// load on top of the rollback is newer than the loads it dropped).
func findRollback(meta table.Metadata, props iceberggo.Properties) *rollback {
	return findRollbackExcept(meta, props, checkedRollbacks(props))
}

// findRollbackExcept is findRollback with the loads accounted for given
// by checked, not read from props.
func findRollbackExcept(meta table.Metadata, props iceberggo.Properties, checked map[int64]bool) *rollback {
	cur := meta.CurrentSnapshot()
	if cur == nil {
		return nil
	}
	branch := map[int64]bool{}
	var loads []table.Snapshot // of the current branch
	chain, complete := table.AncestorsOfChecked(cur.SnapshotID, meta.SnapshotByID)
	for _, s := range chain {
		branch[s.SnapshotID] = true
		if isLoad(&s) {
			loads = append(loads, s)
		}
	}
	r := &rollback{}
	for _, s := range meta.Snapshots() {
		if branch[s.SnapshotID] || !isLoad(&s) || checked[s.SnapshotID] {
			continue
		}
		// The branch's walk stops at a snapshot whose parent expired:
		// a load older than that may be one of the branch's own,
		// kept by a tag or another branch while expiry removed the
		// branch's snapshots after it. Loads a rollback dropped are
		// newer than the snapshot the branch was set back to, which
		// the walk reaches unless it expired too.
		if !complete && len(chain) > 0 && compareAge(&s, &chain[len(chain)-1]) < 0 {
			continue
		}
		r.lost = append(r.lost, s)
	}
	// Loads dropped and expired since are known by the positions they
	// left ahead.
	branchSet := branchPositions(chain)
	r.gone = goneLoads(branchSet, props)
	r.ahead = r.gone != ""
	if len(r.lost) == 0 {
		if !r.ahead {
			return nil
		}
		return r
	}
	slices.SortFunc(r.lost, func(a, b table.Snapshot) int { return compareAge(&a, &b) })
	// The oldest lost load: a load on the branch newer than it came after
	// the rollback (a branch's snapshots after its fork are all newer
	// than the loads it dropped).
	r.onTop = slices.ContainsFunc(loads, func(s table.Snapshot) bool { return compareAge(&s, &r.lost[0]) > 0 })
	have, err := parsePositions(props)
	if err != nil {
		r.ahead = true
		return r
	}
	for _, l := range r.lost {
		moved, err := parsePositions(l.Summary.Properties)
		if err != nil {
			r.ahead = true
			continue
		}
		for tp, n := range moved {
			p, set := have[tp]
			switch b, known := branchSet[tp]; {
			case !set:
			case known && p > b.pos:
				r.ahead = true
			case !known && p >= n:
				// No load of the branch's kept snapshots set it: only a
				// position set back below the lost load's says the
				// user took it back.
				r.ahead = true
			}
		}
	}
	return r
}

// compareAge orders snapshots by when they were committed: by sequence
// number, by timestamp where those tie (format 1 tables have none).
func compareAge(a, b *table.Snapshot) int {
	if c := a.SequenceNumber - b.SequenceNumber; c != 0 {
		if c < 0 {
			return -1
		}
		return 1
	}
	switch {
	case a.TimestampMs < b.TimestampMs:
		return -1
	case a.TimestampMs > b.TimestampMs:
		return 1
	}
	return 0
}

// checkedRollbacks reads RollbackCheckedKey.
func checkedRollbacks(props iceberggo.Properties) map[int64]bool {
	out := map[int64]bool{}
	for _, f := range strings.Split(props[RollbackCheckedKey], ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64); err == nil {
			out[id] = true
		}
	}
	return out
}

// accountedFor reports whether the rollback needs nothing more from the
// user: no load on top of it, and the positions not ahead of the data.
func (r *rollback) accountedFor() bool { return r == nil || (!r.onTop && !r.ahead) }

// ids are the lost loads' snapshot ids.
func (r *rollback) ids() []int64 {
	var out []int64
	for _, s := range r.lost {
		out = append(out, s.SnapshotID)
	}
	return out
}

// rollbackError is the error stopping tracelake on a table r says was
// rolled back, naming what to do: the same at the start and at a load.
func rollbackError(tbl *table.Table, r *rollback) error {
	cur := tbl.CurrentSnapshot()
	if len(r.lost) == 0 {
		return fmt.Errorf("%w: table %s was rolled back past tracelake's loads whose snapshots have expired since: %s, "+
			"so the positions (properties %s*) are ahead of the data and tracelake would skip the rolled-back records. %s",
			sink.ErrFatal, name(tbl.Identifier()), r.gone, PositionKeyPrefix, setPositionsBack(tbl, cur))
	}
	lost := r.lost[len(r.lost)-1]
	if r.onTop {
		return fmt.Errorf("%w: table %s was rolled back: tracelake's load %d is not in its current branch (snapshot %d), and loads were committed on top of the rollback "+
			"from positions that were ahead of the data, so the records of the rolled-back loads that they did not load again were skipped (tracelake verify shows which). "+
			"Load them again if Kafka still has them, then set the property %s=%s to acknowledge the rolled-back snapshots, and restart",
			sink.ErrFatal, name(tbl.Identifier()), lost.SnapshotID, cur.SnapshotID, RollbackCheckedKey, joinIDs(mergeChecked(tbl, r.ids())))
	}
	return fmt.Errorf("%w: table %s was rolled back: its current snapshot %d does not descend from tracelake's load %d, "+
		"so the positions (properties %s*) are ahead of the data and tracelake would skip the rolled-back records. %s",
		sink.ErrFatal, name(tbl.Identifier()), cur.SnapshotID, lost.SnapshotID, PositionKeyPrefix, setPositionsBack(tbl, cur))
}

// setPositionsBack is the recovery a rollback error names: the positions
// of the current snapshot cur to set.
func setPositionsBack(tbl *table.Table, cur *table.Snapshot) string {
	return fmt.Sprintf("To load them again (while Kafka still has them), "+
		"set the position properties to those of snapshot %d, as its loads' summaries record them (%s; a partition not named had no load in the snapshots kept), and restart",
		cur.SnapshotID, formatPositions(positionsAt(tbl.Metadata(), cur)))
}

// goneLoads finds, by the properties alone, a load the branch dropped
// whose snapshot is gone (expired after the rollback, before anyone
// checked): a partition whose position is ahead of what the newest load
// of the current branch's kept snapshots moving it set (branch, from
// branchPositions), and whose tracelake.load.* property names another load. Every
// commit moving a position names itself there in the same commit, so
// that load committed after the branch's, and is not on the branch. A
// position set forward by hand keeps the branch's load named; one set
// back (the recovery) is not ahead. It says which partition, "" if none.
func goneLoads(branch map[sink.TopicPartition]branchLoad, props iceberggo.Properties) string {
	have, err := parsePositions(props)
	if err != nil {
		return ""
	}
	var out []string
	for tp, p := range have {
		by := props[loadKey(tp)]
		if by == "" {
			continue // written before tracelake named the loads
		}
		if b, ok := branch[tp]; ok && p > b.pos && by != b.load {
			out = append(out, fmt.Sprintf("%s=%d was set by load %s, not on the current branch, whose loads set it to %d", positionKey(tp), p, by, b.pos))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// mergeChecked is RollbackCheckedKey's ids with ids added, less those of
// snapshots the table no longer has (expired: nothing left to tell).
func mergeChecked(tbl *table.Table, ids []int64) []int64 {
	all := checkedRollbacks(tbl.Properties())
	for _, id := range ids {
		all[id] = true
	}
	var out []int64
	for id := range all {
		if tbl.Metadata().SnapshotByID(id) != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

// branchLoad is what the newest load of a branch setting a partition's
// position set it to, and that load's id.
type branchLoad struct {
	pos  int64
	load string
}

// branchPositions is, for every partition a load of chain (a branch's
// kept snapshots, newest first) set, what the newest such load set: one
// walk for all partitions, as the walk grows with the table.
func branchPositions(chain []table.Snapshot) map[sink.TopicPartition]branchLoad {
	out := map[sink.TopicPartition]branchLoad{}
	for _, s := range chain {
		if s.Summary == nil {
			continue
		}
		set, err := parsePositions(s.Summary.Properties)
		if err != nil {
			continue
		}
		for tp, n := range set {
			if _, newer := out[tp]; !newer {
				out[tp] = branchLoad{pos: n, load: s.Summary.Properties[loadIDKey]}
			}
		}
	}
	return out
}

// branchState is what the process knows of a table's branch, for the
// rollback check at each commit (guarded by commitMu).
type branchState struct {
	// seen is the current snapshot as this process last checked it (0:
	// none): a current snapshot descending from it was not rolled back
	// since.
	seen int64
	// seenSeq is seen's sequence number: a branch's only grow, so once
	// seen has expired, a current snapshot whose walk back reaches a
	// lower one without passing seen was set back (wentBack).
	seenSeq int64
	// accepted are lost loads found at the start with the positions set
	// back (rollback.accountedFor): this process's loads read from those
	// positions, so its first commit lists them in RollbackCheckedKey.
	accepted []int64
	// known are the loads off the branch this process's records
	// account for: RollbackCheckedKey's as the start read it, and
	// accepted. A load listed there since (by another process's
	// recovery, or the user) was rolled back while this process read on
	// from where it was: it is not accounted for by this process's
	// records.
	known map[int64]bool
}

// startBranch records tbl's branch as Prepare checked it, and the lost
// loads r it accepted.
func (s *Sink) startBranch(tbl *table.Table, r *rollback) {
	st := &branchState{known: checkedRollbacks(tbl.Properties())}
	st.see(tbl.CurrentSnapshot())
	if r != nil {
		st.accepted = r.ids()
		for _, id := range st.accepted {
			st.known[id] = true
		}
		s.log.Info("table was rolled back past tracelake's loads and its positions were set back to its data: loading from them",
			"table", name(tbl.Identifier()), "rolled_back_snapshots", joinIDs(st.accepted))
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if s.branches == nil {
		s.branches = map[string]*branchState{}
	}
	s.branches[name(tbl.Identifier())] = st
}

// checkBranch is the rollback check of a commit that moves positions,
// on tbl as read for it (under commitMu): a rollback since this process
// last saw the branch (another engine's, while it ran) is an error, a
// fatal one, before anything is committed. The positions set back while
// it ran do not account for it: this process's records come from where
// it read before, not from them; a restart reads from them. Cheap when
// the branch only grew: a walk back to the snapshot seen last.
func (s *Sink) checkBranch(tbl *table.Table) error {
	key := name(tbl.Identifier())
	st := s.branches[key]
	if st == nil {
		st = &branchState{known: checkedRollbacks(tbl.Properties())}
		if s.branches == nil {
			s.branches = map[string]*branchState{}
		}
		s.branches[key] = st
	}
	meta := tbl.Metadata()
	cur := meta.CurrentSnapshot()
	if cur == nil {
		return nil
	}
	if st.seen == 0 || droppedSince(meta, cur, st.seen, st.known) {
		// Loads accounted for by this process's records only: one
		// RollbackCheckedKey lists since the start was accepted by
		// another process's recovery, whose records come from the
		// positions set back; this one's come from where it read.
		r := findRollbackExcept(meta, tbl.Properties(), st.known)
		if r == nil && wentBack(meta, cur, st.seen, st.seenSeq) {
			// The loads dropped expired, and the positions were set
			// back (else the properties tell, goneLoads).
			return fmt.Errorf("%w: table %s was rolled back while this process ran: its current snapshot %d (sequence number %d) does not descend from snapshot %d (sequence number %d, expired since), "+
				"the current one when this process last checked; this process reads on from where it was, not from the positions as they now are, and would skip the rolled-back records; "+
				"if the positions were set back for them, restart it to read from them, else %s",
				sink.ErrFatal, name(tbl.Identifier()), cur.SnapshotID, cur.SequenceNumber, st.seen, st.seenSeq, setPositionsBack(tbl, cur))
		}
		if r != nil {
			checked := checkedRollbacks(tbl.Properties())
			if len(r.lost) > 0 && !slices.ContainsFunc(r.lost, func(l table.Snapshot) bool { return !checked[l.SnapshotID] }) {
				return fmt.Errorf("%w: table %s was rolled back past tracelake's load %d while this process ran, and its positions were set back since (%s lists it): "+
					"this process reads on from where it was, not from the positions set back, and would skip the rolled-back records; restart it to read from them",
					sink.ErrFatal, name(tbl.Identifier()), r.lost[len(r.lost)-1].SnapshotID, RollbackCheckedKey)
			}
			return rollbackError(tbl, r)
		}
	}
	st.see(cur)
	return nil
}

// see records cur (nil: none) as the branch's current snapshot as this
// process last checked it.
func (st *branchState) see(cur *table.Snapshot) {
	if cur != nil {
		st.seen, st.seenSeq = cur.SnapshotID, cur.SequenceNumber
	}
}

// wentBack reports whether cur, the branch's current snapshot, provably
// does not descend from snapshot seen (sequence number seq), which the
// metadata no longer lists (expired): walking back from cur, a snapshot
// with a sequence number up to seq comes before seen or its child. A
// walk ending at an expired parent first cannot tell (false), nor can a
// table of format 1 (no sequence numbers).
func wentBack(meta table.Metadata, cur *table.Snapshot, seen, seq int64) bool {
	if seen == 0 || seq <= 0 || meta.SnapshotByID(seen) != nil {
		return false
	}
	for _, s := range table.AncestorsOf(cur.SnapshotID, meta.SnapshotByID) {
		if s.SnapshotID == seen || (s.ParentSnapshotID != nil && *s.ParentSnapshotID == seen) {
			return false
		}
		if s.SequenceNumber <= seq {
			return true
		}
	}
	return false
}

// droppedSince reports whether the branch may have dropped a load since
// snapshot id was its current one (as this process last checked it), so
// that the full check must tell: cur does not descend from id, or a load
// not in known was the branch's current snapshot after id (the table's
// snapshot log) and is not on the way back from cur to id. That cur
// descends from id is not enough: a rollback to id, or to any snapshot
// after it, drops the loads of other processes committed after it, and
// keeps their positions. Cheap when the branch only grew: a walk back
// to id and the log's entries since.
func droppedSince(meta table.Metadata, cur *table.Snapshot, id int64, known map[int64]bool) bool {
	seen := meta.SnapshotByID(id)
	if seen == nil {
		return true // expired: the full check tells
	}
	way := map[int64]bool{}
	reached := false
	for _, s := range table.AncestorsOf(cur.SnapshotID, meta.SnapshotByID) {
		way[s.SnapshotID] = true
		if s.SnapshotID == id {
			reached = true
			break
		}
		if compareAge(&s, seen) < 0 {
			break
		}
	}
	if !reached {
		return true
	}
	after := false
	for e := range meta.SnapshotLogs() {
		switch {
		case !after:
			after = e.SnapshotID == id
		case !way[e.SnapshotID] && !known[e.SnapshotID]:
			if s := meta.SnapshotByID(e.SnapshotID); s != nil && isLoad(s) {
				return true
			}
		}
	}
	// A log without id's entry (trimmed, or not kept by an engine): the
	// full check.
	return !after
}

// acceptRollbacks adds to txn, a commit moving tbl's positions, the lost
// loads this process accepted at its start to RollbackCheckedKey: its
// rows (read from the positions set back) account for them.
func (s *Sink) acceptRollbacks(txn *table.Transaction, tbl *table.Table) error {
	st := s.branches[name(tbl.Identifier())]
	if st == nil || len(st.accepted) == 0 {
		return nil
	}
	if err := txn.SetProperties(iceberggo.Properties{RollbackCheckedKey: joinIDs(mergeChecked(tbl, st.accepted))}); err != nil {
		return fmt.Errorf("set %s: %w", RollbackCheckedKey, err)
	}
	return nil
}

// committedBranch records a commit of this process that landed: its
// snapshot is the branch seen, and the loads accepted are listed now.
func (s *Sink) committedBranch(tbl *table.Table) {
	st := s.branches[name(tbl.Identifier())]
	if st == nil {
		return
	}
	st.see(tbl.CurrentSnapshot())
	st.accepted = nil
}
