// Package directload loads the OTLP receivers' requests straight into the
// sink, without Kafka (otlp.mode: load). Each accepted request takes the
// next position of a sequence of this process's own — topic
// "otlp:<signal>", partition otlp.instance — recorded in the sink's ledger
// in the load's transaction as a Kafka offset would be; requests that
// arrive while a load runs are decoded into the next one meanwhile (group
// commit), and each is answered only after the load holding its rows
// committed. It implements otlp.Forwarder.
//
// A load that fails is tried again with the same staged rows
// (LoadAttempts), then answers its requests with an error (the receivers
// tell clients to retry) and the sequence resumes from the ledger, so a
// load whose outcome was unknown — committed, its reply lost — never has
// its positions reused (an attempt that finds them in the ledger under
// the load's own identity, sink.LoadIdentity, answers its requests as
// stored: sink.Loaded.Own); nor, where the sink commits its tables one by
// one (Iceberg), a load that committed some of them: the sequence resumes
// past the furthest table, the positions skipped recorded as abandoned
// (sink.TableByTableCommitter). A client retrying after a lost answer stores its
// request twice, as with any OTLP backend: the dedup model keeps one copy.
package directload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/sink"
)

// Topic is the ledger topic of the requests of signal: a name Kafka never
// gives a topic (':' is not allowed there), so it cannot meet a consumed
// topic's positions.
func Topic(signal string) string { return topicPrefix + signal }

const topicPrefix = sink.SequenceTopicPrefix

// IsTopic reports whether topic is a direct-load sequence's, not Kafka's.
func IsTopic(topic string) bool { return strings.HasPrefix(topic, topicPrefix) }

// TenantHeader is the header of the records handed to the decoder that
// holds the request's tenant (checked by the receivers): the decoder must
// read the tenant from it.
const TenantHeader = "otlp-tenant"

// RowDecoder makes a request's rows (pipeline.RowDecoder).
type RowDecoder interface {
	AppendRows(b *sink.Batch, r *kgo.Record) (rows int, err error)
}

// Options configure a Loader.
type Options struct {
	Sink sink.Sink
	// Decoder reads a request (an OTLP export request in protobuf, as
	// the receivers hand it over) into rows, its tenant from TenantHeader.
	Decoder RowDecoder
	// Signal is the only signal loaded: the sink's table holds its rows.
	Signal string
	// Partition tells apart the processes loading the same tables: each
	// needs its own, or their positions collide (a collision is caught at
	// the load and answered with a retry, never stored under another's
	// position).
	Partition int32
	// MaxLoadBytes bounds the request bytes of one load.
	MaxLoadBytes int64
	// RetryBase is the first wait before a failed load is tried again
	// with the same staged rows (doubling, LoadAttempts in all);
	// DefaultRetryBase if zero.
	RetryBase time.Duration
	// Fatal, if not nil, is told of a load that failed with sink.ErrFatal
	// (an error no retry in this process can fix: DuckDB invalidated the
	// database, Databend refused the credentials), once its requests are
	// answered: the process must stop, as a Kafka load's fatal error
	// stops it, so that a restart resumes from the ledger. Answering
	// every later request 503 instead kept a process that cannot store
	// anything running, and no supervisor restarted it.
	Fatal   func(error)
	Log     *slog.Logger
	Metrics *obs.Metrics // may be nil
}

// LoadAttempts is how many times a load is tried with the same staged
// rows before its requests are refused. Only the same staged files tell a
// sink that an attempt whose outcome was unknown committed after all:
// Databend lands a COMMIT whose reply was lost late, after the ledger
// read that resumes the sequence, and refuses the second commit of a
// file (DuplicatedUpsertFiles), where rows staged again under new names
// at the same positions would commit beside it. Three attempts wait
// RetryBase and twice it, well inside an OTLP exporter's 10 s timeout.
const LoadAttempts = 3

// DefaultRetryBase is the first wait before a failed load's next attempt.
const DefaultRetryBase = 500 * time.Millisecond

