// Package pipeline is the worker loop: Kafka records → batch → staged file →
// load → offset commit, with retries, backpressure, rebalance handling and
// shutdown. It sees the destination only through sink.Sink.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink"
)

// Options configure a worker.
type Options struct {
	Transform bool
	// Decoder, when set, makes each record's rows of a declared table
	// (OTLP spans or logs) instead of raw or transform rows.
	Decoder      RowDecoder
	RawValue     envelope.ValueEncoding // how staged rows carry the value, as the sink reads it
	MaxRecords   int
	MaxBytes     int64
	MaxInterval  time.Duration // batch
	LoadMaxFiles int
	LoadMaxBytes int64 // message bytes per load; 0: no limit
	LoadInterval time.Duration
	// AlignLoads loads at the moments LoadPhase + k·LoadInterval instead
	// of LoadInterval after the first pending file: every worker of the
	// process at the same moments.
	AlignLoads    bool
	LoadPhase     time.Duration
	RetryBase     time.Duration // first backoff; 1s in production
	RetryMaxDelay time.Duration
	// UnknownTopicWait is how long Kafka may answer a topic's fetches
	// with UNKNOWN_TOPIC_ID before the run stops (see topicsUnknown);
	// 1 minute by default.
	UnknownTopicWait time.Duration
	KafkaOpts        []kgo.Opt // from kafka.ConsumerOptions
	// FetchBytes is what the worker's buffered fetches may hold
	// decompressed (config.FetchBytes, see kafka.FetchSizer); 0: the
	// client's own fetch sizes.
	FetchBytes int64
	// StartAt is where a partition with neither a committed offset nor a
	// ledger position starts; absent, at its log start. start_offset
	// latest sets it to the partitions' ends when the run started. Such a
	// start is committed before the partition is read (adjustOffsets).
	StartAt map[sink.TopicPartition]int64
	// Latest is start_offset latest: a partition absent from StartAt was
	// created after the run started, and starts at offset 0 (pinnedStart).
	Latest         bool
	Sink           sink.Sink
	Log            *slog.Logger
	Stats          *Stats
	Metrics        *obs.Metrics
	Ready          *obs.Readiness
	Budget         *Budget // shared by the workers of a process
	Workers        int     // workers sharing Budget
	PollMaxRecords int
	// Fatal stops the run after a sink error that retrying cannot fix.
	Fatal func(error)
	// RevokeWait bounds how long a revoke waits for pending data to load
	// before letting the partitions go (what did not load yet loads later,
	// fenced by the ledger against the new owner's loads).
	RevokeWait time.Duration
	// CommitTimeout bounds one offset commit (kafka.commit_timeout).
	CommitTimeout time.Duration
	// Start holds the process's workers back from reading until all of
	// them joined the group (see startGate); nil: read at once.
	Start *startGate
	// StartWait bounds that wait. Default 10s.
	StartWait time.Duration
}

// Worker owns one Kafka consumer and the pipeline behind it.
type Worker struct {
	id int
	// stream names the worker's batches as one sequence (sink.Batch.Stream).
	stream string
	opt    Options
	log    *slog.Logger
	cl     *kgo.Client
	// sizer sizes cl's fetches by the partitions owned; nil without
	// Options.FetchBytes.
	sizer *kafka.FetchSizer

	mu sync.Mutex // guards b, owned and seeded; never held across the network
	// commitMu is held by an offset commit and by dropping partitions, so
	// a commit never lands for a partition after its revoke completed.
	// Polling and the status page do not wait on it.
	commitMu sync.Mutex
	b        *batcher
	owned    map[sink.TopicPartition]*partition // the partitions this worker owns
	seeded   map[sink.TopicPartition]int64      // positions found at assignment, for the loader to commit
	// pending are the owned partitions paused until their start is
	// committed (startLater).
	pending map[sink.TopicPartition]*pendingStart
	// bg bounds startLater's retries: canceled when the worker leaves.
	bg       context.Context
	bgCancel context.CancelFunc
	started  bool // had its first assignment (startGate)

	// clientSet is closed once cl is set: the group's callbacks may run
	// before kgo.NewClient returns.
	clientSet chan struct{}

	batches chan item     // poll loop → stager
	files   chan item     // stager → loader
	sendSem chan struct{} // held by whoever sends a sequence of items to batches, so a partition's batches stay in order

	// intake is canceled by the first signal: reading stops and retries
	// give up; hard is canceled by a second signal: loads and commits stop.
	intake, hard context.Context

	lastRecord atomic.Int64 // unix nanos of the last record read
	// running is set by Run before its stager and loader start: until
	// then a revoke's flush has no loader to go through (and nothing was
	// read to flush).
	running atomic.Bool

	// unknownTopics are the topics whose fetches Kafka answers
	// UNKNOWN_TOPIC_ID (the poll loop's alone, see topicsUnknown).
	unknownTopics map[string]*unknownTopic
	// drained is true when the last poll returned no record and no owned
	// partition was behind its end at its last fetch: the worker is
	// waiting for Kafka, not blocked behind its loads or the memory budget.
	drained atomic.Bool
	// rereads are the partitions whose batching stalled at a record to
	// decode again (batcher.takeStalled), paused until their retry;
	// touched by the poll loop only.
	rereads  map[sink.TopicPartition]*reread
	inflight atomic.Int64 // records read and not yet loaded (or dropped)
	flushNow atomic.Bool  // close the open batch and load at the next poll wake-up
	held     atomic.Int64 // bytes of the budget this worker holds (read, not yet loaded or spilled)
}

// partition is what a worker tracks of an owned partition for the lag
// metric and the status page: the high watermark last fetched, the next
// offset to load, the last offset committed and when it last loaded.
type partition struct {
	hwm, next, committed int64 // -1 until known
	lastLoad             time.Time
	lag                  prometheus.Gauge
}

func (p *partition) updateLag() {
	if p.hwm >= 0 && p.next >= 0 {
		p.lag.Set(float64(p.hwm - p.next))
	}
}

// item travels down the pipeline: a batch (before staging), a staged file
// with its batch's bookkeeping (batch.Batch is then nil), a flush marker
// whose done channel receives the outcome once everything before it loaded,
// or a batch that could not be staged (err).
type item struct {
	batch *batch
	file  sink.File
	flush chan error
	err   error
}

