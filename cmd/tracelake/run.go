package main

import (
	"context"
	"fmt"
	"log/slog"
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
	stats := &pipeline.Stats{}
	start := time.Now()
	slog.Info("tracelake running", "brokers", cfg.Kafka.Brokers, "topics", cfg.Kafka.Topics, "group", cfg.Kafka.Group,
		"workers", cfg.Workers, "mode", cfg.Mode, "sink", cfg.Sink.Type, "table", cfg.Sink.Table)
	err = pipeline.Run(ctx, hard, cfg, snk, pipeline.RunOptions{ExitWhenIdle: *idle, Stats: stats, Metrics: metrics, Ready: ready})
	slog.Info("tracelake stopped", "records", stats.Consumed.Load(), "loaded", stats.Loaded.Load(), "dlq", stats.DLQ.Load(),
		"files", stats.Files.Load(), "loads", stats.Loads.Load(), "seconds", time.Since(start).Round(time.Millisecond).Seconds())
	return err
}