// Loader is the direct loading of one signal's requests.
type Loader struct {
	opt  Options
	tp   sink.TopicPartition
	reqs chan *request
	stop context.CancelFunc
	done chan struct{}

	// Owned by the loop.
	next int64  // position of the next request; -1: read it from the ledger
	open *group // requests decoded for the next load, nil for none

	stats stats
}

// stats are what the status page and Totals show, read from other
// goroutines.
type stats struct {
	requests, rows, dlq atomic.Int64 // taken; stored
	loadedRequests      atomic.Int64 // requests whose load committed
	loads               atomic.Int64 // loads committed
	given               atomic.Int64 // positions handed out: the next one
	loaded              atomic.Int64 // the ledger's next position
	lastLoad            atomic.Int64 // unix nanoseconds, 0 for none
}

// Totals are what a Loader stored since it started.
type Totals struct {
	Requests  int64 // requests whose load committed (a retried one counts again)
	Rows, DLQ int64 // rows stored in the table and in its dead-letter table
	Loads     int64 // loads committed, one staged file each
}

// group is the requests of one load, decoded into its batch at
// consecutive positions.
type group struct {
	reqs  []*request
	batch *sink.Batch
	bytes int64 // request bytes
	// fatal is the sink.ErrFatal of an attempt after the one whose
	// commit the ledger found landed: the requests are stored, but the
	// sink cannot go on in this process.
	fatal error
}

type request struct {
	tenant string
	body   []byte
	at     time.Time
	// stored is what its load did with its rows, filled in by add (a
	// request the decoder refused) and by load (rows the sink rejected).
	stored otlp.Stored
	rows   int64 // its rows in the load (main and dead-letter tables)
	done   chan error
}

// ErrClosed answers requests that arrive after Close.
var ErrClosed = errors.New("the loader is shutting down")

// Start reads the sequence's position from the ledger and starts loading.
// The sink must be prepared.
func Start(ctx context.Context, opt Options) (*Loader, error) {
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	l := &Loader{opt: opt, tp: sink.TopicPartition{Topic: Topic(opt.Signal), Partition: opt.Partition},
		reqs: make(chan *request), done: make(chan struct{}), next: -1}
	if err := l.resume(ctx); err != nil {
		return nil, err
	}
	opt.Log.Info("OTLP requests load directly", "signal", opt.Signal, "ledger_topic", l.tp.Topic, "partition", l.tp.Partition, "next", l.next)
	run, stop := context.WithCancel(context.Background())
	l.stop = stop
	go l.loop(run)
	return l, nil
}

// Forward implements otlp.Forwarder: it returns once body's rows are
// committed, with the rows sent to the dead-letter table instead, or with
// the reason they are not committed.
func (l *Loader) Forward(ctx context.Context, signal, tenant string, body []byte) (otlp.Stored, error) {
	if signal != l.opt.Signal {
		return otlp.Stored{}, fmt.Errorf("BUG: a %s request for the loader of %s", signal, l.opt.Signal)
	}
	r := &request{tenant: tenant, body: body, at: time.Now(), done: make(chan error, 1)}
	select {
	case l.reqs <- r:
	case <-l.done:
		return otlp.Stored{}, ErrClosed
	case <-ctx.Done():
		return otlp.Stored{}, ctx.Err()
	}
	// Once taken, the request is answered by its load, even when the
	// client has gone: a load is not abandoned half-way. Nor is a request
	// whose client went while it waited for its load to begin left out:
	// a client that gave up does not always send it again (the Go SDK's
	// OTLP/gRPC exporter bounds a whole export, retries included, by its
	// timeout), and left out its rows were lost; loaded, a client that
	// does retry stores a copy, which the dedup model keeps once.
	if err := <-r.done; err != nil {
		return otlp.Stored{}, err
	}
	return r.stored, nil
}

// Close finishes the load in progress, answers what waits with ErrClosed
// and stops.
func (l *Loader) Close() {
	l.stop()
	<-l.done
}