// NewWorker creates the worker's Kafka client; nothing is read until Run.
func NewWorker(id int, opt Options) (*Worker, error) {
	if opt.PollMaxRecords == 0 {
		opt.PollMaxRecords = 10000
	}
	if opt.RetryBase == 0 {
		opt.RetryBase = time.Second
	}
	if opt.UnknownTopicWait == 0 {
		opt.UnknownTopicWait = time.Minute
	}
	if opt.Start == nil {
		opt.Start = newStartGate(0)
	}
	if opt.StartWait == 0 {
		opt.StartWait = 10 * time.Second
	}
	if opt.CommitTimeout == 0 {
		opt.CommitTimeout = 10 * time.Second
	}
	if opt.RevokeWait == 0 {
		opt.RevokeWait = 30 * time.Second
	}
	b := newBatcher(opt.Transform, opt.MaxRecords, opt.MaxBytes, opt.MaxInterval)
	b.valueEnc = opt.RawValue
	_, b.keepRecords = opt.Sink.(sink.RecordStager)
	b.keepRecords = b.keepRecords && !opt.Transform && opt.Decoder == nil
	b.decoder = opt.Decoder
	kept := opt.LoadMaxFiles // buffers come back at the end of a load
	if _, ok := opt.Sink.(sink.RowsReleaser); ok {
		kept = buffersKept // they come back at staging
	}
	b.rows, b.derived = newBuffers(kept), newBuffers(kept)
	w := &Worker{
		stream:    sink.NewBatchID(),
		id:        id,
		opt:       opt,
		log:       opt.Log.With("worker", id),
		b:         b,
		owned:     map[sink.TopicPartition]*partition{},
		seeded:    map[sink.TopicPartition]int64{},
		pending:   map[sink.TopicPartition]*pendingStart{},
		batches:   make(chan item, 2),
		files:     make(chan item, max(4, opt.LoadMaxFiles)),
		sendSem:   make(chan struct{}, 1),
		clientSet: make(chan struct{}),
	}
	w.bg, w.bgCancel = context.WithCancel(context.Background())
	kopts := append([]kgo.Opt{}, opt.KafkaOpts...)
	kopts = append(kopts,
		kgo.AdjustFetchOffsetsFn(w.adjustOffsets),
		kgo.OnPartitionsAssigned(w.onAssigned),
		kgo.OnPartitionsRevoked(w.onRevoked),
		kgo.OnPartitionsLost(w.onLost),
		kafka.SlogAdapter(w.log),
	)
	if opt.FetchBytes > 0 {
		w.sizer = kafka.NewFetchSizer(opt.FetchBytes)
		kopts = append(kopts, w.sizer.Options()...)
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		w.bgCancel()
		return nil, fmt.Errorf("worker %d: kafka client: %w", id, err)
	}
	w.cl = cl
	close(w.clientSet)
	if w.sizer != nil {
		w.sizer.Attach(cl)
	}
	return w, nil
}

// Run consumes until ctx is canceled, then loads what is pending, commits and
// leaves the group. hard is canceled to give up at once (second signal); a
// load that cannot finish then is reported as an error and its records are
// read again next time.
func (w *Worker) Run(ctx, hard context.Context) error {
	w.intake, w.hard = ctx, hard
	w.running.Store(true)
	var wg sync.WaitGroup
	loadErr := make(chan error, 1)
	wg.Add(2)
	go func() { defer wg.Done(); w.stageLoop() }()
	go func() { defer wg.Done(); loadErr <- w.loadLoop() }()

	w.pollLoop(ctx)

	// Intake has stopped: flush the open batch and everything staged.
	err := w.flush()
	w.cl.AllowRebalance()
	// Leaving the group revokes what is owned: that revoke's flush
	// commits the starts of partitions assigned during the flush above
	// (and of those paused until theirs was, whose retries stop here).
	w.leave()
	// A revoke's flush may still be sending: wait for it.
	w.sendSem <- struct{}{}
	close(w.batches)
	wg.Wait()
	if lerr := <-loadErr; err == nil {
		err = lerr
	}
	return err
}

