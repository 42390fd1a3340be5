package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
)

// RunOptions are the parts of a run that are not in the config file.
type RunOptions struct {
	// ExitWhenIdle, when > 0, ends the run once every record that arrived is
	// loaded and committed and nothing new came for this long.
	ExitWhenIdle time.Duration
	// Beats, with kafka.format debezium, canal or maxwell, keeps the
	// heartbeats among the changes read (cdc.heartbeats), for the done
	// marks.
	Beats *cdc.Beats
	// RetryBase is the first retry delay (default 1s; tests shorten it).
	RetryBase time.Duration
	// UnknownTopicWait is how long a topic's fetches may be answered
	// UNKNOWN_TOPIC_ID (deleted under the run) before it stops (default
	// 1 minute; tests shorten it).
	UnknownTopicWait time.Duration
	Log              *slog.Logger
	Stats            *Stats
	Metrics          *obs.Metrics   // nil: a private registry nobody serves
	Ready            *obs.Readiness // nil: not reported
	Budget           *Budget        // nil: max_inflight_bytes of the config
	Status           *obs.Status    // nil: no status page
	// GenAI maps spans to genai_operations when the config asks for them;
	// nil: Run makes its own (registering its counters on Metrics).
	GenAI *genai.Mapper
}

// Run starts cfg.Workers workers on snk and runs them until ctx is canceled
// (or the run is idle, see RunOptions). A second cancellation, of hard,
// abandons loads in progress.
func Run(ctx, hard context.Context, cfg *config.Config, snk sink.Sink, ro RunOptions) error {
	if ro.Stats == nil {
		ro.Stats = &Stats{}
	}
	if ro.Log == nil {
		ro.Log = slog.Default()
	}
	if ro.Metrics == nil {
		ro.Metrics = obs.New()
	}
	if ro.Ready == nil {
		ro.Ready = &obs.Readiness{}
	}
	if ro.Budget == nil {
		max := int64(cfg.MaxInflightBytes)
		if h, ok := snk.(sink.MemoryHolder); ok {
			// A quarter for the rows the sink holds after staging (the
			// Iceberg sink's open writers), the rest for the batches.
			h.HoldUpTo(max/4, cfg.Workers)
			max -= max / 4
		}
		ro.Budget = NewBudget(max)
	}
	kopts, err := kafka.ConsumerOptions(cfg.Kafka)
	if err != nil {
		return err
	}
	var startAt map[sink.TopicPartition]int64
	if cfg.Kafka.StartOffset == "latest" {
		if startAt, err = latestStarts(ctx, cfg, snk, ro.Log); err != nil {
			return err
		}
	}
	rawValue := envelope.ValueText
	switch {
	case cfg.Sink.Type == config.SinkDatabend:
		rawValue = envelope.ValueJSON // COPY reads JSON, not JSON in a string
	case cfg.Sink.Type == config.SinkDuckDB && cfg.Mode != config.ModeTransform:
		rawValue = envelope.ValueVerbatim // raw rows read as delimited lines
	}
	var decoder RowDecoder
	if cfg.CapturesChanges() {
		router, ok := snk.(sink.Router)
		if !ok {
			return fmt.Errorf("kafka.format %s: sink %s does not load changelog tables", cfg.Kafka.Format, cfg.Sink.Type)
		}
		cd, err := NewChangelogDecoder(cfg.CDCOptions(), router)
		if err != nil {
			return fmt.Errorf("kafka.format %s: %w", cfg.Kafka.Format, err)
		}
		cd.Beats = ro.Beats
		decoder = cd
	}
	if cfg.DecodesOTLP() {
		if ro.GenAI == nil && cfg.GenAIOperations() {
			if ro.GenAI, err = GenAIMapper(cfg, ro.Log, ro.Metrics); err != nil {
				return err
			}
		}
		if decoder, err = OTLPDecoder(cfg, cfg.Kafka.Format, cfg.Tenancy.KafkaHeader, ro.GenAI); err != nil {
			return err
		}
	}
	opt := Options{
		Transform:    cfg.Mode == config.ModeTransform,
		Decoder:      decoder,
		RawValue:     rawValue,
		MaxRecords:   cfg.Batch.MaxRecords,
		MaxBytes:     int64(cfg.Batch.MaxBytes),
		MaxInterval:  cfg.Batch.MaxInterval.D(),
		LoadMaxFiles: cfg.Load.MaxFiles,
		LoadMaxBytes: int64(cfg.LoadBytes()),
		LoadInterval: cfg.LoadInterval(),
		// Iceberg: the workers load at the same moments, so that their
		// loads share a commit; at a moment of this process's own, so
		// that processes do not all commit at once and conflict.
		AlignLoads:       cfg.Sink.Type == config.SinkIceberg,
		LoadPhase:        time.Duration(rand.Int64N(int64(max(cfg.LoadInterval(), 1)))),
		RetryBase:        ro.RetryBase,
		UnknownTopicWait: ro.UnknownTopicWait,
		RetryMaxDelay:    cfg.Retry.MaxDelay.D(),
		KafkaOpts:        kopts,
		FetchBytes:       int64(cfg.FetchBytes()),
		StartAt:          startAt,
		Latest:           cfg.Kafka.StartOffset == "latest",
		Sink:             snk,
		Log:              ro.Log,
		Stats:            ro.Stats,
		Metrics:          ro.Metrics,
		Ready:            ro.Ready,
		Budget:           ro.Budget,
		Workers:          cfg.Workers,
		RevokeWait:       cfg.Kafka.RebalanceTimeout.D() / 2,
		CommitTimeout:    cfg.Kafka.CommitTimeout.D(),
		Start:            newStartGate(cfg.Workers),
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// A fatal error stops every worker: what is pending is dropped and
	// read again after a restart. The first one is what Run returns (every
	// caller runs inside a worker's Run, so wg.Wait orders it before the
	// read below).
	var fatalOnce sync.Once
	var fatal error
	opt.Fatal = func(err error) {
		fatalOnce.Do(func() { fatal = err })
		stop()
	}
	workers := make([]*Worker, cfg.Workers)
	for i := range workers {
		w, err := NewWorker(i, opt)
		if err != nil {
			for _, set := range workers[:i] {
				set.leave() // at once: nothing of it was read
			}
			return err
		}
		workers[i] = w
	}

	if ro.Status != nil {
		ro.Status.AddSource(func() obs.Snapshot {
			snap := obs.Snapshot{
				Consumed: ro.Stats.Consumed.Load(), Loaded: ro.Stats.Loaded.Load(), DLQ: ro.Stats.DLQ.Load(),
				InflightBytes: ro.Stats.Inflight.Load(), InflightBudget: ro.Budget.Max(),
			}
			for _, w := range workers {
				snap.Partitions = w.partitions(snap.Partitions)
			}
			return snap
		})
	}

	var wg sync.WaitGroup
	errs := make([]error, len(workers))
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Run(runCtx, hard)
			if errs[i] != nil {
				stop() // one worker failing at shutdown ends the run
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		warnWhileNotJoined(runCtx, cfg, ro.Ready, joinWarnEvery, ro.Log)
	}()
	if ro.ExitWhenIdle > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if waitIdle(runCtx, cfg, workers, ro.ExitWhenIdle, ro.Log) {
				ro.Log.Info("idle: everything that arrived is loaded and committed", "idle_for", ro.ExitWhenIdle)
				stop()
			}
		}()
	}
	wg.Wait()
	if fatal != nil && !slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, fatal) }) {
		errs = append(errs, fatal)
	}
	if f, ok := snk.(sink.Finisher); ok {
		if err := f.Finish(hard); err != nil {
			ro.Log.Error("the sink could not finish the work it defers past its loads; it does it again at its next load or merge round", "err", err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pending data was not loaded and will be read again on the next start: %w", err)
	}
	return nil
}

// joinWarnEvery is how often a process that has not joined its group says
// so, with the result of a broker check.
const joinWarnEvery = 10 * time.Second

// warnWhileNotJoined logs a warning every interval until a worker joins the
// group. franz-go retries unreachable brokers and failed logins quietly
// (a broker that drops a wrong SASL login shows only as EOF at info level),
// so without this a wrong password looks like a process doing nothing.
func warnWhileNotJoined(ctx context.Context, cfg *config.Config, ready *obs.Readiness, interval time.Duration, log *slog.Logger) {
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if ready.Joined() {
			return
		}
		check := "brokers answer"
		if err := ping(ctx, cfg); err != nil {
			check = err.Error()
		}
		log.Warn("not joined to the consumer group yet", "group", cfg.Kafka.Group,
			"waited", time.Since(start).Round(time.Second), "broker_check", check)
	}
}

