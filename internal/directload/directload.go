// Package directload loads the OTLP receivers' requests straight into the
// sink, without Kafka (otlp.mode: load). Each accepted request takes the
// next position of a sequence of this process's own — topic
// "otlp:<signal>", partition otlp.instance — recorded in the sink's ledger
// in the load's transaction as a Kafka offset would be; requests that
// arrive while a load runs share the next one (group commit), and each is
// answered only after the load holding its rows committed. It implements
// otlp.Forwarder.
//
// A load that fails answers its requests with an error (the receivers
// tell clients to retry) and the sequence resumes from the ledger, so a
// load whose outcome was unknown — committed, its reply lost — never has
// its positions reused. A client retrying after a lost answer stores its
// request twice, as with any OTLP backend: the dedup model keeps one copy.
package directload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink"
)

// Topic is the ledger topic of the requests of signal: a name Kafka never
// gives a topic (':' is not allowed there), so it cannot meet a consumed
// topic's positions.
func Topic(signal string) string { return "otlp:" + signal }

// RowDecoder makes a request's rows (pipeline.RowDecoder).
type RowDecoder interface {
	AppendRows(b *sink.Batch, r *kgo.Record) (rows int, err error)
}

// Options configure a Loader.
type Options struct {
	Sink sink.Sink
	// Decoder reads a request (an OTLP export request in protobuf, as
	// the receivers hand it over) into rows.
	Decoder RowDecoder
	// Signal is the only signal loaded: the sink's table holds its rows.
	Signal string
	// Partition tells apart the processes loading the same tables: each
	// needs its own, or their positions collide (a collision is caught at
	// the load and answered with a retry, never stored under another's
	// position).
	Partition int32
	// TenantHeader is the header the decoder reads the tenant from.
	TenantHeader string
	// MaxLoadBytes bounds the request bytes of one load.
	MaxLoadBytes int64
	Log          *slog.Logger
	Metrics      *obs.Metrics // may be nil
}

// Loader is the direct loading of one signal's requests.
type Loader struct {
	opt  Options
	tp   sink.TopicPartition
	reqs chan *request
	// waiting counts the requests handed to Forward and not yet taken
	// by a load.
	waiting atomic.Int64
	stop    context.CancelFunc
	done    chan struct{}

	// Owned by the loop.
	next    int64 // position of the next request; -1: read it from the ledger
	pending []*request
}