func (w *Worker) pollLoop(ctx context.Context) {
	// The client joins the group by itself (once it knows the topics);
	// reading waits until every worker of the process has.
	rejoin := func() {
		w.mu.Lock()
		joined := w.started
		w.mu.Unlock()
		if joined {
			w.cl.ForceRebalance()
		}
	}
	if !w.opt.Start.wait(ctx, w.opt.StartWait, rejoin) && ctx.Err() == nil {
		w.log.Warn("not every worker of this process joined the group in time; reading anyway", "waited", w.opt.StartWait)
	}
	for ctx.Err() == nil {
		// Wake at least every 250ms to notice flush requests (and retries).
		wait := 250 * time.Millisecond
		w.resumeRereads(time.Now())
		w.mu.Lock()
		if due := w.b.due(); !due.IsZero() {
			wait = min(wait, max(time.Until(due), time.Millisecond))
		}
		w.mu.Unlock()

		limit, reserved := w.opt.Budget.reserve(w.opt.PollMaxRecords, w.opt.Workers, w.drained.Load())
		if limit == 0 {
			w.waitForBudget(ctx)
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fetches := w.cl.PollRecords(pctx, limit)
		cancel()
		if fetches.IsClientClosed() {
			w.opt.Budget.settle(reserved, 0, 0)
			return
		}
		var unknown map[string]bool // nil on the healthy path: no map a poll
		fetches.EachError(func(t string, p int32, err error) {
			var lost *kgo.ErrDataLoss
			switch {
			case errors.As(err, &lost):
				w.dataLoss(lost)
			case errors.Is(err, kerr.UnknownTopicID):
				if unknown == nil {
					unknown = map[string]bool{}
				}
				unknown[t] = true
			case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
				w.log.Warn("fetch error", "topic", t, "partition", p, "err", err)
			}
		})
		if (unknown != nil || len(w.unknownTopics) > 0) && w.topicsUnknown(unknown, knownTopics(fetches)) && fetches.NumRecords() == 0 {
			// The client answers at once while the topic stays
			// unknown: not a loop that spins (the other topics' records
			// wait in the client's buffer meanwhile).
			select {
			case <-ctx.Done():
			case <-time.After(min(w.opt.RetryBase, 100*time.Millisecond)):
			}
		}

		now := time.Now()
		var closed []*batch
		w.mu.Lock()
		n, bytes := 0, int64(0)
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			// What was read: each record's key, value and headers, as
			// the batch budget counts it (messageBytes).
			pb := int64(0)
			for _, r := range p.Records {
				pb += messageBytes(r)
			}
			w.opt.Metrics.ConsumedRecords.WithLabelValues(p.Topic).Add(float64(len(p.Records)))
			w.opt.Metrics.ConsumedBytes.WithLabelValues(p.Topic).Add(float64(pb))
			w.checkContinuity(p)
			if st := w.owned[sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}]; st != nil {
				if st.next < 0 {
					st.next, _ = w.b.nextOf(sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}) // set by checkContinuity
				}
				st.hwm = p.LastStableOffset // what read committed can reach
				st.updateLag()
			}
		})
		// Batches cut out of turn (a gap, a partition resuming) go first.
		closed = append(closed, w.b.takeReady()...)
		fetches.EachRecord(func(r *kgo.Record) {
			b, added := w.b.add(r, now)
			if added {
				n++
				bytes += w.b.lastSize
			}
			if b != nil {
				closed = append(closed, b)
			}
		})
		stalled := w.b.takeStalled()
		flushNow := w.flushNow.Swap(false)
		if flushNow {
			closed = append(closed, w.b.closeAll()...)
		}
		if b := w.b.closeIfDue(now); b != nil {
			closed = append(closed, b)
		}
		drained := n == 0 && !w.behind()
		w.mu.Unlock()
		if n > 0 {
			w.inflight.Add(int64(n))
			w.lastRecord.Store(now.UnixNano())
			w.opt.Stats.addConsumed(n)
			w.opt.Stats.Inflight.Add(bytes)
			w.held.Add(bytes)
			w.opt.Metrics.InflightBytes.Add(float64(bytes))
		}
		w.opt.Budget.settle(reserved, n, bytes)
		w.drained.Store(drained)
		w.readAgain(stalled, now)
		w.opt.Metrics.Batches.Add(float64(len(closed)))
		// Sending blocks while the stager and loader are behind (or a load
		// is being retried): nothing new is polled meanwhile, so backlog
		// stays in Kafka rather than in memory.
		if len(closed) > 0 || flushNow {
			w.sendSem <- struct{}{}
			for _, b := range closed {
				w.send(item{batch: b})
			}
			if flushNow {
				// Load what is staged now too, without waiting for the
				// outcome (the buffered channel takes it).
				w.send(item{flush: make(chan error, 1)})
			}
			<-w.sendSem
		}
		w.cl.AllowRebalance()
	}
}

// reread is a partition read again from a record the decoder could not
// decide on (a sink question unanswered, sink.ErrTransient): at offset,
// after delay, which doubles while the same record stalls again.
type reread struct {
	offset   int64
	delay    time.Duration
	resumeAt time.Time // zero once resumed
}

