package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink"
)

// adjustOffsets runs after the group assigned partitions and fetched their
// committed offsets, before fetching starts. The ledger in the sink is the
// truth: when it is ahead of the committed offset (a crash between the load
// commit and the offset commit), reading resumes at the ledger.
//
// A partition with neither a ledger position nor a committed offset starts
// at a point that is recorded nowhere yet (start_offset latest's end, or
// the log start of a partition nobody read): that start is committed here,
// before any record of it is read. Else it would live only in the loader's
// next commit, which a load retried for a long while or a crash (kill -9)
// forestalls, and the next run or owner, finding no position, would start
// at the end as it is then: every record produced in between would be
// skipped, acknowledged to its producer and never loaded. The ledger stays
// what a restart trusts first; the committed start only stands in for it
// until the partition's first load puts its ranges there.
func (w *Worker) adjustOffsets(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var parts []sink.TopicPartition
	for t, ps := range offsets {
		for p := range ps {
			parts = append(parts, sink.TopicPartition{Topic: t, Partition: p})
		}
	}
	positions, recorded, err := w.readLedger(ctx, parts)
	if err != nil {
		// Returning the error makes the client leave this session and
		// rejoin, rather than read from a position the ledger may contradict.
		w.log.Error("read ledger positions for assigned partitions", "err", err)
		return nil, err
	}
	// Not the client's reset when the listing fails, as before: it starts
	// at a point this worker could not commit before reading. A partition
	// whose log start could not be listed (its leader down) is listed and
	// committed later, paused until then (startLater).
	logStarts, unlisted, err := w.logStarts(ctx, offsets, positions)
	if err != nil {
		return nil, err
	}
	bounds, err := w.logBounds(ctx, offsets, positions)
	if err != nil {
		return nil, err
	}
	recreated, err := w.checkTopicIDs(ctx, offsets, positions, recorded)
	if err != nil {
		return nil, err
	}
	starts, ended := w.resolveStarts(offsets, positions, logStarts, bounds)
	w.unseedReset(starts, recreated, ended)
	for _, r := range recreated {
		// Outside w.mu: stopping cancels the run.
		w.topicIDChanged(r)
	}
	for _, e := range ended {
		if !slices.ContainsFunc(recreated, func(r idChange) bool { return r.tp == e.tp }) { // said once
			w.logEndsBelow(e.tp, e.end, e.next)
		}
	}
	if err := w.commitStarts(ctx, starts); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// Kafka refused: these partitions wait, paused, while the
		// others of the session are read.
		w.log.Warn("commit where newly assigned partitions start ("+formatStarts(starts)+") failed; they are not read until it succeeds, retrying", "err", err)
		w.opt.Metrics.Retries.WithLabelValues("commit_start").Inc()
	} else {
		starts = nil
	}
	w.startLater(starts, unlisted)
	return offsets, nil
}

