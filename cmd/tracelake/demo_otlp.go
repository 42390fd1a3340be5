package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// demoOTLPQueries show what otel_spans answers about agents.
var demoOTLPQueries = []struct{ title, sql string }{
	{"GenAI operations (genai_operations, written in the load of their spans): calls, tokens, latency", `SELECT operation,
       coalesce(response_model, '') AS model, count(*) AS calls, sum(input_tokens) AS input_tokens,
       sum(cache_read_tokens) AS cache_read, sum(output_tokens) AS output_tokens, round(avg(duration_ms)) AS avg_ms,
       count(*) FILTER (WHERE status = 'error') AS errors
FROM genai_operations GROUP BY ALL ORDER BY calls DESC`},
	{"Cost per model, priced from genai-prices at each call's time", `SELECT provider, response_model AS model, price_id, price_match,
       count(*) AS calls, sum(total_tokens) AS tokens, sum(total_cost_usd) AS cost_usd
FROM genai_operations WHERE operation = 'chat' GROUP BY ALL ORDER BY cost_usd DESC`},
	{"Tools: calls and errors", `SELECT tool_name AS tool, count(*) AS calls, count(*) FILTER (WHERE status = 'error') AS errors,
       round(quantile_cont(duration_ms, 0.5)) AS p50_ms
FROM genai_operations WHERE operation = 'execute_tool' GROUP BY ALL ORDER BY calls DESC`},
	{"Slowest agent runs, with their children", `SELECT r.trace_id, r.name, round(r.duration_ns / 1e6) AS ms, count(c.span_id) AS children,
       sum((c.span_attributes->'$."gen_ai.usage.output_tokens"')::BIGINT) AS output_tokens
FROM otel_spans_dedup r LEFT JOIN otel_spans_dedup c ON c.trace_id = r.trace_id AND c.parent_span_id = r.span_id
WHERE r.parent_span_id IS NULL GROUP BY ALL ORDER BY ms DESC LIMIT 3`},
	{"Where each span came from", `SELECT tenant_id, ktopic, kpartition, count(DISTINCT koffset) AS requests, count(*) AS spans
FROM otel_spans GROUP BY ALL ORDER BY kpartition`},
}

