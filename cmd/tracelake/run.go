package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/pipeline"
)

func cmdRun(ctx, hard context.Context, args []string) error {
	fs := newFlagSet("run")
	var cf configFlags
	cf.register(fs)
	idle := fs.Duration("exit-when-idle", 0, "exit 0 once everything that arrived is loaded and committed and nothing new came for this long")
	cfg, snk, err := cf.open(fs, args, true)
	if err != nil {
		return err
	}
	defer snk.Close()
	metrics, ready := obs.New(), &obs.Readiness{}
	if cfg.Metrics.Listen != "" {
		srv, err := obs.Listen(cfg.Metrics.Listen, metrics, ready.Why, slog.Default())
		if err != nil {
			return err
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
	ready.SinkReady()
	finished := make(chan struct{})
	defer close(finished)
	go exitAfterShutdownTimeout(ctx, finished, cfg.ShutdownTimeout.D())
	stats := &pipeline.Stats{}
	start := time.Now()
	slog.Info("tracelake running", "brokers", cfg.Kafka.Brokers, "topics", cfg.Kafka.Topics, "topic_regex", cfg.Kafka.TopicRegex, "group", cfg.Kafka.Group,
		"workers", cfg.Workers, "mode", cfg.Mode, "sink", cfg.Sink.Type, "table", cfg.Sink.Table)
	err = pipeline.Run(ctx, hard, cfg, snk, pipeline.RunOptions{ExitWhenIdle: *idle, Stats: stats, Metrics: metrics, Ready: ready})
	slog.Info("tracelake stopped", "records", stats.Consumed.Load(), "loaded", stats.Loaded.Load(), "dlq", stats.DLQ.Load(),
		"files", stats.Files.Load(), "loads", stats.Loads.Load(), "seconds", time.Since(start).Round(time.Millisecond).Seconds())
	return err
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