// resolveStarts sets in offsets where each assigned partition's reading
// starts, and returns the starts recorded nowhere yet (see adjustOffsets),
// to commit before reading, and the partitions whose log ends below where
// they resume (bounds), to stop the run on.
// A partition whose log start could not be listed keeps the client's reset
// offset: it is paused until startLater listed and committed its start.
func (w *Worker) resolveStarts(offsets map[string]map[int32]kgo.Offset, positions, logStarts map[sink.TopicPartition]int64,
	bounds map[sink.TopicPartition]kafka.Watermarks) (map[string]map[int32]kgo.EpochOffset, []logEnd) {
	unrecorded := map[string]map[int32]kgo.EpochOffset{}
	var ended []logEnd
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range offsets {
		for p, o := range ps {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			committed := o.EpochOffset().Offset // < 0: no commit (the reset offset is the log start)
			start := committed
			next, inLedger := positions[tp]
			fresh := false // start recorded nowhere yet
			if at, ok := logStarts[tp]; ok {
				// Reading starts at the log start as it is now, a
				// position of its own: records deleted before they are
				// read (a sink down for longer than retention) are
				// then lost from it, and said so (checkContinuity),
				// where a reset to a later log start would not show.
				ps[p] = kgo.NewOffset().At(at).WithEpoch(-1)
				start = at
				if held, ok := w.b.nextOf(tp); ok && held < at {
					// This worker read the partition up to held
					// before (it was lost or revoked, nothing of it
					// loaded or committed anywhere since): what
					// retention deleted from there was never loaded.
					w.lost(tp, held, at)
				}
				// Recorded nowhere yet: the next owner or run,
				// finding no position, would start where its own
				// start_offset says, skipping what came in between
				// with latest.
				fresh = true
			}
			if at, ok := w.pinnedStart(tp); ok && committed < 0 && !inLedger {
				w.log.Info("no committed offset or ledger position; start_offset latest starts at the end when the run started (at 0 in a partition created since)",
					"topic", t, "partition", p, "offset", at)
				ps[p] = kgo.NewOffset().At(at).WithEpoch(-1)
				start = at
				fresh = true
			} else if inLedger && next != committed {
				// Ahead: a crash between the load and the offset
				// commit. Behind: the sink's positions were set back
				// (an Iceberg table rolled back, its positions set as
				// its error says; a table rolled back alone read again
				// from its own): its rows there are gone, and reading
				// from the committed offset would never load them again.
				switch {
				case next < committed:
					w.log.Info("ledger is behind the committed offset (set back); resuming at the ledger",
						"topic", t, "partition", p, "committed", committed, "ledger", next)
				case committed >= 0:
					w.log.Info("ledger is ahead of the committed offset; resuming at the ledger",
						"topic", t, "partition", p, "committed", committed, "ledger", next)
				}
				ps[p] = kgo.NewOffset().At(next).WithEpoch(-1)
				start = next
				// Bring the group's committed offset up to the ledger so
				// lag tools (and exit-when-idle) see the truth. Committed
				// by the loader, outside this callback: the ledger holds
				// the position already.
				w.seeded[tp] = next
			}
			if fresh {
				if unrecorded[t] == nil {
					unrecorded[t] = map[int32]kgo.EpochOffset{}
				}
				unrecorded[t][p] = kgo.EpochOffset{Epoch: -1, Offset: start}
				// Seeded too: if the session ends before the commit
				// below lands (nothing of the partition read then), the
				// revoke's flush still tries while the worker owns it.
				w.seeded[tp] = start
			}
			if held, ok := w.b.nextOf(tp); ok && held > start {
				// This worker still holds records of the partition from
				// before (an open batch or files not loaded yet: the
				// partition was lost, or its revoke did not wait for
				// them). They load, fenced by the ledger; reading on
				// from the ledger would batch them a second time.
				w.log.Info("resuming past the records this worker still holds", "topic", t, "partition", p, "offset", held)
				ps[p] = kgo.NewOffset().At(held).WithEpoch(-1)
				start = held
			}
			if b, ok := bounds[tp]; ok && start >= 0 {
				// Where it resumes, against its log as it is now:
				// checkContinuity tells the same from the first
				// record fetched, but a partition nothing is produced
				// to again gives it none, and the run went on (or
				// exited idle) saying nothing.
				switch {
				case start > b.High:
					ended = append(ended, logEnd{tp: tp, end: b.High, next: start})
					w.cl.PauseFetchPartitions(map[string][]int32{t: {p}}) // nothing of the new log is read
				case start < b.Low:
					// Retention deleted them before they were loaded
					// (a sink or tracelake down for longer): lost,
					// and the hole stays in the ledger. Those below the
					// committed offset were counted already: the log
					// start is committed below, as no load moves the
					// ledger past the hole of a quiet partition, and
					// every later run or owner would find it again
					// (or they were loaded once, and the sink set
					// back since: not deleted before they were loaded).
					if from := max(start, committed); from < b.Low {
						w.lost(tp, from, b.Low)
					}
					ps[p] = kgo.NewOffset().At(b.Low).WithEpoch(-1)
					start = b.Low
					if unrecorded[t] == nil {
						unrecorded[t] = map[int32]kgo.EpochOffset{}
					}
					unrecorded[t][p] = kgo.EpochOffset{Epoch: -1, Offset: start}
					// Not the ledger's position: the loader would
					// commit the offset back below the hole.
					w.seeded[tp] = start
				}
			}
			w.b.setNext(tp, start)
			if st := w.owned[tp]; st != nil {
				if start >= 0 {
					st.next = start
				}
				st.committed = max(st.committed, committed)
			}
		}
	}
	return unrecorded, ended
}