// readAgain sets each stalled partition's position back to its stalled
// record and pauses it for a backoff: no range covers that record or any
// after it, so the ledger holds no gap, and nothing is dead-lettered for
// a failure that was not the record's. It runs in the poll loop before
// AllowRebalance, as SetOffsets must, and drops what the client buffered
// of those partitions.
func (w *Worker) readAgain(stalled map[sink.TopicPartition]stall, now time.Time) {
	if len(stalled) == 0 {
		return
	}
	set := map[string]map[int32]kgo.EpochOffset{}
	pause := map[string][]int32{}
	if w.rereads == nil {
		w.rereads = map[sink.TopicPartition]*reread{}
	}
	for tp, st := range stalled {
		rr := w.rereads[tp]
		if rr == nil || rr.offset != st.offset {
			rr = &reread{offset: st.offset, delay: w.opt.RetryBase}
			w.rereads[tp] = rr
		} else {
			rr.delay = min(rr.delay*2, w.opt.RetryMaxDelay)
		}
		rr.resumeAt = now.Add(rr.delay)
		if set[tp.Topic] == nil {
			set[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		set[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: st.offset}
		pause[tp.Topic] = append(pause[tp.Topic], tp.Partition)
		w.opt.Stats.addRetry()
		w.opt.Metrics.Retries.WithLabelValues("decode").Inc()
		w.log.Warn("a record could not be decoded now; reading its partition again from it",
			"topic", tp.Topic, "partition", tp.Partition, "offset", st.offset, "in", rr.delay, "err", st.err)
	}
	w.cl.PauseFetchPartitions(pause)
	w.cl.SetOffsets(set)
}

// resumeRereads resumes fetching the partitions whose retry is due.
func (w *Worker) resumeRereads(now time.Time) {
	resume := map[string][]int32{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for tp, rr := range w.rereads {
		if w.pending[tp] != nil {
			continue // paused until its start is committed (startLater)
		}
		if !rr.resumeAt.IsZero() && !now.Before(rr.resumeAt) {
			rr.resumeAt = time.Time{}
			resume[tp.Topic] = append(resume[tp.Topic], tp.Partition)
		}
	}
	if len(resume) > 0 {
		w.cl.ResumeFetchPartitions(resume)
	}
}

// behind reports whether an owned partition's last fetch showed records
// past the next offset to batch: they are waiting in Kafka, and a poll that
// returned nothing only means the fetch is slow (w.mu held).
func (w *Worker) behind() bool {
	for tp, st := range w.owned {
		if next, ok := w.b.nextOf(tp); ok && st.hwm > next {
			return true
		}
	}
	return false
}

// checkContinuity compares a partition's fetched records with the next
// offset to load, before they are batched (w.mu held). Below the log
// start, records were deleted (retention) before they were loaded: the
// lost offsets are logged, counted and left out of every range, so the
// ledger keeps the hole and verify reports it, and loading goes on from
// the log start; a range never bridges it. A log that ends below the next
// offset was deleted and recreated (or truncated): its offsets are not the
// ones the ledger holds, and loading them would mix the two, so the run
// stops and says so. Other jumps (aborted transactions, compaction) are
// above the log start and are no loss.
func (w *Worker) checkContinuity(p kgo.FetchTopicPartition) {
	tp := sink.TopicPartition{Topic: p.Topic, Partition: p.Partition}
	first := p.Records[0].Offset
	next, ok := w.b.nextOf(tp)
	if !ok {
		// No position: reading started at the log start, and the first
		// range starts there too, covering what Kafka skipped before the
		// first record (aborted records, markers of a compacted log);
		// else verify would see a gap at the head.
		start := first
		if p.LogStartOffset >= 0 && p.LogStartOffset < first {
			start = p.LogStartOffset
		}
		w.b.setNext(tp, start)
		return
	}
	switch {
	case p.HighWatermark < next && first < next:
		w.logEndsBelow(tp, p.HighWatermark, next)
	case first > next && p.LogStartOffset > next:
		lostTo := min(first, p.LogStartOffset) // first offset not lost
		w.lost(tp, next, lostTo)
		w.b.setNext(tp, lostTo) // cuts the open range of tp: it must not go on over the gap
	}
}

// logEndsBelow stops the run on a partition whose log ends (end) below
// the next offset to load: the topic was deleted and recreated, or its log
// truncated, and its offsets are not the ones the ledger holds.
func (w *Worker) logEndsBelow(tp sink.TopicPartition, end, next int64) {
	err := fmt.Errorf("%w: %s/%d ends at offset %d, below the next offset to load %d: the topic was deleted and recreated, or the log truncated. "+
		"The ledger's offsets of this partition belong to the old log; load the new one into a new table (sink.table), or remove the partition's ledger rows to start it again",
		sink.ErrFatal, tp.Topic, tp.Partition, end, next)
	w.stopOnLogReset(tp.Topic, err, "partition log is behind the ledger; stopping", "partition", tp.Partition,
		"log_end", end, "next", next)
}

// lost logs and counts the records of tp from first up to next (not
// included) as deleted by Kafka before they were loaded.
func (w *Worker) lost(tp sink.TopicPartition, first, next int64) {
	// verify sees the gap only above a ledger range of the partition: a
	// loss before its first load leaves the ledger starting past it and
	// Kafka no longer holding it, so this line and the metric are all
	// that tell it.
	w.log.Error("records deleted by Kafka (retention) before they were loaded; they are lost and the gap stays in the ledger (tracelake verify reports it once the partition has loads below it; before its first load, only this line and tracelake_lost_records_total tell it)",
		"topic", tp.Topic, "partition", tp.Partition, "first_lost", first, "last_lost", next-1, "lost", next-first)
	w.opt.Metrics.LostRecords.WithLabelValues(tp.Topic).Add(float64(next - first))
}

// knownTopics are the topics a poll fetched a partition of without an
// error.
func knownTopics(fetches kgo.Fetches) map[string]bool {
	known := map[string]bool{}
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Err == nil {
			known[p.Topic] = true
		}
	})
	return known
}

// unknownTopic is a topic whose fetches Kafka answers UNKNOWN_TOPIC_ID:
// since when without a break, and when a poll last said so.
type unknownTopic struct{ since, seen time.Time }

// topicsUnknown follows the topics whose fetches Kafka answered
// UNKNOWN_TOPIC_ID in a poll (unknown), and those it answered without an
// error (known: the topic is there again), and says whether any is
// unknown. The client hands a poll a partition only with records or an
// error, so a poll that names neither for a topic (its broker answered in
// another, or it is quiet) says nothing of it; a topic no poll has called
// unknown for half of UnknownTopicWait is taken as answered again (a
// deleted topic is called so at every poll). The client keeps the topic
// id it first learned, so a topic deleted under a running worker, and
// recreated under its name or not, is answered so from then on: its new
// log's offsets are not the ledger's, as for a log that ends below the
// ledger (checkContinuity), and the run stops once a topic has stayed
// unknown for UnknownTopicWait (a moment of it is a broker that has not
// learned a new topic yet).
func (w *Worker) topicsUnknown(unknown, known map[string]bool) bool {
	now := time.Now()
	for t, u := range w.unknownTopics {
		if known[t] && !unknown[t] || now.Sub(u.seen) > w.opt.UnknownTopicWait/2 {
			delete(w.unknownTopics, t)
		}
	}
	for t := range unknown {
		u := w.unknownTopics[t]
		switch {
		case u == nil:
			if w.unknownTopics == nil {
				w.unknownTopics = map[string]*unknownTopic{}
			}
			w.unknownTopics[t] = &unknownTopic{since: now, seen: now}
			w.log.Warn("Kafka does not know the topic's id: it was deleted, or a broker has not learned it yet; the run stops if this lasts", "topic", t, "wait", w.opt.UnknownTopicWait)
			continue
		case now.Sub(u.since) >= w.opt.UnknownTopicWait:
			err := fmt.Errorf("%w: topic %s: Kafka has not known its id for %s: the topic was deleted and recreated, or deleted. "+
				"The ledger's offsets of its partitions belong to the old log; load a recreated topic into a new table (sink.table), or remove its ledger rows to start it again",
				sink.ErrFatal, t, w.opt.UnknownTopicWait)
			w.stopOnLogReset(t, err, "topic id unknown to Kafka; stopping", "since", u.since)
			u.since = now // stopping: said once per wait
		}
		u.seen = now
	}
	return len(unknown) > 0
}

// dataLoss handles Kafka losing records it had acknowledged, as the client
// found them: the partition's log diverged from what this worker read (an
// unclean leader election, a log truncated or recreated under a running
// client). The client resumes reading below what was read, and new records
// may now hold offsets the ledger already has: loading on would skip them
// as already loaded, and going back would store two records under one
// offset. So, as for a log that ends below the ledger (checkContinuity),
// the run stops and says where.
func (w *Worker) dataLoss(lost *kgo.ErrDataLoss) {
	err := fmt.Errorf("%w: %s/%d: Kafka lost records it had acknowledged (an unclean leader election, or the log truncated or recreated): "+
		"this worker read up to offset %d and the log now diverges at offset %d, so offsets the ledger holds may name other records now. "+
		"Check the partition; load it into a new table (sink.table), or remove the partition's ledger rows from offset %d (and their rows) to load the log as it is",
		sink.ErrFatal, lost.Topic, lost.Partition, lost.ConsumedTo, lost.ResetTo, min(lost.ResetTo, lost.ConsumedTo))
	w.stopOnLogReset(lost.Topic, err, "Kafka lost acknowledged records; stopping", "partition", lost.Partition,
		"consumed_to", lost.ConsumedTo, "reset_to", lost.ResetTo)
}

// stopOnLogReset stops the run on a partition's log that no longer holds
// what the ledger says was loaded from it: logged, counted, and err is
// what the run returns.
func (w *Worker) stopOnLogReset(topic string, err error, msg string, attrs ...any) {
	w.log.Error(msg, append([]any{"topic", topic}, attrs...)...)
	w.opt.Metrics.LogResets.WithLabelValues(topic).Inc()
	if w.opt.Fatal != nil {
		w.opt.Fatal(err)
	}
}

// send hands an item to the stager; the caller holds sendSem. While the
// pipeline is full (loads slow or failing) it keeps allowing rebalances, so
// the group can move partitions away from a stuck worker instead of
// waiting for it (the revoke gives up after RevokeWait, see flushForRevoke).
func (w *Worker) send(it item) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case w.batches <- it:
			return
		case <-tick.C:
			w.cl.AllowRebalance()
		}
	}
}