// loop takes requests and runs one load at a time; while a load runs, the
// requests that arrive are decoded into the next one, up to MaxLoadBytes
// (past it, senders wait). When ctx ends, the load in progress finishes
// (its context is not ctx) and the requests not loading are refused.
func (l *Loader) loop(ctx context.Context) {
	defer close(l.done)
	loadCtx := context.WithoutCancel(ctx)
	var loading *group
	results := make(chan error, 1)
	for {
		if loading == nil && l.open != nil {
			loading, l.open = l.open, nil
			go func(g *group) { results <- l.load(loadCtx, g) }(loading)
		}
		reqs := l.reqs
		if l.open != nil && l.open.bytes >= l.opt.MaxLoadBytes {
			reqs = nil // full: the next requests wait for this load to start
		}
		select {
		case r := <-reqs:
			l.add(ctx, r)
		case err := <-results:
			l.finished(ctx, loading, err)
			fatal := err
			if loading.fatal != nil {
				// Stored (all, or those not at another loader's
				// positions: a fencedError), but the sink cannot go on.
				fatal = loading.fatal
			}
			loading = nil
			if errors.Is(fatal, sink.ErrFatal) && l.opt.Fatal != nil {
				l.opt.Fatal(fmt.Errorf("the %s load of the OTLP receivers: %w", l.opt.Signal, fatal))
			}
		case <-ctx.Done():
			if loading != nil {
				l.finished(ctx, loading, <-results)
			}
			if l.open != nil {
				answer(l.open.reqs, ErrClosed)
			}
			return
		}
	}
}

// add decodes r into the open group at the next position.
func (l *Loader) add(ctx context.Context, r *request) {
	if l.next < 0 {
		if err := l.resume(ctx); err != nil {
			r.done <- err
			return
		}
	}
	if l.open == nil {
		l.open = &group{batch: &sink.Batch{ID: sink.NewBatchID(), Ranges: []sink.Range{{TopicPartition: l.tp, First: l.next}}}}
	}
	g, rg := l.open, &l.open.batch.Ranges[0]
	rec := &kgo.Record{Topic: l.tp.Topic, Partition: l.tp.Partition, Offset: l.next, Value: r.body, Timestamp: r.at,
		Headers: []kgo.RecordHeader{{Key: TenantHeader, Value: []byte(r.tenant)}}}
	r.stored = otlp.Stored{}
	if n, err := l.opt.Decoder.AppendRows(g.batch, rec); err != nil {
		// The receivers decoded it already; kept, with the reason, should
		// the decoder still refuse it.
		r.stored, r.rows = otlp.Stored{All: true, Reason: err.Error()}, 1
		start := len(g.batch.DLQ)
		g.batch.DLQ = envelope.AppendDLQRow(g.batch.DLQ, rec, err.Error(), envelope.StageDecode)
		g.batch.MaxLine = max(g.batch.MaxLine, len(g.batch.DLQ)-start)
		rg.DLQ++
	} else {
		rg.Records += int64(n)
		r.rows = int64(n)
	}
	rg.Last = l.next
	l.next++
	l.stats.given.Store(l.next)
	l.stats.requests.Add(1)
	g.reqs = append(g.reqs, r)
	g.bytes += int64(len(r.body))
}

// finished answers the requests of a load. After a failure the positions
// come from the ledger again (the load may have committed, its reply
// lost), and the open group, decoded at positions after the failed
// load's, is decoded again at the right ones.
func (l *Loader) finished(ctx context.Context, g *group, err error) {
	var fenced *fencedError
	refused := func(int) bool { return true }
	if errors.As(err, &fenced) {
		refused = func(i int) bool { return fenced.refused[i] }
	}
	if err != nil {
		n := 0
		for i := range g.reqs {
			if refused(i) {
				n++
			}
		}
		l.opt.Log.Warn("OTLP requests not loaded; their clients are told to retry", "requests", n, "err", err)
		if l.opt.Metrics != nil {
			l.opt.Metrics.Retries.WithLabelValues("direct_load").Inc()
		}
		l.next = -1
		if open := l.open; open != nil {
			l.open = nil
			for _, r := range open.reqs {
				l.add(ctx, r)
			}
		}
	}
	for i, r := range g.reqs {
		if err != nil && refused(i) {
			r.done <- err
		} else {
			r.done <- nil // stored: by this load, or past a fence
		}
	}
}