// unseedReset drops the positions resolveStarts seeded (and the starts
// to commit) of the partitions whose log was reset (recreated: another
// topic id; ended: below the ledger): the run stops on them, and the
// ledger's position is an offset of the old log. Committed (by the
// loader, or by the revoke's flush of the shutdown) it became the group's
// offset of the new topic, whose old offsets Kafka dropped with it: the
// remedy, a new table, starts a partition without a position at its
// committed offset, and read from there the new log's records below it
// were never loaded (or, past its end, it stopped again).
func (w *Worker) unseedReset(starts map[string]map[int32]kgo.EpochOffset, recreated []idChange, ended []logEnd) {
	w.mu.Lock()
	defer w.mu.Unlock()
	unseed := func(tp sink.TopicPartition) {
		delete(w.seeded, tp)
		delete(starts[tp.Topic], tp.Partition)
		if len(starts[tp.Topic]) == 0 {
			delete(starts, tp.Topic)
		}
	}
	for _, r := range recreated {
		unseed(r.tp)
	}
	for _, e := range ended {
		unseed(e.tp)
	}
}

// idChange is a partition whose ledger position was loaded from a topic
// of another id than the topic's now.
type idChange struct {
	tp       sink.TopicPartition
	was, is  string
	position int64
}

// readLedger reads the ledger's positions of parts and, from a sink that
// reads both at once (sink.LedgerReader), the topic ids recorded with
// them (nil otherwise: checkTopicIDs reads them where it needs them).
func (w *Worker) readLedger(ctx context.Context, parts []sink.TopicPartition) (map[sink.TopicPartition]int64, map[sink.TopicPartition]string, error) {
	if r, ok := w.opt.Sink.(sink.LedgerReader); ok {
		return r.PositionsAndTopicIDs(ctx, parts)
	}
	positions, err := w.opt.Sink.Positions(ctx, parts)
	return positions, nil, err
}

// checkTopicIDs lists Kafka's id of each assigned topic, for the ranges
// read from now on to carry (the sink records it with the position), and
// returns the partitions whose ledger recorded another id: their topic was
// deleted and recreated, and the ledger's offsets are the old log's. A
// log that ends below the ledger tells it too (logBounds), but not one
// refilled past the ledger while tracelake was stopped: reading would
// resume at the ledger's offset, and the new log's records below it would
// never be loaded nor said lost. Those partitions are paused here. A
// listing that fails and a Kafka without topic ids (before 2.8) leave a
// partition unchecked, as before, and its ranges without an id; ledger
// rows without one (an older release's) leave it unchecked until a load
// records the id its ranges now carry.
// recorded are the ledger's ids when readLedger read them with positions.
func (w *Worker) checkTopicIDs(ctx context.Context, offsets map[string]map[int32]kgo.Offset, positions map[sink.TopicPartition]int64,
	recorded map[sink.TopicPartition]string) ([]idChange, error) {
	keeper, ok := w.opt.Sink.(sink.TopicIDKeeper)
	if !ok || len(offsets) == 0 {
		return nil, nil
	}
	topics := slices.Sorted(maps.Keys(offsets))
	adm, lctx, cancel, err := w.adminWithin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	details, err := adm.ListTopics(lctx, topics...)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		w.log.Warn("list the topic ids of assigned topics failed; their partitions are not checked against the ids in the ledger, and their loads record none", "topics", topics, "err", err)
	}
	ids := map[string]string{}
	for t, d := range details {
		if id := kafka.TopicIDString(d.ID); d.Err == nil && id != "" {
			ids[t] = id
		}
	}
	var inLedger []sink.TopicPartition
	for tp := range positions {
		if ids[tp.Topic] != "" {
			inLedger = append(inLedger, tp)
		}
	}
	if recorded == nil && len(inLedger) > 0 {
		if recorded, err = keeper.TopicIDs(ctx, inLedger); err != nil {
			// As for Positions: rejoin rather than read unchecked.
			w.log.Error("read the topic ids of assigned partitions from the ledger", "err", err)
			return nil, err
		}
	}
	var changed []idChange
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range topics {
		if ids[t] == "" {
			delete(w.b.topicIDs, t) // unknown: recorded as none rather than as an id that may be stale
		} else {
			w.b.topicIDs[t] = ids[t]
		}
	}
	for _, tp := range inLedger {
		if was, ok := recorded[tp]; ok && was != ids[tp.Topic] {
			changed = append(changed, idChange{tp: tp, was: was, is: ids[tp.Topic], position: positions[tp]})
			w.cl.PauseFetchPartitions(map[string][]int32{tp.Topic: {tp.Partition}}) // nothing of the new log is read
		}
	}
	slices.SortFunc(changed, func(a, b idChange) int {
		return cmp.Or(cmp.Compare(a.tp.Topic, b.tp.Topic), cmp.Compare(a.tp.Partition, b.tp.Partition))
	})
	return changed, nil
}