// flushForRevoke loads everything read so far and waits for it, at most
// RevokeWait. It runs in the revoke callback, while polling is blocked.
// If the poll loop is in the middle of sending (the pipeline is full
// because loads fail), or the loads take longer than RevokeWait, the revoke
// goes on without them: what is pending loads later, and the ledger fence
// makes whichever of this worker and the partitions' new owner loads the
// same records second skip them. Batches are only ever sent under sendSem,
// so this flush can never overtake batches read before it (an overtaking
// batch would make the fence skip the earlier rows).
func (w *Worker) flushForRevoke() error {
	if !w.running.Load() {
		// Nothing was read (only Run polls), and no loader would ever
		// take a flush if Run is not to come (a sibling's set-up failed,
		// Run closes this one): what the flush would do is commit the
		// seeded positions, done here.
		w.commitSeeded()
		return nil
	}
	timer := time.NewTimer(w.opt.RevokeWait)
	defer timer.Stop()
	select {
	case w.sendSem <- struct{}{}:
	case <-timer.C:
		return fmt.Errorf("the pipeline did not take the pending data within %s", w.opt.RevokeWait)
	}
	w.mu.Lock()
	bs := w.b.closeAll()
	w.mu.Unlock()
	done := make(chan error, 1)
	// The sends complete in order even if this revoke stops waiting.
	go func() {
		defer func() { <-w.sendSem }()
		for _, b := range bs {
			w.batches <- item{batch: b}
		}
		w.batches <- item{flush: done}
	}()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("pending data not loaded within %s", w.opt.RevokeWait)
	}
}

// commitSeeded commits the positions seeded at assignment from a revoke
// of a worker whose loader is not running, as the loader's flush would.
// They stay seeded: if Run starts after all, its loader commits those of
// partitions still owned (commitsDue skips what is committed already).
func (w *Worker) commitSeeded() {
	w.mu.Lock()
	dirty := maps.Clone(w.seeded)
	w.mu.Unlock()
	w.commit(context.Background(), dirty, false)
	w.commit(context.Background(), dirty, true)
}

// leave stops the start retries and leaves the group (revoking what is
// owned): at the end of Run, or instead of it for a worker Run set up
// but will not run (a sibling's set-up failed).
func (w *Worker) leave() {
	w.bgCancel()
	w.cl.Close()
}

// flush closes the open batch and waits until it and everything staged
// before it is loaded and committed (at shutdown).
func (w *Worker) flush() error {
	w.sendSem <- struct{}{}
	w.mu.Lock()
	bs := w.b.closeAll()
	w.mu.Unlock()
	for _, b := range bs {
		w.batches <- item{batch: b}
	}
	done := make(chan error, 1)
	w.batches <- item{flush: done}
	<-w.sendSem
	return <-done
}

// stageLoop stages batches, up to the sink's StageAhead at once when it
// is a sink.ConcurrentStager (uploads overlap instead of queueing), and
// hands the files to the loader in the order the batches were read: a
// file must never load before one read earlier, or its commit would skip
// the earlier one's records.
func (w *Worker) stageLoop() {
	ahead := 1
	if cs, ok := w.opt.Sink.(sink.ConcurrentStager); ok {
		ahead = max(1, cs.StageAhead())
	}
	inOrder := make(chan chan item, ahead-1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c := range inOrder {
			w.files <- <-c
		}
	}()
	for it := range w.batches {
		c := make(chan item, 1)
		inOrder <- c // blocks while `ahead` batches are staging: backpressure
		if it.flush != nil {
			c <- it
			continue
		}
		go func() { c <- w.stage(it) }()
	}
	close(inOrder)
	<-done
	close(w.files)
}

// stage stages one batch, retrying until it succeeds or shutdown.
func (w *Worker) stage(it item) item {
	var f sink.File
	it.batch.Stream = w.stream
	err := w.retry("stage", func() error {
		var err error
		f, err = w.opt.Sink.Stage(w.hard, it.batch.Batch)
		return err
	})
	if _, ok := w.opt.Sink.(sink.RowsReleaser); ok && err == nil {
		w.b.rows.put(it.batch.Rows)
		w.b.derived.put(it.batch.Derived)
	} else if err == nil {
		// The sink may read them until the load ends (release).
		it.batch.rows, it.batch.derived = it.batch.Rows, it.batch.Derived
	}
	it.batch.Batch = nil // the sink owns the rows now; keep the bookkeeping
	if err != nil {
		// Shutting down with a stage failing: the batch is dropped and
		// its records are read again next time. The loader must not
		// load anything after it, or its commit would skip them.
		w.log.Error("batch not staged; its records will be read again", "err", err)
		return item{batch: it.batch, err: err}
	}
	if _, ok := w.opt.Sink.(sink.FileStager); ok {
		// Its rows are in files now: the memory is free although the
		// batch waits for its load (an Iceberg commit interval).
		w.spill(it.batch)
	}
	w.opt.Stats.addFile(f.Bytes)
	w.opt.Metrics.StagedFiles.Inc()
	w.opt.Metrics.StagedBytes.Add(float64(f.Bytes))
	return item{batch: it.batch, file: f}
}