func ping(ctx context.Context, cfg *config.Config) error {
	admin, err := kafka.NewAdmin(cfg.Kafka)
	if err != nil {
		return err
	}
	defer admin.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return admin.Ping(pctx)
}

// waitIdle returns true once no worker has records in flight, none read a
// record for idle (each one's last poll came back empty), and the group's committed offsets reach the end of every
// partition; false if ctx ends first.
func waitIdle(ctx context.Context, cfg *config.Config, workers []*Worker, idle time.Duration, log *slog.Logger) bool {
	admin, err := kafka.NewAdmin(cfg.Kafka)
	if err != nil {
		log.Error("exit-when-idle: cannot check offsets", "err", err)
		return false
	}
	defer admin.Close()
	start := time.Now()
	tick := time.NewTicker(min(idle/4+10*time.Millisecond, 500*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
		last := start
		busy, drained := false, true
		for _, w := range workers {
			if w.inflight.Load() > 0 {
				busy = true
			}
			// A worker blocked behind slow loads reads nothing either,
			// but it is not idle: closing its batches early would only
			// make more, smaller files.
			drained = drained && w.drained.Load()
			if t := time.Unix(0, w.lastRecord.Load()); t.After(last) {
				last = t
			}
		}
		if time.Since(last) < idle || !drained {
			continue
		}
		if busy {
			// Nothing new came for the idle period: close open batches now
			// rather than waiting out batch.max_interval.
			for _, w := range workers {
				w.flushNow.Store(true)
			}
			continue
		}
		if caughtUp(ctx, admin, cfg) {
			return true
		}
	}
}

func caughtUp(ctx context.Context, admin *kafka.Admin, cfg *config.Config) bool {
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	marks, err := admin.ConsumedWatermarks(qctx, cfg.Kafka)
	if err != nil {
		return false
	}
	committed, err := admin.Committed(qctx, cfg.Kafka.Group)
	if err != nil {
		return false
	}
	for tp, m := range marks {
		if m.High > m.Low && committed[tp] < m.High {
			return false
		}
		if c, ok := committed[tp]; ok && c > m.High {
			// Committed past the log's end: the topic was recreated or its
			// log truncated. Not idle: the worker that reads it stops the
			// run with the reason.
			return false
		}
	}
	return true
}

// latestStarts are the ends of the partitions that exist now, in topics
// the group has not started on: with start_offset latest, where a
// partition with neither a committed offset nor a ledger position
// starts. Every other partition is absent and starts at its beginning
// (Worker.pinnedStart): one created later, and one of a topic the group
// started on before (some partition of it has a committed offset or a
// ledger position) that has neither. A run commits the start of every
// partition it is given at assignment, so such a partition was added to
// the topic after the group started on it (or its start commit was
// lost): every record of it came after the start. Starting it at its end
// skipped what was produced to it before a run saw it, between two runs
// or before a running member's metadata refresh.
func latestStarts(ctx context.Context, cfg *config.Config, snk sink.Sink, log *slog.Logger) (map[sink.TopicPartition]int64, error) {
	admin, err := kafka.NewAdmin(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	// A partition missing from the ends is taken as created after the
	// start and read from 0 (Worker.pinnedStart), so a listing that
	// failed for a partition is retried, not left out: a transient answer
	// (a broker with stale metadata) must not load a whole old partition.
	var marks map[sink.TopicPartition]kafka.Watermarks
	err = retryAtStart(ctx, kerr.IsRetriable, nil, func(ctx context.Context) (err error) {
		marks, err = admin.ConsumedWatermarks(ctx, cfg.Kafka)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start_offset latest: list the partitions' end offsets: %w", err)
	}
	// Which topics the group started on: read again while the group's
	// offsets or the sink's positions cannot be read (a sink down for a
	// moment), as the worker reads the positions again at each
	// assignment; then the run refuses to start, rather than take a
	// started topic for a new one and skip what was produced to a
	// partition added since.
	var started map[string]bool
	var former map[sink.TopicPartition]int64
	notFatal := func(err error) bool { return !errors.Is(err, sink.ErrFatal) }
	warn := func(err error, delay time.Duration) {
		log.Warn("start_offset latest: which topics the group started on could not be read; retrying", "err", err, "in", delay)
	}
	err = retryAtStart(ctx, notFatal, warn, func(ctx context.Context) (err error) {
		started, former, err = startedTopics(ctx, cfg, admin, snk, marks)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("start_offset latest: %w", err)
	}
	ends := make(map[sink.TopicPartition]int64, len(marks))
	for tp, m := range marks {
		if at, ok := former[tp]; ok {
			// Where the release before read it from, in the group
			// this loader ran in then (config.FormerGroup): its end
			// skipped what came while the loader was upgraded.
			log.Info("start_offset latest: no committed offset or ledger position in this group; starting at the committed offset of the group it ran in before",
				"topic", tp.Topic, "partition", tp.Partition, "group", cfg.FormerGroup(), "offset", min(at, m.High))
			ends[tp] = min(at, m.High)
		} else if !started[tp.Topic] {
			ends[tp] = m.High
		}
	}
	return ends, nil
}

// retryAtStart calls try until it succeeds, fails with an error retry
// refuses, or 30 s have passed (each try bounded by them), waiting
// 100 ms, then twice as long up to 2 s, between tries; onRetry, if not
// nil, hears of each retry.
func retryAtStart(ctx context.Context, retry func(error) bool, onRetry func(error, time.Duration), try func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		err := try(ctx)
		if err == nil || !retry(err) {
			return err
		}
		if onRetry != nil {
			onRetry(err, delay)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("retried for 30s: %w", err)
		case <-time.After(delay):
		}
	}
}

// startedTopics are the topics of marks with a partition that has a
// committed offset in the group or a position in the sink's ledger.
// With topic_regex, every topic of marks once the group started on any
// matching topic: the group subscribes to the pattern, so a matching
// topic it has no position in was created after it started (between two
// runs, or before a running member's metadata refresh saw it), and every
// record of it came after the group's start.
//
// A loader in its signal's default group of this release
// (config.FormerGroup) takes the offsets committed in the group it ran
// in before as its own in a topic its group and ledger have not started
// on: former holds them, where those partitions start.
func startedTopics(ctx context.Context, cfg *config.Config, admin *kafka.Admin, snk sink.Sink, marks map[sink.TopicPartition]kafka.Watermarks) (started map[string]bool, former map[sink.TopicPartition]int64, err error) {
	committed, err := admin.Committed(ctx, cfg.Kafka.Group)
	if err != nil {
		return nil, nil, err
	}
	var before map[sink.TopicPartition]int64
	if g := cfg.FormerGroup(); g != "" {
		if before, err = admin.Committed(ctx, g); err != nil {
			return nil, nil, fmt.Errorf("the offsets of group %s, where loaders of %s ran before: %w", g, cfg.Kafka.Signal, err)
		}
	}
	parts := make([]sink.TopicPartition, 0, len(marks))
	for tp := range marks {
		parts = append(parts, tp)
	}
	positions, err := snk.Positions(ctx, parts)
	if err != nil {
		return nil, nil, fmt.Errorf("read the sink's positions: %w", err)
	}
	started = make(map[string]bool)
	for _, tp := range parts {
		_, inLedger := positions[tp]
		if _, ok := committed[tp]; ok || inLedger {
			started[tp.Topic] = true
		}
	}
	// A topic this group and ledger have not started on, that the
	// former group did: its partitions start as they did there. Not one
	// the ledger has started on: the former group's offsets may be
	// another signal's loader's, which skipped past this signal's
	// requests (one group for all, before), and a partition this loader
	// has no position in is read from its beginning.
	former = make(map[sink.TopicPartition]int64)
	for _, tp := range parts {
		if at, ok := before[tp]; ok && at >= 0 && !started[tp.Topic] {
			former[tp] = at
		}
	}
	for tp := range former {
		started[tp.Topic] = true
	}
	if cfg.Kafka.TopicRegex == "" {
		return started, former, nil
	}
	re, err := regexp.Compile(cfg.Kafka.TopicRegex)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka.topic_regex: %w", err)
	}
	// A committed offset in a matching topic that is gone (deleted since)
	// says so too.
	groupStarted := len(started) > 0
	for tp := range committed {
		groupStarted = groupStarted || re.MatchString(tp.Topic)
	}
	if groupStarted {
		for tp := range marks {
			started[tp.Topic] = true
		}
	}
	return started, former, nil
}

// OTLPDecoder returns the decoder of cfg's signal in encoding (otlp_proto
// or otlp_json) reading the tenant from tenantHeader, writing
// genai_operations with m unless m is nil.
func OTLPDecoder(cfg *config.Config, encoding, tenantHeader string, m *genai.Mapper) (*otel.Decoder, error) {
	d, err := otel.NewDecoder(cfg.Kafka.Signal, encoding, otel.Tenancy{Header: tenantHeader, Default: cfg.Tenancy.Default})
	if err != nil {
		return nil, err
	}
	if m != nil {
		d.WithGenAI(m)
	}
	// The rows of one message never outgrow the process's memory budget:
	// past it, the message is dead-lettered (otel.Decoder.WithMaxRowBytes).
	d.WithMaxRowBytes(int64(cfg.MaxInflightBytes))
	return d, nil
}

// GenAIMapper reads the prices (genai.prices_file, else the embedded
// export) and returns the mapper of spans to genai_operations, its
// counters registered on metrics. One per process: the decoders of the
// Kafka topics and of the receivers share it.
func GenAIMapper(cfg *config.Config, log *slog.Logger, metrics *obs.Metrics) (*genai.Mapper, error) {
	table, err := prices.Load(cfg.GenAI.PricesFile)
	if err != nil {
		return nil, fmt.Errorf("genai.prices_file %s: %w", cfg.GenAI.PricesFile, err)
	}
	log.Info("genai_operations priced", "prices", table.Source, "exported", table.Exported)
	m := genai.NewMapper(table, cfg.GenAI.CaptureContent)
	metrics.WatchGenAI(m.Stats())
	return m, nil
}
