package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/examples"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// demoQueries show what the raw table answers without any modelling.
var demoQueries = []struct{ title, sql string }{
	{"Spans and tokens by model", `SELECT raw_data->>'model' AS model, count(*) AS spans,
       sum((raw_data->'usage'->>'total_tokens')::BIGINT) AS tokens,
       round(avg((raw_data->>'latency_ms')::INT)) AS avg_latency_ms
FROM trace_raw GROUP BY ALL ORDER BY tokens DESC`},
	{"Most used tools", `SELECT tc->>'name' AS tool, count(*) AS calls,
       round(100.0 * avg(CASE WHEN (tc->>'ok')::BOOLEAN THEN 1 ELSE 0 END), 1) AS ok_pct
FROM (SELECT unnest(from_json(raw_data->'tool_calls', '["JSON"]')) AS tc FROM trace_raw)
GROUP BY ALL ORDER BY calls DESC LIMIT 5`},
	{"Slowest traces", `SELECT raw_data->>'trace_id' AS trace_id, count(*) AS spans,
       sum((raw_data->>'latency_ms')::INT) AS total_ms
FROM trace_raw GROUP BY ALL ORDER BY total_ms DESC LIMIT 3`},
	{"Where each row came from", `SELECT kpartition, min(koffset) AS first, max(koffset) AS last, count(*) AS rows
FROM trace_raw GROUP BY ALL ORDER BY kpartition`},
}

// demoModels merges the raw traces into the example models of
// examples/agent-traces.yaml and shows a sample of each.
func demoModels(ctx context.Context, db *sql.DB) error {
	ex, err := config.FromYAML(examples.AgentTraces)
	if err != nil {
		return fmt.Errorf("BUG: examples/agent-traces.yaml: %w", err)
	}
	fmt.Println("\nModels (examples/agent-traces.yaml): tracelake merge")
	mg := merge.NewMerger(db, slog.New(slog.DiscardHandler))
	for _, m := range ex.Models() {
		res, err := mg.Merge(ctx, m)
		if err != nil {
			return err
		}
		fmt.Println(" ", res)
		fmt.Printf("\nreconcile --model %s (the target against a rebuild from the raw table):\n", m.Name)
		rep, err := reconcileModel(ctx, mg, m, 10)
		if err != nil {
			return err
		}
		rep.WriteText(os.Stdout)
		if !rep.Equal {
			return failedCheck{}
		}
	}
	if _, err := db.ExecContext(ctx, examples.DailyTokenUsage); err != nil {
		return fmt.Errorf("create daily_token_usage: %w", err)
	}
	for _, q := range []struct{ title, sql string }{
		{"One row per span", `SELECT trace_id, span_id, kind, model, latency_ms, total_tokens, cost_usd, status FROM trace_spans ORDER BY start_time LIMIT 5`},
		{"Daily token usage by model (a view over trace_spans)", `SELECT * FROM daily_token_usage ORDER BY day, total_tokens DESC LIMIT 10`},
	} {
		fmt.Printf("\n-- %s\n%s;\n", q.title, q.sql)
		if err := printQuery(ctx, os.Stdout, db, q.sql); err != nil {
			return err
		}
	}
	return nil
}