// topicIDChanged stops the run on a partition whose topic has another id
// than the one its ledger position was loaded from, as logEndsBelow does
// on a log that ends below it.
func (w *Worker) topicIDChanged(c idChange) {
	err := fmt.Errorf("%w: %s/%d: the ledger's position (next offset %d) was loaded from topic id %s, and the topic now has id %s: the topic was deleted and recreated. "+
		"The ledger's offsets of this partition belong to the old log, and the new log's records below them would never be loaded; load the new one into a new table (sink.table), or remove the partition's ledger rows to start it again",
		sink.ErrFatal, c.tp.Topic, c.tp.Partition, c.position, c.was, c.is)
	w.stopOnLogReset(c.tp.Topic, err, "partition's topic id differs from the ledger's; stopping", "partition", c.tp.Partition,
		"ledger_topic_id", c.was, "topic_id", c.is, "next", c.position)
}

// logEnd is a partition whose log ends below where it resumes.
type logEnd struct {
	tp        sink.TopicPartition
	end, next int64
}

// commitStarts commits the starts recorded nowhere yet before their
// partitions are read (see adjustOffsets), once: startLater retries.
func (w *Worker) commitStarts(ctx context.Context, starts map[string]map[int32]kgo.EpochOffset) error {
	if len(starts) == 0 {
		return nil
	}
	select {
	case <-w.clientSet: // this callback may run before NewClient returned
	case <-ctx.Done():
		return ctx.Err()
	}
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	accepted, err := w.commitOffsets(ctx, starts)
	// Those Kafka took are started: only the refused wait (startLater).
	removeOffsets(starts, accepted)
	return err
}

// pendingStart is a set of newly assigned partitions paused until their
// start is committed (and, for those in unlisted, their log start
// listed): startLater's goroutine. A partition dropped leaves w.pending,
// and the goroutine ends once none of its partitions is left there.
type pendingStart struct {
	cancel context.CancelFunc
	// at is where each of its partitions starts, once known (not yet
	// for one whose log start is still to be listed), for a revoke to
	// commit (commitRevokedStarts). Guarded by Worker.mu.
	at map[sink.TopicPartition]int64
}

// startLater pauses the partitions whose start could not be committed
// (known) or whose log start could not be listed (unlisted) in the
// offset adjustment, before the client fetches anything of them, and
// retries in the background until their start is committed, then
// resumes them. The other partitions of the session are read meanwhile:
// one partition whose leader is down does not hold them back. Retrying
// stops for a partition when it is dropped (revoked or lost; resumed then,
// so a later owner session is not left paused), and for all when the
// worker stops.
func (w *Worker) startLater(known map[string]map[int32]kgo.EpochOffset, unlisted []sink.TopicPartition) {
	if len(known) == 0 && len(unlisted) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(w.bg)
	ps := &pendingStart{cancel: cancel, at: map[sink.TopicPartition]int64{}}
	pause := map[string][]int32{}
	starts := map[string]map[int32]kgo.EpochOffset{}
	add := func(tp sink.TopicPartition) {
		w.pending[tp] = ps
		pause[tp.Topic] = append(pause[tp.Topic], tp.Partition)
	}
	w.mu.Lock()
	for t, parts := range known {
		for p, o := range parts {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			add(tp)
			ps.at[tp] = o.Offset
			if starts[t] == nil {
				starts[t] = map[int32]kgo.EpochOffset{}
			}
			starts[t][p] = o
		}
	}
	for _, tp := range unlisted {
		add(tp)
	}
	w.cl.PauseFetchPartitions(pause)
	w.mu.Unlock()
	go w.startPending(ctx, ps, starts, unlisted)
}