// demoOTLP sends n agent traces, with the log records and metrics their
// agent writes, through the OTLP/HTTP receiver (protobuf, gzip, 50
// traces per request, as an SDK's batch exporter does) into an embedded
// Kafka topic per signal, loads each into its table of one DuckDB file
// (otel_spans, otel_logs, otel_metrics), verifies them, deduplicates the
// spans and shows them with SQL. With serve, it then answers the Grafana
// APIs over the file until interrupted.
func demoOTLP(ctx, hard context.Context, n int, path, serve string) error {
	const partitions, perRequest = 4, 50
	topics := map[string]string{otlp.Traces: "otlp_spans", otlp.Logs: "otlp_logs", otlp.Metrics: "otlp_metrics"}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, slices.Sorted(maps.Values(topics))...))
	if err != nil {
		return fmt.Errorf("start embedded Kafka: %w", err)
	}
	defer cluster.Close()
	for _, p := range []string{path, path + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old demo database: %w", err)
		}
	}
	cfgs := map[string]*config.Config{}
	for _, sig := range []string{config.SignalTraces, config.SignalLogs, config.SignalMetrics} {
		cfg := config.Default()
		cfg.Kafka.Brokers = cluster.ListenAddrs()
		cfg.Kafka.Topics = []string{topics[sig]}
		cfg.Kafka.Group = "tracelake-demo-" + sig
		cfg.Kafka.Format = config.FormatOTLPProto
		cfg.Kafka.Signal = sig
		cfg.Sink.Table = otel.TableOf(sig).Name
		cfg.Batch.MaxInterval = config.Duration(time.Second)
		cfg.Load.MaxInterval = config.Duration(time.Second)
		cfg.Sink.DuckDB.Path = path
		if sig != config.SignalTraces { // a stage directory per sink of the file
			cfg.Sink.DuckDB.StageDir = path + "." + sig + ".stage"
		}
		cfg.OTLP.MaxBodyBytes = 1 << 20 // what the embedded topic takes (Kafka's default max.message.bytes)
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("BUG: demo config invalid: %w", err)
		}
		cfgs[sig] = cfg
	}
	cfg := cfgs[config.SignalTraces]

	kopts := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fwd, err := otlp.NewKafkaForwarder(ctx, kopts, topics, cfg.Tenancy.KafkaHeader, int64(cfg.OTLP.MaxBodyBytes), int64(cfg.MaxInflightBytes), quiet)
	if err != nil {
		return err
	}
	defer fwd.Close()
	rcv, err := otlp.Start(otlp.Options{HTTP: "127.0.0.1:0", MaxBodyBytes: int64(cfg.OTLP.MaxBodyBytes),
		MaxInflightBytes: int64(cfg.MaxInflightBytes), DefaultTenant: cfg.Tenancy.Default, Forward: fwd, Log: quiet})
	if err != nil {
		return err
	}
	defer rcv.Shutdown(context.Background())
	base := "http://" + rcv.Addr["http"]
	fmt.Printf("embedded Kafka on %v (topics %s, %s, %s; %d partitions each); OTLP/HTTP receiver at %s\n",
		cluster.ListenAddrs(), topics[otlp.Traces], topics[otlp.Logs], topics[otlp.Metrics], partitions, base)

	start := time.Now()
	sent, err := sendAgentTelemetry(ctx, base, n, perRequest, progressFunc(n, "sending traces, logs and metrics over OTLP/HTTP"))
	if err != nil {
		return err
	}
	fmt.Printf("sent %d agent traces (%d spans) in %d requests, with %d log records and %d metric points, each answered after Kafka acknowledged it, %.1fs\n",
		n, sent.spans, (n+perRequest-1)/perRequest, sent.logs, sent.points, time.Since(start).Seconds())

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
	idle := 500 * time.Millisecond
	if err := pipeline.Run(ctx, hard, cfg, snk, pipeline.RunOptions{ExitWhenIdle: idle, Stats: stats, Log: quiet}); err != nil {
		return err
	}
	secs := time.Since(start).Seconds() - idle.Seconds()
	dd := merge.Dedup{Table: &otel.Spans, Name: otel.Spans.Name}
	mg := merge.NewMerger(snk.DB(), quiet)
	res, err := mg.Dedup(ctx, dd)
	if err != nil {
		return err
	}
	rep, err := verifyDuckDB(ctx, cfg, snk, verify.SQLQuerier{DB: snk.DB()})
	if err != nil {
		return err
	}
	if rep.Copies, err = copies(ctx, mg, dd); err != nil {
		return err
	}
	if err := rep.CheckDerived(ctx, verify.SQLQuerier{DB: snk.DB()}, cfg.GenAI.Table, sqltext.Name(cfg.GenAI.Table), snk.Tables().Main, genai.SpanIdentity,
		verify.Sources{Derives: verify.OperationSpansDuckDB(spanAttributes, spanName), DLQ: snk.Tables().DLQ}); err != nil {
		return err
	}
	rows, _ := rep.Totals()
	fmt.Printf("\nloaded %d OTLP messages into %d spans of otel_spans, %.1fs, %.0f spans/s; %s\n",
		stats.Consumed.Load(), rows, secs, float64(rows)/secs, res)
	fmt.Println("\nverify:")
	rep.WriteText(os.Stdout)
	if !rep.OK {
		return failedCheck{}
	}
	for _, sig := range []string{config.SignalLogs, config.SignalMetrics} {
		if err := loadBeside(ctx, hard, cfgs[sig], snk, quiet); err != nil {
			return err
		}
	}
	for _, q := range demoOTLPQueries {
		fmt.Printf("\n-- %s\n%s;\n", q.title, q.sql)
		if err := printQuery(ctx, os.Stdout, snk.DB(), q.sql); err != nil {
			return err
		}
	}
	page := strings.TrimSuffix(path, filepath.Ext(path)) + "-report.html"
	var html bytes.Buffer
	if err := writeReport(ctx, &html, snk.DB(), cfg, 0, ""); err != nil {
		return err
	}
	if err := os.WriteFile(page, html.Bytes(), 0o644); err != nil {
		return err
	}
	abs, _ := filepath.Abs(page)
	fmt.Printf("\nreport: file://%s (tokens and cost by model and day, latency, errors, tools, costliest traces)\n", abs)
	try := "Try"
	if serve != "" {
		// Serving, the demo holds the file (DuckDB: one process per
		// file) and has no socket for sql to go through.
		try = "Once the demo is stopped (while it serves it holds the file), try"
	}
	fmt.Printf("\nThe spans, logs and metrics are in %s. %s:\n  tracelake sql --duckdb %s \"SELECT name, count(*) FROM otel_spans_dedup GROUP BY 1\"\n", path, try, path)
	if serve == "" {
		fmt.Printf("\nTo look at them in Grafana, run the demo with --serve 127.0.0.1:3200: it then answers the Tempo, Loki and\n" +
			"Prometheus APIs there (datasource URL http://127.0.0.1:3200 for all three; examples/grafana/ provisions them).\n")
		return nil
	}
	return serveDemo(ctx, snk, serve)
}

