package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/pipeline"
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

// demoOTLP sends n agent traces through the OTLP/HTTP receiver (protobuf,
// gzip, 50 traces per request, as an SDK's batch exporter does) into an
// embedded Kafka topic, loads it into otel_spans, verifies, deduplicates
// and shows the spans with SQL.
func demoOTLP(ctx, hard context.Context, n int, path string) error {
	const topic, partitions, perRequest = "otlp_spans", 4, 50
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		return fmt.Errorf("start embedded Kafka: %w", err)
	}
	defer cluster.Close()
	for _, p := range []string{path, path + ".wal"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove old demo database: %w", err)
		}
	}
	cfg := config.Default()
	cfg.Kafka.Brokers = cluster.ListenAddrs()
	cfg.Kafka.Topics = []string{topic}
	cfg.Kafka.Group = "tracelake-demo"
	cfg.Kafka.Format = config.FormatOTLPProto
	cfg.Sink.Table = otel.Spans.Name
	cfg.Batch.MaxInterval = config.Duration(time.Second)
	cfg.Load.MaxInterval = config.Duration(time.Second)
	cfg.Sink.DuckDB.Path = path
	cfg.OTLP.MaxBodyBytes = 1 << 20 // what the embedded topic takes (Kafka's default max.message.bytes)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("BUG: demo config invalid: %w", err)
	}

	kopts := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...)}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fwd, err := otlp.NewKafkaForwarder(ctx, kopts, map[string]string{otlp.Traces: topic}, cfg.Tenancy.KafkaHeader, int64(cfg.OTLP.MaxBodyBytes), quiet)
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
	url := "http://" + rcv.Addr["http"] + "/v1/traces"
	fmt.Printf("embedded Kafka on %v (topic %s, %d partitions); OTLP/HTTP receiver at %s\n", cluster.ListenAddrs(), topic, partitions, url)

	start := time.Now()
	spans, err := sendAgentTraces(ctx, url, n, perRequest, progressFunc(n, "sending traces over OTLP/HTTP"))
	if err != nil {
		return err
	}
	fmt.Printf("sent %d agent traces (%d spans) in %d requests, each answered after Kafka acknowledged it, %.1fs\n",
		n, spans, (n+perRequest-1)/perRequest, time.Since(start).Seconds())

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
	rep, err := verifyDuckDB(ctx, cfg, snk)
	if err != nil {
		return err
	}
	if rep.Copies, err = copies(ctx, mg, dd); err != nil {
		return err
	}
	if err := rep.CheckDerived(ctx, verify.SQLQuerier{DB: snk.DB()}, cfg.GenAI.Table, sqltext.Name(cfg.GenAI.Table), snk.Tables().Main, genai.SpanIdentity); err != nil {
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
	fmt.Printf("\nThe spans are in %s. Try:\n  tracelake sql --duckdb %s \"SELECT name, count(*) FROM otel_spans_dedup GROUP BY 1\"\n", path, path)
	return nil
}

// sendAgentTraces posts n generated agent traces, perRequest per request,
// from 4 concurrent clients, and returns the spans sent. progress (nil
// for none) is told how many traces were answered.
func sendAgentTraces(ctx context.Context, url string, n, perRequest int, progress func(int)) (int, error) {
	g := tracegen.New(1)
	type request struct {
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
				err := postOTLP(ctx, url, r.body)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				done += r.traces
				if progress != nil {
					progress(done)
				}
				mu.Unlock()
			}
		})
	}
	spans := 0
	for sent := 0; sent < n && ctx.Err() == nil; {
		td := ptrace.NewTraces()
		k := min(perRequest, n-sent)
		for range k {
			g.OTLPTrace().ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
		spans += td.SpanCount()
		body, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		if err != nil {
			close(reqs)
			return spans, err
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(body)
		_ = zw.Close()
		reqs <- request{gz.Bytes(), k}
		sent += k
	}
	close(reqs)
	wg.Wait()
	if firstErr != nil {
		return spans, firstErr
	}
	return spans, ctx.Err()
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
