package pipeline

import (
	"context"
	"errors"
	"fmt"
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
	positions, err := w.opt.Sink.Positions(ctx, parts)
	if err != nil {
		// Returning the error makes the client leave this session and
		// rejoin, rather than read from a position the ledger may contradict.
		w.log.Error("read ledger positions for assigned partitions", "err", err)
		return nil, err
	}
	// Not the client's reset when the listing fails, as before: it starts
	// at a point this worker could not commit before reading.
	logStarts, err := w.logStarts(ctx, offsets, positions)
	if err != nil {
		return nil, err
	}
	starts := w.resolveStarts(offsets, positions, logStarts)
	if err := w.commitStarts(ctx, starts); err != nil {
		return nil, err
	}
	return offsets, nil
}

// resolveStarts sets in offsets where each assigned partition's reading
// starts, and returns the starts recorded nowhere yet (see adjustOffsets),
// to commit before reading.
func (w *Worker) resolveStarts(offsets map[string]map[int32]kgo.Offset, positions, logStarts map[sink.TopicPartition]int64) map[string]map[int32]kgo.EpochOffset {
	unrecorded := map[string]map[int32]kgo.EpochOffset{}
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
				// A partition created while running starts at its
				// beginning with start_offset latest too, and the next
				// run, finding no position, would start at its end as
				// it is then, skipping what came in between.
				fresh = true
			}
			if at, ok := w.opt.StartAt[tp]; ok && committed < 0 && !inLedger {
				// start_offset latest: the end when the run started.
				w.log.Info("no committed offset or ledger position; start_offset latest starts at the end",
					"topic", t, "partition", p, "offset", at)
				ps[p] = kgo.NewOffset().At(at).WithEpoch(-1)
				start = at
				fresh = true
			} else if inLedger && next > committed {
				if committed >= 0 {
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
			w.b.setNext(tp, start)
			if st := w.owned[tp]; st != nil {
				if start >= 0 {
					st.next = start
				}
				st.committed = max(st.committed, committed)
			}
		}
	}
	return unrecorded
}

// commitStarts commits the starts recorded nowhere yet before their
// partitions are read (see adjustOffsets).
func (w *Worker) commitStarts(ctx context.Context, starts map[string]map[int32]kgo.EpochOffset) error {
	if len(starts) == 0 {
		return nil
	}
	select {
	case <-w.clientSet: // this callback may run before NewClient returned
	case <-ctx.Done():
		return ctx.Err()
	}
	return w.untilSessionEnds(ctx, "commit_start", "commit where newly assigned partitions start ("+formatStarts(starts)+")", func() error {
		w.commitMu.Lock()
		defer w.commitMu.Unlock()
		return w.commitOffsets(ctx, starts)
	})
}

// untilSessionEnds runs fn, a step of the offset adjustment, until it
// succeeds, backing off as loads do, or until the group session ends
// (ctx: a revoke, a lost membership or leaving the group cancels it;
// nothing of the partitions is read then). Retrying in the session rather
// than returning the error, which makes the client drop every partition
// it owns and rejoin, holds back only the fetching of the partitions just
// assigned: their backlog stays in Kafka.
func (w *Worker) untilSessionEnds(ctx context.Context, stage, what string, fn func() error) error {
	delay := w.opt.RetryBase
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		w.opt.Metrics.Retries.WithLabelValues(stage).Inc()
		w.log.Warn(what+" failed; the partitions are not read until it succeeds, retrying",
			"attempt", attempt, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, max(w.opt.RetryMaxDelay, w.opt.RetryBase))
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

// logStarts lists the log start offsets of the assigned partitions that
// have no committed offset, no ledger position and no StartAt (a fresh
// group's, or a partition added to a topic): where their reading starts.
func (w *Worker) logStarts(ctx context.Context, offsets map[string]map[int32]kgo.Offset, positions map[sink.TopicPartition]int64) (map[sink.TopicPartition]int64, error) {
	var topics []string
	var wanted []sink.TopicPartition
	for t, ps := range offsets {
		for p, o := range ps {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			_, inLedger := positions[tp]
			_, pinned := w.opt.StartAt[tp]
			if o.EpochOffset().Offset < 0 && !inLedger && !pinned {
				wanted = append(wanted, tp)
				if !slices.Contains(topics, t) {
					topics = append(topics, t)
				}
			}
		}
	}
	if len(topics) == 0 {
		return nil, nil
	}
	select {
	case <-w.clientSet:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	starts := map[sink.TopicPartition]int64{}
	err := w.untilSessionEnds(ctx, "list_start", "list the log start of "+strings.Join(topics, ", "), func() error {
		listed, err := kadm.NewClient(w.cl).ListStartOffsets(ctx, topics...)
		if err != nil {
			return err
		}
		clear(starts)
		var errs []error
		listed.Each(func(o kadm.ListedOffset) {
			tp := sink.TopicPartition{Topic: o.Topic, Partition: o.Partition}
			_, inLedger := positions[tp]
			_, pinned := w.opt.StartAt[tp]
			ps, ok := offsets[o.Topic]
			if !ok || inLedger || pinned {
				return
			}
			if off, ok := ps[o.Partition]; ok && off.EpochOffset().Offset < 0 {
				if o.Err != nil {
					errs = append(errs, fmt.Errorf("%s/%d: %w", o.Topic, o.Partition, o.Err))
					return
				}
				starts[tp] = o.Offset
			}
		})
		for _, tp := range wanted {
			if _, ok := starts[tp]; !ok && len(errs) == 0 {
				// A partition the listing left out would be read from
				// the client's reset, a start not committed first.
				errs = append(errs, fmt.Errorf("%s/%d: not listed", tp.Topic, tp.Partition))
			}
		}
		return errors.Join(errs...)
	})
	return starts, err
}

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
	}
	w.drop(revoked)
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
	for t, ps := range parts {
		for _, p := range ps {
			tp := sink.TopicPartition{Topic: t, Partition: p}
			delete(w.owned, tp)
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

func commitResponseError(resp *kmsg.OffsetCommitResponse) error {
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