// startPending lists the log start of unlisted, commits the starts of
// the partitions still pending on ps and resumes them (see startLater),
// retrying with backoff until every one of them is started or ctx ends.
// A partition listed is committed and resumed without waiting for those
// whose listing still fails.
func (w *Worker) startPending(ctx context.Context, ps *pendingStart, starts map[string]map[int32]kgo.EpochOffset, unlisted []sink.TopicPartition) {
	defer ps.cancel()
	delay := w.opt.RetryBase
	for attempt := 1; ; attempt++ {
		// Those dropped meanwhile are no longer this goroutine's.
		w.mu.Lock()
		unlisted = slices.DeleteFunc(unlisted, func(tp sink.TopicPartition) bool { return w.pending[tp] != ps })
		w.mu.Unlock()
		var errs []error
		if len(unlisted) > 0 {
			if err := w.listPending(ctx, ps, starts, &unlisted); err != nil {
				errs = append(errs, err)
				w.opt.Metrics.Retries.WithLabelValues("list_start").Inc()
			}
		}
		if len(starts) > 0 {
			if err := w.commitPending(ctx, ps, starts); err != nil {
				errs = append(errs, err)
				w.opt.Metrics.Retries.WithLabelValues("commit_start").Inc()
			} else {
				clear(starts)
			}
		}
		if len(unlisted) == 0 && len(starts) == 0 {
			return
		}
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("start newly assigned partitions with no position failed; they are not read until it succeeds, retrying",
			"committing", formatStarts(starts), "listing", len(unlisted), "attempt", attempt, "in", delay, "err", errors.Join(errs...))
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, max(w.opt.RetryMaxDelay, w.opt.RetryBase))
	}
}

// listPending lists the log start of the partitions in unlisted, moving
// those listed (and still pending on ps) to starts, where reading them
// starts.
func (w *Worker) listPending(ctx context.Context, ps *pendingStart, starts map[string]map[int32]kgo.EpochOffset, unlisted *[]sink.TopicPartition) error {
	listed, err := listLogStarts(ctx, w.cl, *unlisted)
	var still []sink.TopicPartition
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, tp := range *unlisted {
		if w.pending[tp] != ps {
			continue // dropped
		}
		at, ok := listed[tp]
		if !ok {
			still = append(still, tp)
			continue
		}
		// Nothing of it was read in this session (paused): reading
		// starts at the log start, where the client's reset takes it
		// (or past the records this worker still holds of it).
		if next, ok := w.b.nextOf(tp); !ok || next < 0 {
			w.b.setNext(tp, at)
			if st := w.owned[tp]; st != nil {
				st.next = at
			}
		}
		w.seeded[tp] = at
		ps.at[tp] = at
		if starts[tp.Topic] == nil {
			starts[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		starts[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: at}
	}
	*unlisted = still
	return err
}

// listLogStarts lists the log start of each of tps: those listed, and an
// error naming each that was not (its leader down, say), or the
// request's.
func listLogStarts(ctx context.Context, cl *kgo.Client, tps []sink.TopicPartition) (map[sink.TopicPartition]int64, error) {
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	l, err := kadm.NewClient(cl).ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list the log start of %s: %w", strings.Join(topics, ", "), err)
	}
	listed := map[sink.TopicPartition]int64{}
	var errs []error
	for _, tp := range tps {
		switch o, ok := l.Lookup(tp.Topic, tp.Partition); {
		case !ok:
			errs = append(errs, fmt.Errorf("%s/%d: not listed", tp.Topic, tp.Partition))
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("%s/%d: %w", tp.Topic, tp.Partition, o.Err))
		default:
			listed[tp] = o.Offset
		}
	}
	return listed, errors.Join(errs...)
}

// commitPending commits starts of the partitions still pending on ps and
// resumes them.
func (w *Worker) commitPending(ctx context.Context, ps *pendingStart, starts map[string]map[int32]kgo.EpochOffset) error {
	w.commitMu.Lock() // ownership cannot change meanwhile (drop)
	defer w.commitMu.Unlock()
	mine := map[string]map[int32]kgo.EpochOffset{}
	w.mu.Lock()
	for t, parts := range starts {
		for p, o := range parts {
			if w.pending[sink.TopicPartition{Topic: t, Partition: p}] == ps {
				if mine[t] == nil {
					mine[t] = map[int32]kgo.EpochOffset{}
				}
				mine[t][p] = o
			}
		}
	}
	w.mu.Unlock()
	if len(mine) == 0 {
		return nil
	}
	accepted, err := w.commitOffsets(ctx, mine)
	// Those Kafka took are resumed now, whatever it answered the others
	// (retried by the caller with what is left in starts).
	removeOffsets(starts, accepted)
	w.resumeStarted(ps, accepted)
	if err != nil {
		removeOffsets(mine, accepted)
		return fmt.Errorf("commit where newly assigned partitions start (%s): %w", formatStarts(mine), err)
	}
	return nil
}