type request struct {
	tenant string
	body   []byte
	at     time.Time
	err    chan error
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
// committed, or with the reason they are not.
func (l *Loader) Forward(ctx context.Context, signal, tenant string, body []byte) error {
	if signal != l.opt.Signal {
		return fmt.Errorf("BUG: a %s request for the loader of %s", signal, l.opt.Signal)
	}
	r := &request{tenant: tenant, body: body, at: time.Now(), err: make(chan error, 1)}
	l.waiting.Add(1)
	select {
	case l.reqs <- r:
		l.waiting.Add(-1)
	case <-l.done:
		l.waiting.Add(-1)
		return ErrClosed
	case <-ctx.Done():
		l.waiting.Add(-1)
		return ctx.Err()
	}
	// Once taken, the request is answered by its load, even when the
	// client has gone: a load is not abandoned half-way.
	return <-r.err
}

// Close finishes the load in progress, answers what waits with ErrClosed
// and stops.
func (l *Loader) Close() {
	l.stop()
	<-l.done
}

// loop loads until ctx ends; a load in progress then finishes (its
// context is not ctx).
func (l *Loader) loop(ctx context.Context) {
	defer close(l.done)
	for {
		select {
		case r := <-l.reqs:
			l.pending = append(l.pending, r)
		case <-ctx.Done():
			return
		}
		l.gather()
		l.loadPending(context.WithoutCancel(ctx))
	}
}

// gather takes the requests already waiting, up to MaxLoadBytes: the
// requests that arrived during the previous load share this one.
func (l *Loader) gather() {
	size := l.pendingBytes()
	for size < l.opt.MaxLoadBytes {
		select {
		case r := <-l.reqs:
			l.pending = append(l.pending, r)
			size += int64(len(r.body))
		default:
			return
		}
	}
}

func (l *Loader) pendingBytes() (n int64) {
	for _, r := range l.pending {
		n += int64(len(r.body))
	}
	return n
}

// loadPending loads the pending requests and answers them.
func (l *Loader) loadPending(ctx context.Context) {
	reqs := l.pending
	l.pending = nil
	err := l.load(ctx, reqs)
	if err != nil {
		l.opt.Log.Warn("OTLP requests not loaded; their clients are told to retry", "requests", len(reqs), "err", err)
		if l.opt.Metrics != nil {
			l.opt.Metrics.Retries.WithLabelValues("direct_load").Inc()
		}
	}
	for _, r := range reqs {
		r.err <- err
	}
}

// load writes reqs as one load at the next positions.
func (l *Loader) load(ctx context.Context, reqs []*request) error {
	if l.next < 0 {
		if err := l.resume(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	b, rows := l.batch(reqs)
	f, err := l.opt.Sink.Stage(ctx, b)
	if err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	loaded, err := l.opt.Sink.Load(ctx, []sink.File{f})
	if err != nil {
		// Committed or not, nobody can tell: the ledger will.
		l.opt.Sink.Discard([]sink.File{f})
		l.next = -1
		return fmt.Errorf("load: %w", err)
	}
	if got := stored(loaded, l.tp); got != rows {
		// Rows were fenced: another process wrote these positions (two
		// loaders with one otlp.instance). Nothing of ours is stored
		// under them; resume past them and let the clients retry.
		l.next = -1
		return fmt.Errorf("positions %d-%d of %s were already in the ledger (another process loading with the same otlp.instance?): %d of %d rows stored",
			b.Ranges[0].First, b.Ranges[0].Last, l.tp, got, rows)
	}
	l.next = b.Ranges[0].Last + 1
	if m := l.opt.Metrics; m != nil {
		m.Loads.Inc()
		m.StagedFiles.Inc()
		m.StagedBytes.Add(float64(f.Bytes))
		m.FilesPerLoad.Observe(1)
		m.LoadDuration.Observe(time.Since(start).Seconds())
	}
	return nil
}

// batch decodes reqs into one batch, one position each from l.next, and
// returns it with its row count (table and dead-letter rows).
func (l *Loader) batch(reqs []*request) (*sink.Batch, int64) {
	b := &sink.Batch{ID: sink.NewBatchID()}
	rg := sink.Range{TopicPartition: l.tp, First: l.next, Last: l.next + int64(len(reqs)) - 1}
	for i, r := range reqs {
		rec := &kgo.Record{Topic: l.tp.Topic, Partition: l.tp.Partition, Offset: l.next + int64(i), Value: r.body, Timestamp: r.at,
			Headers: []kgo.RecordHeader{{Key: l.opt.TenantHeader, Value: []byte(r.tenant)}}}
		n, err := l.opt.Decoder.AppendRows(b, rec)
		if err != nil {
			// The receivers decoded it already; kept, with the reason,
			// should the decoder still refuse it.
			start := len(b.DLQ)
			b.DLQ = envelope.AppendDLQRow(b.DLQ, rec, err.Error(), envelope.StageDecode)
			b.MaxLine = max(b.MaxLine, len(b.DLQ)-start)
			rg.DLQ++
			continue
		}
		rg.Records += int64(n)
	}
	b.Ranges = []sink.Range{rg}
	return b, rg.Records + rg.DLQ
}

// stored is what a load wrote of tp, rows and dead letters.
func stored(l sink.Loaded, tp sink.TopicPartition) (n int64) {
	for _, r := range l.Ranges {
		if r.TopicPartition == tp {
			n += r.Records + r.DLQ
		}
	}
	return n
}

// resume sets the next position from the ledger.
func (l *Loader) resume(ctx context.Context) error {
	pos, err := l.opt.Sink.Positions(ctx, []sink.TopicPartition{l.tp})
	if err != nil {
		return fmt.Errorf("read the position of %s from the ledger: %w", l.tp, err)
	}
	l.next = pos[l.tp] // 0 when the ledger has none
	return nil
}