// loadLoop loads pending files when load.max_files or load.max_bytes are
// pending or load.max_interval after the first one, and on flush markers.
func (w *Worker) loadLoop() error {
	var pending []item
	var pendingBytes int64
	// pendingNext is the offset after the pending files' last of each
	// partition: a file that starts past it follows records Kafka deleted
	// before they were read (retention; checkContinuity logs them), and
	// loads apart, so that no ledger row spans them and verify reports
	// the gap (a load's ledger row of a partition goes from its first
	// file's first offset to its last file's last).
	pendingNext := map[sink.TopicPartition]int64{}
	var timer <-chan time.Time
	var failed error
	commitRetry := time.NewTicker(time.Second)
	defer commitRetry.Stop()
	dirty := map[sink.TopicPartition]int64{}
	// seeded adds the positions seeded at assignment (the ledger's, and
	// starts committed at assignment already unless that session ended
	// first) to dirty.
	seeded := func() {
		w.mu.Lock()
		for tp, next := range w.seeded {
			dirty[tp] = max(dirty[tp], next)
		}
		clear(w.seeded)
		w.mu.Unlock()
	}

	// commitTried says the last load committed dirty (its loaded
	// positions and any before it), or tried to.
	commitTried := false

	// load loads the pending files. Files covering the same offsets (a
	// partition read again) may be among them: the sinks fence each file
	// past the ones before it (sink.Runs).
	load := func() {
		commitTried = false
		defer func() { pending, pendingBytes, timer = pending[:0], 0, nil; clear(pendingNext) }()
		if len(pending) == 0 {
			return
		}
		defer w.release(pending)
		files := make([]sink.File, len(pending))
		for i, it := range pending {
			files[i] = it.file
		}
		if failed != nil {
			// An earlier batch could not be staged or loaded at shutdown:
			// never load a later file past it (its commit would skip it).
			w.opt.Sink.Discard(files)
			return
		}
		var loaded sink.Loaded
		began := time.Now()
		err := w.retry("load", func() error {
			var err error
			if cr, ok := w.opt.Sink.(sink.CommitReporter); ok {
				// Only the commit is left: read on while it runs.
				loaded, err = cr.LoadReporting(w.hard, files, func() {
					for _, it := range pending {
						w.spill(it.batch)
					}
				})
			} else {
				loaded, err = w.opt.Sink.Load(w.hard, files)
			}
			return err
		})
		if err != nil {
			failed = err
			w.log.Error("load failed at shutdown; its records will be read again", "files", len(files), "err", err)
			w.opt.Sink.Discard(files)
			return
		}
		w.loaded(pending, loaded, time.Since(began))
		// Every offset of the files is now in the ledger, inserted by this
		// load or (when the sink skipped it) by an earlier one.
		for _, f := range files {
			for _, r := range f.Ranges {
				dirty[r.TopicPartition] = max(dirty[r.TopicPartition], r.Last+1)
			}
		}
		w.commit(w.hard, dirty, false)
		commitTried = true
	}

	for {
		select {
		case it, ok := <-w.files:
			if !ok {
				load()
				return failed
			}
			if it.flush != nil {
				// A revoke or the shutdown waits for this: the seeded
				// positions are committed before the partitions go, also
				// with nothing loaded. Where a partition started is
				// committed before it is read (adjustOffsets); a start
				// whose commit the session's end cut short (nothing of
				// it read) is committed here, so the next owner or run
				// still starts there rather than at the end as it is
				// then.
				seeded()
				load()
				if !commitTried && len(dirty) > 0 {
					w.commit(w.hard, dirty, false)
				}
				if len(dirty) > 0 {
					w.commit(w.hard, dirty, true)
				}
				it.flush <- failed
				continue
			}
			if it.err != nil {
				load() // what was staged before the failed batch may load
				if failed == nil {
					failed = it.err
				}
				w.release([]item{it})
				continue
			}
			if afterGap(pendingNext, it.file.Ranges) {
				load()
			}
			pending = append(pending, it)
			pendingBytes += it.batch.bytes
			for _, r := range it.file.Ranges {
				pendingNext[r.TopicPartition] = max(pendingNext[r.TopicPartition], r.Last+1)
			}
			if len(pending) == 1 {
				timer = time.After(w.untilLoad(time.Now()))
			}
			if len(pending) >= w.opt.LoadMaxFiles || w.opt.LoadMaxBytes > 0 && pendingBytes >= w.opt.LoadMaxBytes {
				load()
			}
		case <-timer:
			load()
		case <-commitRetry.C:
			seeded()
			if len(dirty) > 0 {
				w.commit(w.hard, dirty, false)
			}
		}
	}
}

// afterGap says whether ranges start past next (the offset after what
// is pending of each partition) in a partition: records between were lost.
func afterGap(next map[sink.TopicPartition]int64, ranges []sink.Range) bool {
	for _, r := range ranges {
		if n, ok := next[r.TopicPartition]; ok && r.First > n {
			return true
		}
	}
	return false
}

// untilLoad is how long the first file pending at now waits for its load.
func (w *Worker) untilLoad(now time.Time) time.Duration {
	iv := w.opt.LoadInterval
	if !w.opt.AlignLoads || iv <= 0 {
		return iv
	}
	since := (now.UnixNano() - int64(w.opt.LoadPhase)) % int64(iv)
	if since < 0 {
		since += int64(iv)
	}
	return iv - time.Duration(since)
}