// fencedError is a load some of whose requests' positions were fenced
// (another process had loaded them): those are refused, the others are
// stored.
type fencedError struct {
	refused []bool // by request of the load
	err     error
}

func (e *fencedError) Error() string { return e.err.Error() }

// fencedBefore is how many of a load's requests were fenced when got of
// their rows were stored: the requests after them hold got rows (sinks
// count what they stored, not where it starts). A request of no rows
// counts as stored, whichever side it was (nothing of it can be stored
// twice). len(reqs) when no suffix holds got rows: none is known stored.
func fencedBefore(reqs []*request, got int64) int {
	var rows int64
	for i := len(reqs); i > 0; i-- {
		if rows+reqs[i-1].rows > got {
			if rows == got {
				return i
			}
			break
		}
		rows += reqs[i-1].rows
	}
	if rows == got {
		return 0
	}
	return len(reqs)
}

func answer(reqs []*request, err error) {
	for _, r := range reqs {
		r.done <- err
	}
}

// load stages and loads g.
func (l *Loader) load(ctx context.Context, g *group) error {
	start := time.Now()
	rg := g.batch.Ranges[0]
	f, err := l.opt.Sink.Stage(ctx, g.batch)
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	// would is, by position, the rows the latest attempt whose commit
	// may have landed dead-lettered there (sink.UncertainCommitError):
	// the attempt that finds that commit in the ledger (sink.Loaded.Own)
	// fences those positions out and does not see them.
	would := map[int64][]sink.Rejected{}
	uncertain := func(err error) {
		var ue *sink.UncertainCommitError
		if !errors.As(err, &ue) {
			return
		}
		for _, r := range ue.Would.Ranges {
			for pos := r.First; r.TopicPartition == l.tp && pos <= r.Last; pos++ {
				delete(would, pos)
			}
		}
		for _, rj := range ue.Would.Rejected {
			if rj.TopicPartition == l.tp {
				would[rj.Offset] = append(would[rj.Offset], rj)
			}
		}
	}
	loaded, err := l.opt.Sink.Load(ctx, []sink.File{f})
	uncertain(err)
	delay := cmp.Or(l.opt.RetryBase, DefaultRetryBase)
	for attempt := 2; err != nil && attempt <= LoadAttempts && !errors.Is(err, sink.ErrFatal); attempt++ {
		l.opt.Log.Warn("OTLP load failed; trying it again with the same staged rows before answering",
			"attempt", attempt, "in", delay, "err", err)
		if l.opt.Metrics != nil {
			l.opt.Metrics.Retries.WithLabelValues("direct_load").Inc()
		}
		time.Sleep(delay) // ctx never ends: a load in progress finishes (loop)
		delay *= 2
		loaded, err = l.opt.Sink.Load(ctx, []sink.File{f})
		uncertain(err)
	}
	if err != nil {
		// The last attempt may have landed with its reply lost, and no
		// attempt comes after it to find it: the ledger is asked, or its
		// requests are answered 503 with their rows stored, and their
		// clients' retries store them twice. So after an error no retry
		// mends (sink.ErrFatal) too: it ends the attempts, but an earlier
		// one's COMMIT may have landed, and a sink that still answers
		// (Databend refusing one statement) can say so; one that cannot
		// (DuckDB invalidated) fails the question, and the requests are
		// answered 503. The run stops all the same (group.fatal).
		if own := l.landed(ctx, f, err); len(own) > 0 {
			if errors.Is(err, sink.ErrFatal) {
				g.fatal = err
			}
			loaded, err = sink.Loaded{Own: own}, nil
		}
	}
	if err != nil {
		// Committed or not, nobody can tell: the ledger will.
		l.opt.Sink.Discard([]sink.File{f})
		return fmt.Errorf("load: %w", err)
	}
	// The rows dead-lettered instead of loaded: this attempt's, and at
	// the positions an earlier attempt committed (its reply lost), that
	// attempt's. Either way their requests are answered stored, and owe
	// their clients the rows the table refused.
	rejected := loaded.Rejected
	var ownRejected int64
	for pos := rg.First; pos <= rg.Last; pos++ {
		if ownPosition(loaded.Own, l.tp, pos) {
			rejected = append(rejected, would[pos]...)
			ownRejected += int64(len(would[pos]))
		}
	}
	for _, rj := range rejected {
		if rj.TopicPartition != l.tp || rj.Offset < rg.First || rj.Offset > rg.Last {
			// Committed: the clients are answered all the same.
			l.opt.Log.Error("BUG: the sink reports a rejected row outside the load", "partition", rj.TopicPartition, "offset", rj.Offset, "first", rg.First, "last", rg.Last)
			continue
		}
		st := &g.reqs[rj.Offset-rg.First].stored
		if st.Rejected++; st.Reason == "" {
			st.Reason = rj.Reason
		}
	}
	if got := stored(loaded, l.tp); got != rg.Records+rg.DLQ {
		// Rows were fenced. The fence is cumulative, so what this attempt
		// stored is the requests after some position: those count as
		// stored (a retry would store them twice). Of the requests
		// before, those at positions the ledger records as this load's
		// own (an earlier attempt of the same staged files committed
		// them, its reply lost: sink.Loaded.Own) are stored too; the
		// others' positions another process wrote (two loaders with one
		// otlp.instance): they are told to retry (finished), and the
		// sequence resumes past both.
		from := fencedBefore(g.reqs, got)
		refused := make([]bool, len(g.reqs))
		first, last := int64(-1), int64(-1)
		for i := range g.reqs[:from] {
			if pos := rg.First + int64(i); !ownPosition(loaded.Own, l.tp, pos) {
				refused[i] = true
				last = pos
				if first < 0 {
					first = pos
				}
			}
		}
		if first >= 0 {
			return &fencedError{refused: refused, err: fmt.Errorf("positions %d-%d of %s were already in the ledger, loaded by another load (another process loading with the same otlp.instance?): %d of %d rows stored",
				first, last, l.tp, got, rg.Records+rg.DLQ)}
		}
		l.opt.Log.Info("OTLP load committed by an earlier attempt whose reply was lost; its requests are stored",
			"partition", l.tp, "first", rg.First, "last", rg.Last)
	}
	// What the table and its dead-letter table hold of this load: the
	// sink's counts, which move the rows it refused (Databend) from the
	// one to the other, and add a derived row it refused to the dead
	// letters. A load an earlier attempt committed (its reply lost)
	// stored what was staged; this attempt's counts are not of it.
	rows, dlq := rg.Records-ownRejected, rg.DLQ+ownRejected
	if got := stored(loaded, l.tp); got == rg.Records+rg.DLQ {
		rows, dlq = 0, 0
		for _, r := range loaded.Ranges {
			if r.TopicPartition == l.tp {
				rows, dlq = rows+r.Records, dlq+r.DLQ
			}
		}
	}
	l.stats.rows.Add(rows)
	l.stats.dlq.Add(dlq)
	l.stats.loadedRequests.Add(int64(len(g.reqs)))
	l.stats.loads.Add(1)
	l.stats.loaded.Store(rg.Last + 1)
	l.stats.lastLoad.Store(time.Now().UnixNano())
	if m := l.opt.Metrics; m != nil {
		m.Loads.Inc()
		m.StagedFiles.Inc()
		m.StagedBytes.Add(float64(f.Bytes))
		m.FilesPerLoad.Observe(1)
		m.LoadDuration.Observe(time.Since(start).Seconds())
		// By reason, as a Kafka run's loads count them (pipeline's
		// loaded): requests the decoder refused, then the rows the
		// database refused at the load.
		if rg.DLQ > 0 {
			m.DLQRecords.WithLabelValues(envelope.KindUndecodable).Add(float64(rg.DLQ))
		}
		if rejected := dlq - rg.DLQ; rejected > 0 {
			m.DLQRecords.WithLabelValues(envelope.KindRejected).Add(float64(rejected))
		}
	}
	return nil
}