func cmdDemo(ctx, hard context.Context, args []string) error {
	fs := newFlagSet("demo")
	n := fs.Int("messages", 100000, "agent-trace spans to produce, one Kafka message each (about 8 to a trace); with --otlp, agent traces (about 5 spans each)")
	path := fs.String("duckdb", "./tracelake-demo.duckdb", "DuckDB file to write (replaced if it exists)")
	withOTLP := fs.Bool("otlp", false, "send the agent traces as OpenTelemetry spans, with their logs and metrics, through the OTLP/HTTP receiver into otel_spans, otel_logs and otel_metrics")
	serve := fs.String("serve", "", "with --otlp: after the demo, answer the Grafana APIs (Tempo, Loki, Prometheus) on this host:port until interrupted")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDemoServe(*serve, *withOTLP); err != nil {
		return err
	}
	if *withOTLP {
		return demoOTLP(ctx, hard, *n, *path, *serve)
	}
	const topic, partitions = "llm-traces", 4

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		return fmt.Errorf("start embedded Kafka: %w", err)
	}
	defer cluster.Close()
	fmt.Printf("embedded Kafka on %v, topic %s with %d partitions\n", cluster.ListenAddrs(), topic, partitions)

	// The demo database belongs to this embedded cluster, whose offsets start
	// at 0 each time: an old ledger would make tracelake skip them.
	for _, p := range []string{*path, *path + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old demo database: %w", err)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	start := time.Now()
	err = tracegen.Produce(ctx, cl, topic, *n, 1, progressFunc(*n, "producing traces"))
	cl.Close()
	if err != nil {
		return err
	}
	fmt.Printf("produced %d agent-trace spans (one message each) in %.1fs\n", *n, time.Since(start).Seconds())

	cfg := config.Default()
	cfg.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Kafka.Topics = []string{topic}
	cfg.Kafka.Group = "tracelake-demo"
	cfg.Workers = 2
	cfg.Batch.MaxInterval = config.Duration(time.Second)
	cfg.Load.MaxInterval = config.Duration(time.Second)
	cfg.Load.MaxFiles = 16
	cfg.Sink.DuckDB.Path = *path
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("BUG: demo config invalid: %w", err)
	}
	snk, err := openDuckDBBesidePipeline(cfg)
	if err != nil {
		return err
	}
	defer snk.Close()
	if err := snk.Prepare(ctx); err != nil {
		return err
	}

	stats := &pipeline.Stats{}
	start = time.Now()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	idle := 500 * time.Millisecond
	if err := pipeline.Run(ctx, hard, cfg, snk, pipeline.RunOptions{ExitWhenIdle: idle, Stats: stats, Log: quiet}); err != nil {
		return err
	}
	secs := time.Since(start).Seconds() - idle.Seconds()
	rep, err := verifyDuckDB(ctx, cfg, snk, verify.SQLQuerier{DB: snk.DB()})
	if err != nil {
		return err
	}
	rows, dlq := rep.Totals()
	fmt.Printf("\ningested %d records (%d raw rows, %d dead-letter) in %d files and %d loads, %.1fs, %.0f records/s\n",
		stats.Consumed.Load(), rows, dlq, stats.Files.Load(), stats.Loads.Load(), secs, float64(stats.Consumed.Load())/secs)
	fmt.Println("\nverify:")
	rep.WriteText(os.Stdout)
	if !rep.OK {
		return failedCheck{}
	}
	for _, q := range demoQueries {
		fmt.Printf("\n-- %s\n%s;\n", q.title, q.sql)
		if err := printQuery(ctx, os.Stdout, snk.DB(), q.sql); err != nil {
			return err
		}
	}
	if err := demoModels(ctx, snk.DB()); err != nil {
		return err
	}
	fmt.Printf("\nThe data is in %s. Try:\n  tracelake sql --duckdb %s \"SELECT raw_data->>'model', count(*) FROM trace_raw GROUP BY 1\"\n", *path, *path)
	return nil
}

// checkDemoServe refuses a --serve the demo would not serve on, before the
// demo runs (minutes, with the default --messages): the Grafana APIs read
// the OTLP demo's tables, so it needs --otlp, and an address it can listen
// on, host:port.
func checkDemoServe(serve string, withOTLP bool) error {
	if serve == "" {
		return nil
	}
	if !withOTLP {
		return usagef("demo: --serve answers the Grafana APIs over the OTLP demo's tables: give --otlp too")
	}
	if _, _, err := net.SplitHostPort(serve); err != nil {
		return usagef("demo: --serve %q: want host:port, such as 127.0.0.1:3200: %v", serve, err)
	}
	return nil
}
