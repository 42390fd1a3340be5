package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

func cmdRun(ctx, hard context.Context, args []string) error {
	fs := newFlagSet("run")
	var cf configFlags
	cf.register(fs)
	idle := fs.Duration("exit-when-idle", 0, "exit 0 once everything that arrived is loaded and committed and nothing new came for this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *idle < 0 {
		// Negative, it was taken for 0 (never exit) without a word: a script
		// waiting for the run to end waited for ever.
		return usagef("--exit-when-idle %s: want 0 or more", *idle)
	}
	cfg, err := cf.loadService(true)
	if err != nil {
		return err
	}
	if *idle > 0 && !cfg.Consumes() {
		return usageError{fmt.Errorf("--exit-when-idle needs kafka.topics: receivers alone are never idle (a client may send at any time)")}
	}
	limitMemory(cfg)
	metrics, ready, status := obs.New(), &obs.Readiness{}, newStatus(cfg)
	if cfg.Forwards() {
		stopReceivers, err := startForwarding(ctx, cfg, metrics)
		if err != nil {
			return err
		}
		if !cfg.Consumes() {
			return serveReceiversOnly(ctx, cfg, metrics, status, stopReceivers)
		}
		// Stopped last: they do not depend on the pipeline (a request is
		// answered once Kafka has it), so they take requests while it
		// shuts down.
		defer stopReceivers()
	}
	snk, merger, err := openSink(ctx, cfg, metrics, status)
	if err != nil {
		return err
	}
	defer snk.Close()
	// Warnings and errors logged from here on also show on the status page.
	slog.SetDefault(slog.New(obs.KeepErrors(slog.Default().Handler(), status)))
	sampling, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	go status.SampleEvery(sampling, 5*time.Second)
	if ice, ok := snk.(*iceberg.Sink); ok {
		reportS3Requests(metrics, status)
		// Stopped before the sink closes (deferred after it).
		defer startMaintenance(ctx, cfg, ice)()
	}
	if cfg.Metrics.Listen != "" {
		// The operations are the spans' table's, another signal's than
		// kafka.signal's when traces is among otlp.signals: its sink
		// shares snk's database.
		db, genaiReport := snk.(interface{ DB() *sql.DB })
		genaiCfg := cfg.GenAIConfig()
		genaiReport = genaiReport && genaiCfg != nil
		if genaiReport {
			status.AddLink("GenAI report", "/report")
		}
		srv, err := obs.Listen(cfg.Metrics.Listen, metrics, status, ready.Why, slog.Default())
		if err != nil {
			return err
		}
		if genaiReport {
			srv.Handle("GET /report", reportHandler(db.DB(), genaiCfg))
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	if err := snk.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	targets := []loadTarget{{cfg, snk}}
	if cfg.LoadsReceived() {
		// The other signals' sinks (otlp.signals), closed after what
		// uses them stops (deferred before it).
		var closeTargets func()
		if targets, closeTargets, err = openLoadTargets(ctx, cfg, snk, metrics, status); err != nil {
			return err
		}
		defer closeTargets()
		// The other signals' tables are maintained as the main sink's,
		// each sink by a maintainer (and a lease) of its own; stopped
		// before their sinks close (deferred after them).
		for _, t := range targets[1:] {
			if ice, ok := t.snk.(*iceberg.Sink); ok {
				defer startMaintenance(ctx, t.cfg, ice)()
			}
		}
	}
	if d, ok := snk.(*duckdb.Sink); ok {
		if err := d.MoveLanded(ctx); err != nil {
			return err
		}
		// Reads run beside the loads, on connections of their own
		// (query.DuckDB), for Flight SQL and the commands of the local
		// socket alike; both stop before the sink closes (deferred after
		// it): the reads and commands in progress use it.
		opt := query.DuckDBOptions{Shared: cfg.Query.SharedTables, Routes: d.RoutesTable(),
			MaxConcurrent: cfg.Query.MaxConcurrent, Timeout: cfg.Query.Timeout.D()}
		if wait := cfg.Query.YieldToLoads.D(); wait > 0 {
			// Reads give way to the loads of every sink of the file
			// (query.yield_to_loads).
			opt.Loads, opt.YieldWait = d.Loading(), wait
		}
		reader, err := query.NewDuckDB(ctx, d.DB(), opt)
		if err != nil {
			return err
		}
		stopReads, err := serveReads(cfg, reader)
		if err != nil {
			return err
		}
		defer stopReads()
		stopSocket := serveCommands(ctx, targets, reader, slog.Default())
		defer stopSocket()
	}
	if ice, ok := snk.(*iceberg.Sink); ok && (cfg.Query.FlightSQL != "" || cfg.Query.HTTP != "") {
		// The same reads tracelake serve answers, from the loading
		// process (replicas of serve scale them apart from the loads).
		reader, err := icebergReader(ctx, cfg, ice)
		if err != nil {
			return err
		}
		defer reader.Close()
		stopReads, err := serveReads(cfg, reader)
		if err != nil {
			return err
		}
		defer stopReads()
	}
	ready.SinkReady()
	var genaiMapper *genai.Mapper // one per process: the consumer and the receivers share it
	if cfg.GenAIConfig() != nil {
		if genaiMapper, err = pipeline.GenAIMapper(cfg, slog.Default(), metrics); err != nil {
			return err
		}
	}
	var received directload.Totals // what the receivers loaded (otlp.mode load)
	stopLoading := func() {}
	var loadFatal <-chan error // nil: no receivers loading
	if cfg.LoadsReceived() {
		// Stopped before the sink closes (deferred after it): each
		// request in progress is answered after its load.
		stop, fatal, err := startLoading(ctx, cfg, metrics, status, targets, genaiMapper)
		if err != nil {
			return err
		}
		loadFatal = fatal
		stopLoading = sync.OnceFunc(func() { received = stop() })
		defer stopLoading()
	}
	// finalMerge, with merge.every, merges once more after a run that
	// ended idle, so its models are merged up to everything it loaded.
	finalMerge := func() error { return nil }
	hb, closeHB, err := newMarkSources(cfg, true)
	if err != nil {
		return err
	}
	defer closeHB()
	if every := cfg.Merge.Every.D(); every > 0 && (len(cfg.Merge.Models) > 0 || cfg.DecodesOTLP() || cfg.CapturesChanges()) {
		jobs, err := mergeJobs(cfg, merger, targets, hb)
		if err != nil {
			return err
		}
		merging, stopMerging := context.WithCancel(ctx)
		mergeDone := make(chan struct{})
		stop := sync.OnceFunc(func() { stopMerging(); <-mergeDone })
		defer stop()
		go func() {
			defer close(mergeDone)
			mergeEvery(merging, jobs, every, metrics, status)
		}()
		finalMerge = func() error {
			stop()
			for _, j := range jobs {
				if !mergePass(ctx, j, every, metrics, status) && ctx.Err() == nil {
					return fmt.Errorf("the final merge after the run failed (see the log); the models merge at the next run or tracelake merge")
				}
			}
			return nil
		}
	}
	// A receivers' load that failed for good (sink.ErrFatal) stops the
	// run as a Kafka load's does: exit 1, and the next start resumes from
	// the ledgers (the request was answered 503: its client retries).
	running, stopRunning := context.WithCancel(ctx)
	defer stopRunning()
	loadFailed := make(chan error, 1)
	go func() {
		select {
		case err := <-loadFatal:
			slog.Error("stopping: a load failed in a way no retry in this process can fix; restart tracelake (it resumes from the ledger)", "err", err)
			loadFailed <- err
			stopRunning()
		case <-running.Done():
			loadFailed <- nil
		}
	}()
	finished := make(chan struct{})
	defer close(finished)
	go exitAfterShutdownTimeout(running, finished, cfg.ShutdownTimeout.D())
	stats := &pipeline.Stats{}
	start := time.Now()
	slog.Info("tracelake running", "brokers", cfg.Kafka.Brokers, "topics", cfg.Kafka.Topics, "topic_regex", cfg.Kafka.TopicRegex, "group", cfg.Kafka.Group,
		"workers", cfg.Workers, "mode", cfg.Mode, "format", cfg.Kafka.Format, "signal", cfg.Kafka.Signal, "sink", cfg.Sink.Type, "table", cfg.Sink.Table)
	if cfg.Consumes() {
		err = pipeline.Run(running, hard, cfg, snk, pipeline.RunOptions{ExitWhenIdle: *idle, Stats: stats, Metrics: metrics, Ready: ready, Status: status, GenAI: genaiMapper,
			Beats: hb.beats})
	} else {
		ready.Join() // no group to join
		slog.Info("no kafka.topics: loading what the OTLP receivers take until stopped")
		<-running.Done()
	}
	stopRunning()
	if ferr := <-loadFailed; ferr != nil && err == nil {
		err = ferr
	}
	if err == nil && *idle > 0 && ctx.Err() == nil {
		err = finalMerge()
	}
	stopLoading() // so that the closing line counts the requests in progress too
	logStopped(stats, received, cfg.LoadsReceived(), start)
	return err
}

// logStopped is a run's closing line: what it read from Kafka and what
// the receivers loaded (withReceived: otlp.mode load), in rows, files and
// loads, and how long it ran.
func logStopped(stats *pipeline.Stats, received directload.Totals, withReceived bool, start time.Time) {
	args := []any{"records", stats.Consumed.Load()}
	if withReceived {
		args = append(args, "otlp_requests", received.Requests)
	}
	// Each of the receivers' loads is one staged file.
	args = append(args, "loaded", stats.Loaded.Load()+received.Rows, "dlq", stats.DLQ.Load()+received.DLQ,
		"files", stats.Files.Load()+received.Loads, "loads", stats.Loads.Load()+received.Loads, "elapsed", elapsed(time.Since(start)))
	slog.Info("tracelake stopped", args...)
}

// elapsed is a run's time for its closing line: to a tenth of a second
// under a minute (12.3s), to the second past it (4m5s).
func elapsed(d time.Duration) string {
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// newStatus names what this process runs in the status page's header;
// nothing secret (no DSN, no SASL user).
func newStatus(cfg *config.Config) *obs.Status {
	topics := strings.Join(cfg.Kafka.Topics, ", ")
	if cfg.Kafka.TopicRegex != "" {
		topics = "/" + cfg.Kafka.TopicRegex + "/"
	}
	mode := cfg.Mode
	if cfg.DecodesOTLP() {
		mode = cfg.Kafka.Format + " " + cfg.Kafka.Signal
	}
	fields := [][2]string{
		{"group", cfg.Kafka.Group},
		{"topics", topics},
		{"workers", strconv.Itoa(cfg.Workers)},
		{"mode", mode},
		{"sink", cfg.Sink.Type + " → " + cfg.Sink.Table},
	}
	var receivers []string
	for _, r := range [][2]string{{"http", cfg.OTLP.HTTP}, {"grpc", cfg.OTLP.GRPC}} {
		if r[1] != "" {
			receivers = append(receivers, r[0]+" "+r[1])
		}
	}
	if len(receivers) > 0 {
		fields = append(fields, [2]string{"otlp receivers", strings.Join(receivers, ", ")})
	}
	return obs.NewStatus(append(fields, [2]string{"version", version})...)
}

// exitAfterShutdownTimeout ends the process if the shutdown that starts when
// ctx is canceled has not finished within timeout. Nothing is lost: offsets
// are committed only for loaded data, so what was pending is read again.
func exitAfterShutdownTimeout(ctx context.Context, finished <-chan struct{}, timeout time.Duration) {
	select {
	case <-finished:
		return
	case <-ctx.Done():
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		slog.Error("shutdown_timeout passed: pending data was not loaded and will be read again from Kafka on the next start (nothing is lost)",
			"shutdown_timeout", timeout)
		os.Exit(exitFailed)
	}
}

// limitMemory sets Go's soft heap limit from max_inflight_bytes unless the
// GOMEMLIMIT environment variable set one, and logs the memory settings
// that follow from it.
func limitMemory(cfg *config.Config) {
	goLimit := "GOMEMLIMIT"
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(cfg.GoMemoryLimit())
		goLimit = config.ByteSize(cfg.GoMemoryLimit()).String()
	}
	args := []any{"max_inflight_bytes", cfg.MaxInflightBytes, "kafka_fetch_max_bytes", cfg.FetchBytes(), "go_heap_limit", goLimit}
	if cfg.Sink.Type == config.SinkDuckDB {
		args = append(args, "duckdb_memory_limit", cfg.DuckDBMemoryLimit())
	}
	slog.Info("memory", args...)
}