// landed returns the ledger rows of f's load, committed by an attempt
// that failed with loadErr (sink.LoadFinder), or none: not committed, or
// the sink cannot tell. A sink that commits its tables one by one
// (Iceberg) reads a commit's outcome back itself.
func (l *Loader) landed(ctx context.Context, f sink.File, loadErr error) []sink.Range {
	finder, ok := l.opt.Sink.(sink.LoadFinder)
	if !ok {
		return nil
	}
	own, err := finder.LoadedAs(ctx, sink.LoadIdentity([]sink.File{f}))
	if err != nil {
		l.opt.Log.Warn("OTLP load failed, and the ledger cannot tell whether its last attempt landed", "load_err", loadErr, "err", err)
		return nil
	}
	if len(own) > 0 {
		l.opt.Log.Info("OTLP load's last attempt landed, its reply lost; its requests are stored", "partition", l.tp, "err", loadErr)
	}
	return own
}

// ownPosition reports whether pos of tp is in one of own's ranges.
func ownPosition(own []sink.Range, tp sink.TopicPartition, pos int64) bool {
	for _, r := range own {
		if r.TopicPartition == tp && r.First <= pos && pos <= r.Last {
			return true
		}
	}
	return false
}

// stored is what a load wrote of tp's records, rows and dead letters: not
// the dead letters of derived rows a sink refused (a GenAI operation
// Databend rejected), whose spans are stored too.
func stored(l sink.Loaded, tp sink.TopicPartition) (n int64) {
	for _, r := range l.Ranges {
		if r.TopicPartition == tp {
			n += r.Records + r.DLQ - r.DerivedDLQ
		}
	}
	return n
}