// loadBeside loads cfg's topic into its table beside snk's, in snk's
// database, and verifies it.
func loadBeside(ctx, hard context.Context, cfg *config.Config, snk *duckdb.Sink, log *slog.Logger) error {
	opt := duckDBOptions(cfg)
	opt.BesidePipeline = true
	other, err := snk.Beside(opt)
	if err != nil {
		return err
	}
	defer other.Close()
	if err := other.Prepare(ctx); err != nil {
		return err
	}
	stats := &pipeline.Stats{}
	if err := pipeline.Run(ctx, hard, cfg, other, pipeline.RunOptions{ExitWhenIdle: 500 * time.Millisecond, Stats: stats, Log: log}); err != nil {
		return err
	}
	rep, err := verifyDuckDB(ctx, cfg, other, verify.SQLQuerier{DB: other.DB()})
	if err != nil {
		return err
	}
	rows, _ := rep.Totals()
	fmt.Printf("\nloaded %d OTLP messages into %d rows of %s; verify:\n", stats.Consumed.Load(), rows, cfg.Sink.Table)
	rep.WriteText(os.Stdout)
	if !rep.OK {
		return failedCheck{}
	}
	return nil
}

// serveDemo answers the Grafana APIs over the demo's tables on addr until
// ctx ends.
func serveDemo(ctx context.Context, snk *duckdb.Sink, addr string) error {
	reader, err := query.NewDuckDB(ctx, snk.DB(), query.DuckDBOptions{MaxConcurrent: 4, Timeout: time.Minute})
	if err != nil {
		return err
	}
	cfg := config.Default()
	cfg.Query.HTTP = addr
	stop, err := startGrafanaAPIs(cfg, reader, map[string]string{config.SignalTraces: otel.Spans.Name,
		config.SignalLogs: otel.Logs.Name, config.SignalMetrics: otel.Metrics.Name})
	if err != nil {
		return err
	}
	defer stop()
	from, to := tracegen.TimeRange()
	fmt.Printf("\nGrafana datasources (tenant %s, no token):\n  Tempo:      http://%s\n  Loki:       http://%s\n  Prometheus: http://%s\n"+
		"The data is dated %s to %s: set Grafana's time range there (its default, the last hour, shows nothing;\n"+
		"Tempo searches at most 168h at once).\n"+
		"serving until interrupted (Ctrl-C)\n", cfg.Tenancy.Default, addr, addr, addr, from.Format(time.DateOnly), to.Format(time.DateOnly))
	<-ctx.Done()
	return nil
}

// telemetrySent counts what sendAgentTelemetry sent.
type telemetrySent struct{ spans, logs, points int }

// sendAgentTelemetry posts n generated agent traces, perRequest per
// request, with the log records and cumulative metrics of their spans
// (tracegen.LogsOf, tracegen.Meter) to the receiver at base, from 4
// concurrent clients. progress (nil for none) is told how many traces
// were answered.
func sendAgentTelemetry(ctx context.Context, base string, n, perRequest int, progress func(int)) (telemetrySent, error) {
	g, meter := tracegen.New(1), tracegen.NewMeter()
	type request struct {
		path   string
		body   []byte
		traces int
	}
	reqs := make(chan request)
	var (
		mu       sync.Mutex
		done     int
		firstErr error
		wg       sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for r := range reqs {
				err := postOTLP(ctx, base+r.path, r.body)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				done += r.traces
				if progress != nil && r.traces > 0 {
					progress(done)
				}
				mu.Unlock()
			}
		})
	}
	var sent telemetrySent
	for at := 0; at < n && ctx.Err() == nil; {
		td := ptrace.NewTraces()
		k := min(perRequest, n-at)
		for range k {
			g.OTLPTrace().ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
		ld, md := tracegen.LogsOf(td), meter.Record(td)
		sent.spans += td.SpanCount()
		sent.logs += ld.LogRecordCount()
		sent.points += md.DataPointCount()
		for _, m := range []struct {
			path    string
			marshal func() ([]byte, error)
			traces  int
		}{
			{"/v1/traces", func() ([]byte, error) { return (&ptrace.ProtoMarshaler{}).MarshalTraces(td) }, k},
			{"/v1/logs", func() ([]byte, error) { return (&plog.ProtoMarshaler{}).MarshalLogs(ld) }, 0},
			{"/v1/metrics", func() ([]byte, error) { return (&pmetric.ProtoMarshaler{}).MarshalMetrics(md) }, 0},
		} {
			body, err := m.marshal()
			if err != nil {
				close(reqs)
				wg.Wait()
				return sent, err
			}
			reqs <- request{m.path, gzipped(body), m.traces}
		}
		at += k
	}
	close(reqs)
	wg.Wait()
	if firstErr != nil {
		return sent, firstErr
	}
	return sent, ctx.Err()
}

// gzipped is body gzip-compressed, as SDK exporters send it.
func gzipped(body []byte) []byte {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(body)
	_ = zw.Close()
	return gz.Bytes()
}

// postOTLP posts one gzip protobuf request and checks it was accepted.
func postOTLP(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("OTLP/HTTP answered %s: %q", resp.Status, msg)
	}
	return nil
}