// release ends the in-flight accounting of items, loaded or dropped.
func (w *Worker) release(items []item) {
	var n, bytes int64
	for _, it := range items {
		n += it.batch.records
		if !it.batch.spilled {
			bytes += it.batch.bytes
		}
		// The load ended (or its files were discarded): the sink is done
		// with the rows. A batch that failed to stage has none kept here.
		w.b.rows.put(it.batch.rows)
		w.b.derived.put(it.batch.derived)
		it.batch.rows, it.batch.derived = nil, nil
	}
	w.inflight.Add(-n)
	w.freeMemory(bytes)
}

// spill frees b's share of the in-flight budget before its load ended
// (once; release then frees only the rest): its rows are out of this
// process's memory, staged to files (sink.FileStager) or read by the load
// (sink.CommitReporter).
func (w *Worker) spill(b *batch) {
	if !b.spilled {
		w.freeMemory(b.bytes)
		b.spilled = true
	}
}

// freeMemory returns bytes to the in-flight budget (max_inflight_bytes).
func (w *Worker) freeMemory(bytes int64) {
	w.held.Add(-bytes)
	w.opt.Stats.Inflight.Add(-bytes)
	w.opt.Metrics.InflightBytes.Sub(float64(bytes))
	w.opt.Budget.release(bytes)
}

// waitForBudget runs when max_inflight_bytes is reached: it pauses
// fetching of the owned partitions and waits until bytes are freed, or
// 250ms, or shutdown. Before that, unless loads by size are already
// coming, it hands the open batch on and asks for a load now, so memory is
// freed soon (with a sink.FileStager staging frees it, and loads keep
// their pace).
//
// Loads by size are coming when the worker holds at least load.max_bytes
// outside its open batch: staged, staging or loading, they reach the
// loader, which loads at that size without waiting for load.max_interval.
// Asking for a load then would only make loads small: when the sink is the
// bottleneck the budget is full nearly all the time, and asking each time
// cut DuckDB's loads to a fraction of load.max_bytes, each costing more per
// row.
func (w *Worker) waitForBudget(ctx context.Context) {
	_, stagingFrees := w.opt.Sink.(sink.FileStager)
	// A revoke may run now (rebalances are allowed between polls): close
	// the batch under sendSem so it cannot overtake the revoke's flush.
	w.sendSem <- struct{}{}
	w.mu.Lock()
	closed := w.held.Load() - w.b.openBytes()
	nudge := stagingFrees || w.opt.LoadMaxBytes <= 0 || closed < w.opt.LoadMaxBytes
	var bs []*batch
	if nudge {
		bs = w.b.closeAll()
	}
	paused := map[string][]int32{}
	for tp := range w.owned {
		if rr := w.rereads[tp]; rr != nil && !rr.resumeAt.IsZero() {
			continue // paused until its retry (resumeRereads)
		}
		if w.pending[tp] != nil {
			continue // paused until its start is committed (startLater)
		}
		paused[tp.Topic] = append(paused[tp.Topic], tp.Partition)
	}
	w.mu.Unlock()
	for _, b := range bs {
		w.send(item{batch: b})
	}
	if nudge && !stagingFrees {
		w.send(item{flush: make(chan error, 1)}) // load now; nobody waits for the outcome
	}
	<-w.sendSem
	w.cl.PauseFetchPartitions(paused)
	defer func() {
		// Not one that a rebalance meanwhile made wait for its start.
		w.mu.Lock()
		defer w.mu.Unlock()
		for t, ps := range paused {
			paused[t] = slices.DeleteFunc(ps, func(p int32) bool {
				return w.pending[sink.TopicPartition{Topic: t, Partition: p}] != nil
			})
		}
		w.cl.ResumeFetchPartitions(paused)
	}()
	w.opt.Metrics.FetchPauses.Inc()
	select {
	case <-w.opt.Budget.freed:
	case <-time.After(250 * time.Millisecond):
	case <-ctx.Done():
	}
}

// loaded records a successful load in the stats and metrics: loads, files,
// duration, freshness of every stored record, dead-letter records by
// reason, and the lag of the partitions loaded.
func (w *Worker) loaded(items []item, l sink.Loaded, took time.Duration) {
	m := w.opt.Metrics
	w.opt.Stats.addLoad(l)
	m.Loads.Inc()
	m.FilesPerLoad.Observe(float64(len(items)))
	m.LoadDuration.Observe(took.Seconds())
	now := time.Now().UnixNano()
	var decodeDLQ, loadedDLQ int64
	for _, it := range items {
		for _, c := range it.batch.created {
			m.Freshness.Observe(float64(now-c) / 1e9)
		}
		for kind, n := range it.batch.dlqKinds {
			m.DLQRecords.WithLabelValues(kind).Add(float64(n))
			decodeDLQ += n
		}
	}
	for _, r := range l.Ranges {
		loadedDLQ += r.DLQ
	}
	if rejected := loadedDLQ - decodeDLQ; rejected > 0 {
		m.DLQRecords.WithLabelValues(envelope.KindRejected).Add(float64(rejected))
	}
	w.log.Debug("loaded", "files", len(items), "took", took)

	w.mu.Lock()
	defer w.mu.Unlock()
	for _, it := range items {
		for _, r := range it.file.Ranges {
			if p := w.owned[r.TopicPartition]; p != nil {
				p.next = max(p.next, r.Last+1)
				p.lastLoad = time.Unix(0, now)
				p.updateLag()
			}
		}
	}
}

// commit commits the loaded positions of partitions this worker still owns.
// Positions of partitions it no longer owns are dropped: their new owner
// resumes from the ledger. The ownership check and the commit happen under
// commitMu, which dropping a revoked partition takes too, so a commit never
// lands for a partition after its revoke completed; the worker's mu is not
// held across the network, so a slow coordinator stalls no poll and no
// status page, and a commit gives up after CommitTimeout.
//
// paused picks the partitions committed: those paused until their start
// is committed (w.pending, whose seeded start is all dirty holds of them),
// or the others. The two never share a request: Kafka refusing a paused
// partition's start, the reason it is paused, refused the others' commits
// with it, and their committed offsets stayed behind what was loaded
// (lag, exit-when-idle waiting) until it was accepted. startPending
// retries the paused ones' starts; the loader commits them only at a
// revoke's or the shutdown's flush, its last chance.
func (w *Worker) commit(ctx context.Context, dirty map[sink.TopicPartition]int64, paused bool) {
	w.commitMu.Lock()
	defer w.commitMu.Unlock()
	offsets := w.commitsDue(dirty, paused)
	if len(offsets) == 0 {
		return
	}
	accepted, err := w.commitOffsets(ctx, offsets)
	for t, ps := range accepted {
		for p := range ps {
			delete(dirty, sink.TopicPartition{Topic: t, Partition: p})
		}
	}
	if err != nil {
		// The data is in the sink with its ledger rows; a failed commit only
		// delays the committed offset. Retried every second, for the
		// partitions Kafka refused.
		w.log.Warn("offset commit failed; will retry", "err", err)
	}
}