// resumeStarted resumes the partitions of started still pending on ps:
// their start is committed.
func (w *Worker) resumeStarted(ps *pendingStart, started map[string]map[int32]kgo.EpochOffset) {
	resume := map[string][]int32{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, parts := range started {
		for p := range parts {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			if w.pending[tp] == ps {
				delete(w.pending, tp)
				resume[t] = append(resume[t], p)
			}
		}
	}
	if len(resume) > 0 {
		w.log.Info("start committed; reading the partitions: " + kafka.FormatPartitions(resume))
		w.cl.ResumeFetchPartitions(resume)
	}
}

// removeOffsets removes from offsets the partitions of done.
func removeOffsets(offsets, done map[string]map[int32]kgo.EpochOffset) {
	for t, ps := range done {
		for p := range ps {
			delete(offsets[t], p)
		}
		if len(offsets[t]) == 0 {
			delete(offsets, t)
		}
	}
}

// formatStarts names each partition's start, topic/partition@offset.
func formatStarts(starts map[string]map[int32]kgo.EpochOffset) string {
	var names []string
	for t, ps := range starts {
		for p, o := range ps {
			names = append(names, fmt.Sprintf("%s/%d@%d", t, p, o.Offset))
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// pinnedStart is where tp starts, when it has neither a committed offset
// nor a ledger position, if that needs no listing: with start_offset
// latest, its end when the run started (StartAt), or 0 for a partition
// absent from StartAt, created after the run started. Every record of
// such a partition came after the run started, so its first offset is
// its start, known at assignment and committed there like StartAt's.
// Listing its log start instead made the start wait on that listing,
// recorded nowhere while it failed: a revoke, or a crash, then left the
// partition with no position, and the next owner or run (latest, the
// partition now among those it found at its start) began at the end as
// it was then, skipping every record produced since the group took it.
// Records retention deleted before they were read are reported lost from
// 0 (checkContinuity): they too came after the run started.
func (w *Worker) pinnedStart(tp sink.TopicPartition) (int64, bool) {
	if at, ok := w.opt.StartAt[tp]; ok {
		return at, true
	}
	return 0, w.opt.Latest
}

// logStarts lists the log start offsets of the assigned partitions that
// have no committed offset, no ledger position and no pinned start (a
// fresh group's, or a partition added to a topic, with start_offset
// earliest): where their reading starts.
// Those it could not list are returned in unlisted.
func (w *Worker) logStarts(ctx context.Context, offsets map[string]map[int32]kgo.Offset, positions map[sink.TopicPartition]int64) (map[sink.TopicPartition]int64, []sink.TopicPartition, error) {
	var wanted []sink.TopicPartition
	for t, ps := range offsets {
		for p, o := range ps {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			_, inLedger := positions[tp]
			_, pinned := w.pinnedStart(tp)
			if o.EpochOffset().Offset < 0 && !inLedger && !pinned {
				wanted = append(wanted, tp)
			}
		}
	}
	if len(wanted) == 0 {
		return nil, nil, nil
	}
	select {
	case <-w.clientSet:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	starts, err := listLogStarts(ctx, w.cl, wanted)
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	// Read from the client's reset, a start not committed first, a
	// partition not listed would not be: it is listed and committed
	// later (startLater).
	var unlisted []sink.TopicPartition
	for _, tp := range wanted {
		if _, ok := starts[tp]; !ok {
			unlisted = append(unlisted, tp)
		}
	}
	if len(unlisted) > 0 {
		w.log.Warn("list the log start of newly assigned partitions with no position failed; they are not read until it succeeds, retrying",
			"partitions", len(unlisted), "err", err)
		w.opt.Metrics.Retries.WithLabelValues("list_start").Inc()
	}
	return starts, unlisted, nil
}

// logBounds lists the log start and end of the assigned partitions that
// resume at a position (a committed offset or the ledger's), for
// resolveStarts to check it against. A partition whose listing fails, or
// takes longer than boundsWait, is left out and read all the same:
// checkContinuity checks it against its log from the first record
// fetched, as it checks every partition.
func (w *Worker) logBounds(ctx context.Context, offsets map[string]map[int32]kgo.Offset, positions map[sink.TopicPartition]int64) (map[sink.TopicPartition]kafka.Watermarks, error) {
	var topics []string
	for t, ps := range offsets {
		for p, o := range ps {
			_, inLedger := positions[sink.TopicPartition{Topic: t, Partition: p}]
			if (o.EpochOffset().Offset >= 0 || inLedger) && !slices.Contains(topics, t) {
				topics = append(topics, t)
			}
		}
	}
	if len(topics) == 0 {
		return nil, nil
	}
	adm, lctx, cancel, err := w.adminWithin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	// Each answer holds what was listed even with an error (a broker
	// that did not answer): those partitions are checked.
	starts, serr := adm.ListStartOffsets(lctx, topics...)
	ends, eerr := adm.ListEndOffsets(lctx, topics...)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err := errors.Join(serr, eerr); err != nil {
		w.log.Warn("list the log bounds of assigned partitions failed; those not listed are checked from their first record fetched", "topics", topics, "err", err)
	}
	out := map[sink.TopicPartition]kafka.Watermarks{}
	ends.Each(func(e kadm.ListedOffset) {
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Err == nil && e.Err == nil {
			out[sink.TopicPartition{Topic: e.Topic, Partition: e.Partition}] = kafka.Watermarks{Low: s.Offset, High: e.Offset}
		}
	})
	return out, nil
}

// adminWithin waits for the client (the assignment's callback may run
// before NewClient returned) and returns an admin client over it with ctx
// bounded by boundsWait, for a listing at assignment.
func (w *Worker) adminWithin(ctx context.Context) (*kadm.Client, context.Context, context.CancelFunc, error) {
	select {
	case <-w.clientSet:
	case <-ctx.Done():
		return nil, nil, nil, ctx.Err()
	}
	lctx, cancel := context.WithTimeout(ctx, boundsWait)
	return kadm.NewClient(w.cl), lctx, cancel, nil
}

// boundsWait bounds the listings at assignment (logBounds, checkTopicIDs): they hold it up.
const boundsWait = 5 * time.Second

func (w *Worker) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	w.opt.Ready.Join() // a member with no partitions has joined too
	w.mu.Lock()
	first := !w.started
	w.started = true
	w.mu.Unlock()
	if first {
		w.opt.Start.joined()
	} else {
		w.opt.Start.moved()
	}
	if len(assigned) == 0 {
		return // the first step of a cooperative rebalance: nothing new
	}
	w.opt.Metrics.Rebalances.WithLabelValues("assigned").Inc()
	w.mu.Lock()
	for t, ps := range assigned {
		for _, p := range ps {
			w.owned[sink.TopicPartition{Topic: t, Partition: p}] = &partition{
				hwm: -1, next: -1, committed: -1, lag: w.opt.Metrics.Lag.WithLabelValues(t, obs.PartitionLabel(p)),
			}
		}
	}
	w.sizeFetches()
	w.opt.Start.owns(w.id, len(w.owned))
	w.mu.Unlock()
	w.log.Info("partitions assigned: " + kafka.FormatPartitions(assigned))
}

// onRevoked loads everything pending (of every partition: simpler, and
// rebalances are rare) and commits before the partitions move, so the new
// owner starts exactly where this worker stopped. It waits at most
// RevokeWait: a worker whose loads fail must not hold the group.
//
// The revoke of leaving the group at shutdown flushes too: the final
// flush loaded everything, but a partition assigned while it ran (a
// rebalance during the shutdown) has its start seeded after that flush
// committed the seeded positions. Its start is committed before it is
// read (adjustOffsets), but when leaving cut that commit short this is the
// last moment the worker owns it to commit it; else start_offset latest's
// next run would start it at its end, skipping what came in between.
func (w *Worker) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	w.opt.Start.moved()
	w.log.Info("partitions revoked: " + kafka.FormatPartitions(revoked))
	w.opt.Metrics.Rebalances.WithLabelValues("revoked").Inc()
	if err := w.flushForRevoke(); err != nil {
		// Not loaded yet: the new owner reads these records again from
		// the ledger position; whichever of the two loads them second,
		// the sink's ledger check makes it skip them.
		w.log.Warn("pending data of revoked partitions not loaded before the revoke; the new owner re-reads it", "err", err)
		// The flush did not reach the loader, which commits the starts
		// still pending: committed here, or nowhere.
		w.commitRevokedStarts(revoked)
	}
	w.drop(revoked)
}

// commitRevokedStarts commits where the revoked partitions still paused
// until their start is committed (startLater) start, when the revoke's
// flush did not reach the loader (loads hanging). A start needs no load,
// and the revoke is the last moment this worker owns them: else the next
// owner finds no position, and a run started later with start_offset
// latest starts them at their end as it is then, skipping every record
// produced since this worker's start. Their retries stop with the drop.
func (w *Worker) commitRevokedStarts(revoked map[string][]int32) {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	starts := map[string]map[int32]kgo.EpochOffset{}
	w.mu.Lock()
	for t, parts := range revoked {
		for _, p := range parts {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			ps := w.pending[tp]
			if ps == nil {
				continue // started: committed already
			}
			if at, ok := ps.at[tp]; ok {
				if starts[t] == nil {
					starts[t] = map[int32]kgo.EpochOffset{}
				}
				starts[t][p] = kgo.EpochOffset{Epoch: -1, Offset: at}
			}
		}
	}
	w.mu.Unlock()
	if len(starts) == 0 {
		return
	}
	if _, err := w.commitOffsets(context.Background(), starts); err != nil {
		w.log.Warn("commit where revoked partitions start ("+formatStarts(starts)+") failed; their next owner finds no position", "err", err)
	}
}

// onLost drops the partitions without committing: the group has already
// given them to someone else.
func (w *Worker) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	if len(lost) == 0 {
		return
	}
	w.opt.Start.moved()
	w.log.Warn("partitions lost: " + kafka.FormatPartitions(lost))
	w.opt.Metrics.Rebalances.WithLabelValues("lost").Inc()
	w.drop(lost)
}

func (w *Worker) drop(parts map[string][]int32) {
	w.commitMu.Lock() // a commit in flight lands before the partitions go
	defer w.commitMu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	resume := map[string][]int32{}
	defer func() {
		if len(resume) > 0 {
			w.cl.ResumeFetchPartitions(resume)
		}
	}()
	for t, ps := range parts {
		for _, p := range ps {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			delete(w.owned, tp)
			if w.pending[tp] != nil {
				// Not read here: a later owner session of this
				// worker must not find it paused. Its retries
				// skip it from now on (startPending).
				delete(w.pending, tp)
				resume[t] = append(resume[t], p)
			}
			w.opt.Metrics.Lag.DeleteLabelValues(t, obs.PartitionLabel(p))
			// The batcher keeps the partition's next offset: records of
			// it may still be pending here (see adjustOffsets).
		}
	}
	w.sizeFetches()
	w.opt.Start.owns(w.id, len(w.owned))
}

// sizeFetches shares the fetch bytes among the partitions owned. Called
// with mu held.
func (w *Worker) sizeFetches() {
	if w.sizer != nil {
		w.sizer.SetPartitions(len(w.owned))
	}
}

// commitAnswers reads Kafka's answer to req, the commit of offsets: the
// partitions it took, and an error naming each it refused (or did not
// answer).
func commitAnswers(offsets map[string]map[int32]kgo.EpochOffset, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse) (map[string]map[int32]kgo.EpochOffset, error) {
	// From OffsetCommit v10 the answer names topics by id only; the
	// request has both.
	names := map[[16]byte]string{}
	for _, t := range req.Topics {
		names[t.TopicID] = t.Topic
	}
	accepted := map[string]map[int32]kgo.EpochOffset{}
	answered := map[sink.TopicPartition]bool{}
	var errs []error
	for _, t := range resp.Topics {
		topic := t.Topic
		if topic == "" {
			topic = names[t.TopicID]
		}
		for _, p := range t.Partitions {
			o, asked := offsets[topic][p.Partition]
			if !asked {
				continue
			}
			answered[sink.TopicPartition{Topic: topic, Partition: p.Partition}] = true
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: %w", topic, p.Partition, err))
				continue
			}
			if accepted[topic] == nil {
				accepted[topic] = map[int32]kgo.EpochOffset{}
			}
			accepted[topic][p.Partition] = o
		}
	}
	for t, ps := range offsets {
		for p := range ps {
			if !answered[sink.TopicPartition{Topic: t, Partition: p}] {
				errs = append(errs, fmt.Errorf("%s/%d: not answered", t, p))
			}
		}
	}
	return accepted, errors.Join(errs...)
}