// resume sets the next position from the ledger: past every table's
// positions where a load commits its tables one by one. A failed load may
// have committed some of them (the dead-letter or derived table) and not
// the main one; their rows stay, and positions given out again would be
// fenced out of those tables, losing other requests' rows there.
func (l *Loader) resume(ctx context.Context) error {
	tps := []sink.TopicPartition{l.tp}
	pos, err := l.opt.Sink.Positions(ctx, tps)
	if err != nil {
		return fmt.Errorf("read the position of %s from the ledger: %w", l.tp, err)
	}
	next := pos[l.tp] // 0 when the ledger has none
	if t, ok := l.opt.Sink.(sink.TableByTableCommitter); ok {
		furthest, err := t.FurthestPositions(ctx, tps)
		if err != nil {
			return fmt.Errorf("read the positions of %s from the tables: %w", l.tp, err)
		}
		if f := furthest[l.tp]; f > next {
			run, ok, err := t.Abandon(ctx, l.tp, next, f-1)
			if err != nil {
				return fmt.Errorf("abandon positions %d-%d of %s, which a failed load holds in part: %w", next, f-1, l.tp, err)
			}
			if ok {
				l.opt.Log.Warn("OTLP positions abandoned: a failed load committed some of its tables; its requests were refused for their clients to retry",
					"partition", l.tp, "first", run.First, "last", run.Last)
			} else {
				l.opt.Log.Info("OTLP positions a load held in part found complete: its main table's commit landed meanwhile; none abandoned",
					"partition", l.tp, "first", next, "last", f-1)
			}
			next = f
		}
	}
	l.next = next
	l.stats.given.Store(l.next)
	l.stats.loaded.Store(l.next)
	return nil
}

// Snapshot is the loader's state for the status page: its sequence as a
// partition (positions handed out as the high watermark, so requests not
// yet loaded show as lag), requests taken and rows stored since start.
func (l *Loader) Snapshot() obs.Snapshot {
	var last time.Time
	if ns := l.stats.lastLoad.Load(); ns > 0 {
		last = time.Unix(0, ns)
	}
	return obs.Snapshot{
		Partitions: []obs.PartitionStatus{{Topic: l.tp.Topic, Partition: l.tp.Partition, Worker: -1,
			Next: l.stats.loaded.Load(), Committed: -1, HWM: l.stats.given.Load(), LastLoad: last}},
		Consumed: l.stats.requests.Load(), Loaded: l.stats.rows.Load(), DLQ: l.stats.dlq.Load(),
	}
}

// Totals reports what l stored since it started: after Close, everything.
func (l *Loader) Totals() Totals {
	return Totals{Requests: l.stats.loadedRequests.Load(), Rows: l.stats.rows.Load(), DLQ: l.stats.dlq.Load(), Loads: l.stats.loads.Load()}
}