// commitsDue returns the positions of dirty to commit: those of owned
// partitions paused (or not) until their start is committed, past what is
// committed already. It drops from dirty the positions nobody is to
// commit. The caller holds commitMu.
func (w *Worker) commitsDue(dirty map[sink.TopicPartition]int64, paused bool) map[string]map[int32]kgo.EpochOffset {
	w.mu.Lock()
	defer w.mu.Unlock()
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for tp, next := range dirty {
		p := w.owned[tp]
		if p == nil || next <= p.committed {
			// Not owned, or already committed as far: a commit never moves
			// a partition back (the ledger position seeded at assignment
			// may come after a load committed further, and nothing would
			// move it forward again: lag and exit-when-idle would wait).
			delete(dirty, tp)
			continue
		}
		if _, isPaused := w.pending[tp]; isPaused != paused {
			continue
		}
		if offsets[tp.Topic] == nil {
			offsets[tp.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[tp.Topic][tp.Partition] = kgo.EpochOffset{Epoch: -1, Offset: next}
	}
	return offsets
}

// commitOffsets commits offsets, giving up after CommitTimeout or with
// ctx, and notes those committed (the status page, the committed offset
// metric): accepted. Kafka answers each partition of a commit on its own,
// so it may take some and refuse others; the error names each refused
// (an error of the whole request refuses all). A partition this worker
// committed as far already is not sent, and counts as accepted: a commit
// never moves a committed offset back. The caller holds commitMu.
func (w *Worker) commitOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) (accepted map[string]map[int32]kgo.EpochOffset, err error) {
	send, already := w.committedAlready(offsets)
	if len(send) > 0 {
		ctx, cancel := context.WithTimeout(ctx, w.opt.CommitTimeout)
		defer cancel()
		w.cl.CommitOffsetsSync(ctx, send, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, reqErr error) {
			if reqErr != nil {
				err = reqErr
				return
			}
			accepted, err = commitAnswers(send, req, resp)
		})
	}
	w.mu.Lock()
	for t, ps := range accepted {
		for p, o := range ps {
			if st := w.owned[sink.TopicPartition{Topic: t, Partition: p}]; st != nil {
				st.committed = max(st.committed, o.Offset)
			}
			w.opt.Metrics.Committed.WithLabelValues(t, obs.PartitionLabel(p)).Set(float64(o.Offset))
		}
	}
	w.mu.Unlock()
	accepted = mergeOffsets(accepted, already)
	if err != nil {
		return accepted, fmt.Errorf("commit offsets: %w", err)
	}
	return accepted, nil
}

// committedAlready splits offsets into those to send and those of owned
// partitions committed at or past them already. A start's commit
// (commitPending's retries, a revoke's commitRevokedStarts) may come after
// the loader committed its partition further (a flush commits the paused
// partitions' positions too): sent, it set Kafka's committed offset back,
// where lag and exit-when-idle read it, and the loader, taking the
// partition as committed that far, never committed it forward again.
func (w *Worker) committedAlready(offsets map[string]map[int32]kgo.EpochOffset) (send, already map[string]map[int32]kgo.EpochOffset) {
	send, already = map[string]map[int32]kgo.EpochOffset{}, map[string]map[int32]kgo.EpochOffset{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for t, ps := range offsets {
		for p, o := range ps {
			into := send
			if st := w.owned[sink.TopicPartition{Topic: t, Partition: p}]; st != nil && o.Offset <= st.committed {
				into = already
			}
			if into[t] == nil {
				into[t] = map[int32]kgo.EpochOffset{}
			}
			into[t][p] = o
		}
	}
	return send, already
}

// mergeOffsets adds the partitions of more to offsets (made if nil).
func mergeOffsets(offsets, more map[string]map[int32]kgo.EpochOffset) map[string]map[int32]kgo.EpochOffset {
	for t, ps := range more {
		if offsets == nil {
			offsets = map[string]map[int32]kgo.EpochOffset{}
		}
		if offsets[t] == nil {
			offsets[t] = map[int32]kgo.EpochOffset{}
		}
		for p, o := range ps {
			offsets[t][p] = o
		}
	}
	return offsets
}

// partitions reports the owned partitions for the status page.
func (w *Worker) partitions(dst []obs.PartitionStatus) []obs.PartitionStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	for tp, p := range w.owned {
		dst = append(dst, obs.PartitionStatus{Topic: tp.Topic, Partition: tp.Partition, Worker: w.id,
			Next: p.next, Committed: p.committed, HWM: p.hwm, LastLoad: p.lastLoad})
	}
	return dst
}

// retry runs fn until it succeeds, backing off 1s, 2s, 4s … up to the
// configured maximum. Retrying stops at shutdown: once intake has stopped, a
// failure is final (the records are read again by the next process).
func (w *Worker) retry(what string, fn func() error) error {
	delay := w.opt.RetryBase
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if errors.Is(err, sink.ErrFatal) {
			w.log.Error(what+" failed and cannot be retried in this process; stopping", "err", err)
			if w.opt.Fatal != nil {
				w.opt.Fatal(err)
			}
			return err
		}
		w.opt.Stats.addRetry()
		w.opt.Metrics.Retries.WithLabelValues(what).Inc()
		if w.intake.Err() != nil {
			return err
		}
		w.log.Warn(what+" failed; retrying with the same files", "attempt", attempt, "in", delay, "err", err)
		select {
		case <-time.After(delay):
		case <-w.intake.Done():
			return err
		}
		delay = min(delay*2, w.opt.RetryMaxDelay)
	}
}
