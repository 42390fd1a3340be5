package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// OTLP messages laid out as the OpenTelemetry Collector's Kafka exporter
// writes them (pdata's marshalers), in both encodings, are loaded by
// `tracelake run` as one row per span with their types kept; a message
// that is not OTLP and one with a bad tenant header go to the dead-letter
// table; verify checks spans against the ledger.
func TestOTLPFromKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	for _, enc := range []string{"otlp_proto", "otlp_json"} {
		t.Run(enc, func(t *testing.T) {
			cluster, prod := startKafka(t, 3)
			cfgPath := writeConfig(t, cluster, "format: "+enc, "tenancy: {kafka_header: tenant}")
			spans, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, enc, 300, 7)
			if err != nil {
				t.Fatal(err)
			}
			// One trace for tenant team-a, one not OTLP, one with a tenant
			// id Mimir would refuse.
			one := tracegen.New(99).OTLPTrace()
			value := marshalOTLP(t, enc, one)
			for _, r := range []*kgo.Record{
				{Topic: testTopic, Value: value, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("team-a")}}},
				{Topic: testTopic, Value: []byte("definitely not OTLP \x00\x01")},
				{Topic: testTopic, Value: value, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("team/a")}}},
			} {
				if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			spans += one.SpanCount()

			rep := runUntilIdle(t, bin, cfgPath)
			rows, dlq := rep.Totals()
			if !rep.OK || rows != int64(spans) || dlq != 2 {
				t.Fatalf("ok=%v rows=%d dlq=%d problems=%v, want %d spans and 2 dead letters", rep.OK, rows, dlq, rep.Problems, spans)
			}

			db := openDuckDBFile(t, filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
			var tenants, teamA, chats, intTokens, doubleTemps, arrays, badIDs int64
			mustScan(t, db.QueryRow(`SELECT count(DISTINCT tenant_id), count(*) FILTER (WHERE tenant_id = 'team-a'),
				count(*) FILTER (WHERE span_attributes->>'$."gen_ai.operation.name"' = 'chat'),
				count(*) FILTER (WHERE json_type(span_attributes, '$."gen_ai.usage.input_tokens"') IN ('BIGINT', 'UBIGINT')),
				count(*) FILTER (WHERE json_type(span_attributes, '$."gen_ai.request.temperature"') = 'DOUBLE'),
				count(*) FILTER (WHERE json_type(span_attributes, '$."gen_ai.response.finish_reasons"') = 'ARRAY'),
				count(*) FILTER (WHERE NOT regexp_full_match(trace_id, '[0-9a-f]{32}') OR NOT regexp_full_match(span_id, '[0-9a-f]{16}'))
				FROM otel_spans`), &tenants, &teamA, &chats, &intTokens, &doubleTemps, &arrays, &badIDs)
			if tenants != 2 || teamA != int64(one.SpanCount()) || chats == 0 || intTokens != chats || doubleTemps != chats || arrays != chats || badIDs != 0 {
				t.Errorf("tenants=%d team-a=%d chats=%d int tokens=%d double temperatures=%d arrays=%d bad ids=%d",
					tenants, teamA, chats, intTokens, doubleTemps, arrays, badIDs)
			}
			// Times are UTC microseconds; durations follow from them.
			var wrongDurations, orphans int64
			mustScan(t, db.QueryRow(`SELECT count(*) FILTER (WHERE date_diff('microsecond', start_time, end_time) * 1000 <> duration_ns),
				count(*) FILTER (WHERE parent_span_id IS NOT NULL AND parent_span_id NOT IN (SELECT span_id FROM otel_spans))
				FROM otel_spans`), &wrongDurations, &orphans)
			if wrongDurations != 0 || orphans != 0 {
				t.Errorf("%d spans with a duration that is not end - start, %d whose parent is missing", wrongDurations, orphans)
			}
			var reasons string
			mustScan(t, db.QueryRow(`SELECT string_agg(error, ' | ' ORDER BY "offset") FROM otel_spans_dlq`), &reasons)
			if !strings.Contains(reasons, "not OTLP traces") || !strings.Contains(reasons, `tenant id "team/a"`) {
				t.Errorf("dead-letter reasons: %s", reasons)
			}
			db.Close()
			// sql --tenant sees that tenant's rows alone, however the
			// table is named.
			out, err := exec.Command(bin, "sql", "--config", cfgPath, "--tenant", "team-a",
				"SELECT count(*) AS n, count(DISTINCT tenant_id) AS tenants FROM otel_spans UNION ALL SELECT count(*), 0 FROM main.otel_spans").CombinedOutput()
			want := fmt.Sprintf("%d  1\n%d  0\n", teamA, teamA)
			if err != nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), strings.Join(strings.Fields(want), " ")) {
				t.Errorf("sql --tenant team-a: %v\n%s\nwant rows %q", err, out, want)
			}
		})
	}
}

// Kill -9 at random moments while OTLP messages arrive, into DuckDB and
// into Iceberg: every span once.
func TestOTLPCrashKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Mostly waiting (on kills, restarts, commits): it runs beside the
	// other such tests, not after them.
	t.Parallel()
	bin := buildBinary(t)
	for _, sinkType := range []string{"duckdb", "iceberg"} {
		t.Run(sinkType, func(t *testing.T) {
			t.Parallel()
			cluster, prod := startKafka(t, 4)
			kafka := "format: otlp_proto, group: crash, session_timeout: 6s, rebalance_timeout: 6s"
			rest := "workers: 2\nbatch: {max_records: 100, max_interval: 100ms}\nload: {max_files: 3%s}"
			cfgPath := writeConfig(t, cluster, kafka, fmt.Sprintf(rest, ", max_interval: 100ms"))
			if sinkType == "iceberg" { // Iceberg loads at its commit_interval
				cfgPath = writeOTLPIcebergConfig(t, cluster, kafka, fmt.Sprintf(rest, ""))
			}
			spans, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 1500, 1)
			if err != nil {
				t.Fatal(err)
			}
			produced := make(chan int, 1)
			go func() {
				n, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 1500, 2)
				if err != nil {
					t.Error(err)
				}
				produced <- n
			}()
			run := startRun(t, bin, cfgPath, "run first")
			awaitMetric(t, run, "tracelake_loads_total")
			if err := run.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = run.cmd.Wait()
			killAtRandomMoments(t, bin, cfgPath, 4)
			spans += <-produced

			rep := runUntilIdle(t, bin, cfgPath)
			rows, dlq := rep.Totals()
			if !rep.OK || rows != int64(spans) || dlq != 0 {
				t.Fatalf("after kills: ok=%v rows=%d dlq=%d problems=%v, want %d spans", rep.OK, rows, dlq, rep.Problems, spans)
			}
			out, err := exec.Command(bin, "sql", "--config", cfgPath, `SELECT count(*) AS n, count(DISTINCT (trace_id, span_id)) AS d FROM otel_spans`).CombinedOutput()
			if f := strings.Fields(string(out)); err != nil || len(f) < 4 || f[2] != fmt.Sprint(spans) || f[3] != fmt.Sprint(spans) {
				t.Fatalf("want %d rows and as many distinct spans: %v\n%s", spans, err, out)
			}
			// Each GenAI span's operation once too, loaded with it (every
			// generated span is one): verify checks it against its span,
			// and the table holds each span's once.
			if d := rep.Derived; d == nil || d.Rows != int64(spans) || d.Duplicates != 0 || d.Orphans != 0 || d.Mismatched != 0 {
				t.Fatalf("verify's check of genai_operations: %+v, want %d rows", d, spans)
			}
			out, err = exec.Command(bin, "sql", "--config", cfgPath, `SELECT
				(SELECT count(*) FROM otel_spans WHERE span_attributes->>'$."gen_ai.operation.name"' IS NOT NULL) AS want,
				(SELECT count(DISTINCT (trace_id, span_id)) FROM genai_operations) AS distinct_ops,
				(SELECT count(*) FROM genai_operations) AS ops,
				(SELECT count(*) FROM genai_operations WHERE operation = 'chat' AND total_cost_usd > 0) AS priced`).CombinedOutput()
			if f := strings.Fields(string(out)); err != nil || len(f) < 8 || f[4] == "0" || f[4] != f[5] || f[4] != f[6] || f[7] == "0" {
				t.Fatalf("want each GenAI span's operation once, chats priced: %v\n%s", err, out)
			}
			page := filepath.Join(t.TempDir(), "report.html")
			if out, err := exec.Command(bin, "report", "--config", cfgPath, "--since", "all", "-o", page).CombinedOutput(); err != nil {
				t.Fatalf("report: %v\n%s", err, out)
			}
			if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), "claude-sonnet-4-5-20250929") {
				t.Errorf("the report lacks the models: %v", err)
			}
			// A rebuild from the spans finds every operation again.
			if out, err := exec.Command(bin, "merge", "--config", cfgPath, "--rebuild", "genai_operations").CombinedOutput(); err != nil ||
				!strings.Contains(string(out), fmt.Sprintf(": %d operations", spans)) {
				t.Fatalf("merge --rebuild genai_operations: %v\n%s", err, out)
			}
		})
	}
}

// writeOTLPIcebergConfig is writeConfig for the Iceberg sink (a SQLite
// catalog and a warehouse in a temp dir).
func writeOTLPIcebergConfig(t *testing.T, cluster *kfake.Cluster, kafkaExtra, rest string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], %s}\n%s\nsink: {type: iceberg, iceberg: {catalog: %q, warehouse: %q, commit_interval: 300ms}}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
		cluster.ListenAddrs()[0], testTopic, kafkaExtra, rest, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func marshalOTLP(t *testing.T, enc string, td ptrace.Traces) []byte {
	t.Helper()
	var b []byte
	var err error
	if enc == "otlp_json" {
		b, err = (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	} else {
		b, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openDuckDBFile(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustScan(t *testing.T, row *sql.Row, dest ...any) {
	t.Helper()
	if err := row.Scan(dest...); err != nil {
		t.Fatal(err)
	}
}

// Logs: one row per log record of otel_logs, the body's type kept.
func TestOTLPLogsFromKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 2)
	cfgPath := writeConfig(t, cluster, "format: otlp_json, signal: logs", "")
	const messages, perMessage = 40, 3
	for i := range messages {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", "agent")
		recs := rl.ScopeLogs().AppendEmpty().LogRecords()
		for j := range perMessage {
			l := recs.AppendEmpty()
			l.SetTimestamp(pcommon.Timestamp(1_796_040_000_000_000_000 + int64(i*perMessage+j)*1000))
			l.SetSeverityNumber(plog.SeverityNumberInfo)
			l.SetSeverityText("INFO")
			if j == 0 {
				l.Body().SetStr("plain text")
			} else {
				l.Body().SetEmptyMap().PutInt("step", int64(j))
			}
		}
		value, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	rep := runUntilIdle(t, bin, cfgPath)
	if rows, dlq := rep.Totals(); !rep.OK || rows != messages*perMessage || dlq != 0 {
		t.Fatalf("ok=%v rows=%d dlq=%d problems=%v, want %d log records", rep.OK, rows, dlq, rep.Problems, messages*perMessage)
	}
	db := openDuckDBFile(t, filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	var texts, objects, distinctTimes int64
	mustScan(t, db.QueryRow(`SELECT count(*) FILTER (WHERE json_type(body) = 'VARCHAR'), count(*) FILTER (WHERE json_type(body) = 'OBJECT'),
		count(DISTINCT "time") FROM otel_logs WHERE severity_number = 9 AND service_name = 'agent'`), &texts, &objects, &distinctTimes)
	if texts != messages || objects != messages*(perMessage-1) || distinctTimes != messages*perMessage {
		t.Errorf("text bodies %d, object bodies %d, distinct times %d", texts, objects, distinctTimes)
	}
}

// Metrics: one row per data point of every type, each type's columns
// filled and typed (an int sum exact, a NaN gauge kept, buckets as JSON).
func TestOTLPMetricsFromKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 1)
	cfgPath := writeConfig(t, cluster, "format: otlp_proto, signal: metrics", "")
	ts := pcommon.Timestamp(1_796_040_000_123_456_000)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "agent")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("queue.depth")
	gauge := g.SetEmptyGauge()
	for _, v := range []float64{1.5, math.NaN()} {
		dp := gauge.DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetDoubleValue(v)
	}
	s := ms.AppendEmpty()
	s.SetName("gen_ai.client.token.usage.total")
	s.SetUnit("{token}")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	sp := sum.DataPoints().AppendEmpty()
	sp.SetTimestamp(ts)
	sp.SetIntValue(9007199254740993)
	sp.Attributes().PutStr("gen_ai.token.type", "input")
	ex := sp.Exemplars().AppendEmpty()
	ex.SetIntValue(7)
	ex.SetTraceID(pcommon.TraceID{0xab})
	h := ms.AppendEmpty()
	h.SetName("gen_ai.client.operation.duration")
	hp := h.SetEmptyHistogram().DataPoints().AppendEmpty()
	hp.SetTimestamp(ts)
	hp.SetCount(6)
	hp.SetSum(3.5)
	hp.SetMin(0.1)
	hp.BucketCounts().FromRaw([]uint64{1, 2, 3})
	hp.ExplicitBounds().FromRaw([]float64{0.5, 1})
	e := ms.AppendEmpty()
	e.SetName("latency.exp")
	ep := e.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	ep.SetTimestamp(ts)
	ep.SetScale(3)
	ep.SetCount(4)
	ep.SetZeroCount(1)
	ep.Positive().SetOffset(-2)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 2})
	q := ms.AppendEmpty()
	q.SetName("latency.summary")
	qp := q.SetEmptySummary().DataPoints().AppendEmpty()
	qp.SetTimestamp(ts)
	qp.SetCount(10)
	qp.SetSum(12)
	qv := qp.QuantileValues().AppendEmpty()
	qv.SetQuantile(0.99)
	qv.SetValue(4.2)
	value, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rep := runUntilIdle(t, bin, cfgPath)
	if rows, dlq := rep.Totals(); !rep.OK || rows != 6 || dlq != 0 {
		t.Fatalf("ok=%v rows=%d dlq=%d problems=%v, want 6 points", rep.OK, rows, dlq, rep.Problems)
	}
	db := openDuckDBFile(t, filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	var got string
	mustScan(t, db.QueryRow(`SELECT string_agg(concat_ws(' ', metric_type, coalesce(temporality, '-'), coalesce(is_monotonic::VARCHAR, '-'),
			coalesce(value::VARCHAR, '-'), coalesce(value_int::VARCHAR, '-'), coalesce("count"::VARCHAR, '-'), coalesce("sum"::VARCHAR, '-'),
			coalesce("min"::VARCHAR, '-'), coalesce("max"::VARCHAR, '-'), coalesce(bucket_counts::VARCHAR, '-'), coalesce(explicit_bounds::VARCHAR, '-'),
			coalesce(scale::VARCHAR, '-'), coalesce(positive::VARCHAR, '-'), coalesce(quantiles::VARCHAR, '-'),
			CASE WHEN json_array_length(exemplars) > 0 THEN exemplars::VARCHAR ELSE '-' END, "time"::VARCHAR), ' | ' ORDER BY kindex)
		FROM otel_metrics WHERE service_name = 'agent'`), &got)
	want := `gauge - - 1.5 - - - - - - - - - - - 2026-11-30 12:00:00.123456 | ` +
		`gauge - - nan - - - - - - - - - - - 2026-11-30 12:00:00.123456 | ` +
		`sum delta true 9007199254740992.0 9007199254740993 - - - - - - - - - [{"time":null,"value":7,"trace_id":"ab000000000000000000000000000000","span_id":null,"filtered_attributes":{}}] 2026-11-30 12:00:00.123456 | ` +
		`histogram unspecified - - - 6 3.5 0.1 - [1,2,3] [0.5,1.0] - - - - 2026-11-30 12:00:00.123456 | ` +
		`exponential_histogram unspecified - - - 4 - - - - - 3 {"offset":-2,"bucket_counts":[1,2]} - - 2026-11-30 12:00:00.123456 | ` +
		`summary - - - - 10 12.0 - - - - - - [{"quantile":0.99,"value":4.2}] - 2026-11-30 12:00:00.123456`
	if got != want {
		t.Errorf("points:\n got %s\nwant %s", got, want)
	}
}

// The OpenTelemetry Go SDK's OTLP/HTTP and gRPC exporters send spans to a
// running `tracelake run` whose receivers forward them to the topic it
// consumes: each span is in otel_spans, with its tenant and typed
// attributes, and verify is OK. The HTTP exporter's first answers are lost
// on the way back (a proxy turns them into 503), so it sends those
// requests again: the table holds them twice, verify counts the copies and
// `tracelake merge` keeps one of each span in otel_spans_dedup.
func TestOTLPReceiversForwardThroughKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	cluster, _ := startKafka(t, 2)
	cfgPath := writeConfig(t, cluster, "format: otlp_proto",
		"otlp: {http: \"127.0.0.1:0\", grpc: \"127.0.0.1:0\", forward: {traces_topic: "+testTopic+"}}")
	run := startRun(t, bin, cfgPath, "run")
	addrs := map[string]string{}
	for _, m := range regexp.MustCompile(`OTLP receiver listening" protocol=(\w+) addr=(\S+)`).FindAllStringSubmatch(run.log.String(), -1) {
		addrs[m[1]] = m[2]
	}
	if addrs["http"] == "" || addrs["grpc"] == "" {
		t.Fatalf("receivers' addresses not logged:\n%s", run.log)
	}
	const lost = 2
	proxy := answerLosingProxy(t, "http://"+addrs["http"], lost)
	ctx := context.Background()
	httpExp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(strings.TrimPrefix(proxy.URL, "http://")), otlptracehttp.WithInsecure(),
		otlptracehttp.WithHeaders(map[string]string{"X-Scope-OrgID": "team-http"}),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 10 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	grpcExp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addrs["grpc"]), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithHeaders(map[string]string{"x-scope-orgid": "team-grpc"}))
	if err != nil {
		t.Fatal(err)
	}
	const perExporter, perRequest = 500, 100
	for _, exp := range []sdktrace.SpanExporter{httpExp, grpcExp} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(perRequest)))
		tr := tp.Tracer("tracelake.test")
		for i := range perExporter {
			_, s := tr.Start(ctx, "execute_tool search")
			s.SetAttributes(attribute.Int("seq", i), attribute.Float64("score", 0.25))
			s.End()
		}
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatalf("export: %v", err)
		}
	}
	// The answers are counted: 5 gRPC requests of 100 spans, and the
	// HTTP requests whose answers were lost among the accepted too.
	metrics := run.get("/metrics")
	for _, want := range []string{`tracelake_otlp_requests_total{outcome="accepted",protocol="grpc",signal="traces"} 5`,
		fmt.Sprintf(`tracelake_otlp_requests_total{outcome="accepted",protocol="http",signal="traces"} %d`, perExporter/perRequest+lost)} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
	// Every span is acknowledged, so in Kafka: stop the run and load
	// whatever it had not.
	run.stop(t)
	rep := runUntilIdle(t, bin, cfgPath)
	stored := rep.Copies.Rows
	if rows, dlq := rep.Totals(); !rep.OK || rows != stored || dlq != 0 {
		t.Fatalf("ok=%v rows=%d dlq=%d problems=%v", rep.OK, rows, dlq, rep.Problems)
	}
	// The lost answers' requests are stored twice, as the client sent them.
	if c := rep.Copies; c.Identities != 2*perExporter || c.Rows < 2*perExporter+lost || c.Kept != 0 || c.Pending != c.Rows {
		t.Fatalf("copies before merging: %+v, want %d identities and at least %d copies", c, 2*perExporter, lost)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	db := openDuckDBFile(t, filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	var httpSpans, grpcSpans, distinct, doubles int64
	mustScan(t, db.QueryRow(`SELECT count(*) FILTER (WHERE tenant_id = 'team-http'), count(*) FILTER (WHERE tenant_id = 'team-grpc'),
		count(DISTINCT (tenant_id, span_attributes->>'$.seq')), count(*) FILTER (WHERE json_type(span_attributes, '$.score') = 'DOUBLE')
		FROM otel_spans_dedup`), &httpSpans, &grpcSpans, &distinct, &doubles)
	if httpSpans != perExporter || grpcSpans != perExporter || distinct != 2*perExporter || doubles != 2*perExporter {
		t.Errorf("deduplicated: http %d, grpc %d, distinct %d, double scores %d; want %d, %d, %d, %d",
			httpSpans, grpcSpans, distinct, doubles, perExporter, perExporter, 2*perExporter, 2*perExporter)
	}
	db.Close()
	out, err := exec.Command(bin, "verify", "--config", cfgPath).Output()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("otel_spans_dedup holds %d\n", 2*perExporter)) {
		t.Errorf("verify after the merge: %v\n%s", err, out)
	}
}

// answerLosingProxy passes requests to target and the first lose answers
// back as 503: the request was stored, the client does not know it.
func answerLosingProxy(t *testing.T, target string, lose int) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		mu.Lock()
		drop := resp.StatusCode == http.StatusOK && lose > 0
		if drop {
			lose--
		}
		mu.Unlock()
		if drop {
			http.Error(w, "answer lost", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An OTLP/gRPC exporter sends spans while `tracelake run` (receivers
// forwarding to the topic it consumes) is killed with SIGKILL at random
// moments and restarted on the same port: requests in flight at a kill,
// forwarded or not, are retried by the client (Unavailable). Nothing is
// lost, and otel_spans_dedup holds each span once.
func TestOTLPReceiverKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Mostly waiting (on kills, restarts, commits): it runs beside the
	// other such tests, not after them.
	t.Parallel()
	bin := buildBinary(t)
	cluster, _ := startKafka(t, 2)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfgPath := writeConfig(t, cluster, "format: otlp_proto, group: kill9, session_timeout: 6s, rebalance_timeout: 6s",
		fmt.Sprintf("otlp: {grpc: %q, forward: {traces_topic: %s}}\nbatch: {max_interval: 100ms}\nload: {max_interval: 100ms}", addr, testTopic))

	const spans = 3000
	rep := forwardAcrossKills(t, bin, cfgPath, addr, spans)
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	db := openDuckDBFile(t, filepath.Join(filepath.Dir(cfgPath), "test.duckdb"))
	var kept, distinct int64
	mustScan(t, db.QueryRow(`SELECT count(*), count(DISTINCT span_attributes->>'$.seq') FROM otel_spans_dedup`), &kept, &distinct)
	if kept != spans || distinct != spans {
		t.Fatalf("otel_spans_dedup: %d rows, %d distinct, want %d (otel_spans holds %d)", kept, distinct, spans, rep.Copies.Rows)
	}
	t.Logf("%d spans stored for %d sent: %d copies from retries across the kills", rep.Copies.Rows, spans, rep.Copies.Rows-spans)
}

// forwardAcrossKills has an OTLP/gRPC exporter send that many spans to
// addr while `tracelake run` of cfgPath (receivers forwarding to the topic
// it consumes) is killed with SIGKILL at three random moments, then runs
// it until idle and returns verify's report, checked OK with every span
// stored.
func forwardAcrossKills(t *testing.T, bin, cfgPath, addr string, spans int) verify.Report {
	t.Helper()
	sent := streamSpans(t, addr, "", spans, "chat")
	killAtRandomMoments(t, bin, cfgPath, 3)
	run := startRun(t, bin, cfgPath, "run last")
	if err := <-sent; err != nil {
		t.Fatalf("the exporter gave up: %v", err)
	}
	run.stop(t)
	rep := runUntilIdle(t, bin, cfgPath)
	if !rep.OK || rep.Copies == nil || rep.Copies.Identities != int64(spans) {
		t.Fatalf("ok=%v problems=%v copies=%+v, want %d distinct spans", rep.OK, rep.Problems, rep.Copies, spans)
	}
	return rep
}

// OTLP into Iceberg: otel_spans is a typed table partitioned by tenant and
// by the day of start_time; every span once, the undecodable message in
// the dead-letter table, verify OK (also over the offsets of messages that
// store no row), and `tracelake sql` reads the columns
// with their types.
func TestOTLPIntoIceberg(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// Mostly waiting (on kills, restarts, commits): it runs beside the
	// other such tests, not after them.
	t.Parallel()
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 2)
	cfgPath := writeOTLPIcebergConfig(t, cluster, "format: otlp_proto", "batch: {max_interval: 100ms}")
	spans, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 200, 5)
	if err != nil {
		t.Fatal(err)
	}
	// Messages that store no row: an export request with no spans, and
	// another signal's message on a shared topic. Iceberg has no ledger
	// to cover their offsets: verify must not count them as gaps.
	empty := marshalOTLP(t, "otlp_proto", ptrace.NewTraces())
	logs := &kgo.Record{Topic: testTopic, Value: marshalOTLPLogs(t), Headers: []kgo.RecordHeader{{Key: "otlp-signal", Value: []byte("logs")}}}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: empty}, logs,
		&kgo.Record{Topic: testTopic, Value: []byte("not OTLP")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rep := runUntilIdle(t, bin, cfgPath)
	if rows, dlq := rep.Totals(); !rep.OK || rows != int64(spans) || dlq != 1 {
		t.Fatalf("ok=%v rows=%d dlq=%d problems=%v, want %d spans and 1 dead letter", rep.OK, rows, dlq, rep.Problems, spans)
	}
	out, err := exec.Command(bin, "sql", "--config", cfgPath, `SELECT count(*) AS spans, count(DISTINCT (trace_id, span_id)) AS distinct_spans,
		count(*) FILTER (WHERE json_type(span_attributes, '$."gen_ai.usage.input_tokens"') IN ('BIGINT', 'UBIGINT')) AS int_tokens,
		count(*) FILTER (WHERE span_attributes->>'$."gen_ai.operation.name"' = 'chat') AS chats,
		count(*) FILTER (WHERE start_time IS NULL OR duration_ns IS NULL) AS untimed FROM otel_spans`).CombinedOutput()
	if err != nil {
		t.Fatalf("sql: %v\n%s", err, out)
	}
	fields := strings.Fields(string(out))
	// header (5 names), then the row
	if len(fields) < 10 || fields[5] != fmt.Sprint(spans) || fields[6] != fmt.Sprint(spans) || fields[7] != fields[8] || fields[7] == "0" || fields[9] != "0" {
		t.Errorf("otel_spans over Iceberg:\n%s", out)
	}
	// --tenant over Iceberg: the spans and operations of that tenant alone.
	for tenant, want := range map[string]string{"default": fmt.Sprint(spans), "team-b": "0"} {
		out, err := exec.Command(bin, "sql", "--config", cfgPath, "--tenant", tenant,
			"SELECT (SELECT count(*) FROM otel_spans) AS spans, (SELECT count(*) FROM genai_operations) AS ops").CombinedOutput()
		if f := strings.Fields(string(out)); err != nil || len(f) < 4 || f[2] != want || f[3] != want {
			t.Errorf("sql --tenant %s over Iceberg: %v\n%s", tenant, err, out)
		}
	}
	// tracelake serve: the same tables through Flight SQL, per tenant.
	flightAddr := freeAddr(t)
	serveCmd := exec.Command(bin, "serve", "--config", cfgPath)
	serveCmd.Env = append(os.Environ(), "TRACELAKE_QUERY_FLIGHT_SQL="+flightAddr)
	served := startUntil(t, serveCmd, "serve", "serving Arrow Flight SQL")
	for tenant, want := range map[string]int{"default": spans, "team-b": 0} {
		var n int
		if err := flightDB(t, flightAddr, "", tenant).QueryRow(`SELECT count(*)::INTEGER FROM otel_spans`).Scan(&n); err != nil || n != want {
			t.Errorf("serve, tenant %s: %d spans (%v), want %d\n%s", tenant, n, err, want, served.log)
		}
	}
	if err := flightDB(t, flightAddr, "", "default").QueryRow(`SELECT count(*) FROM main.otel_spans`).Scan(new(int64)); err == nil || !strings.Contains(err.Error(), "InvalidArgument") {
		t.Errorf("serve took a qualified name: %v", err)
	}
	served.cmd.Process.Signal(syscall.SIGTERM)
	if err := served.cmd.Wait(); err != nil {
		t.Errorf("serve did not stop cleanly: %v\n%s", err, served.log)
	}
	cfg, err := config.FromFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	snk, err := openIceberg(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	raw, _ := snk.Identifiers()
	tbl, err := snk.Catalog().LoadTable(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		parts = append(parts, f.Name+"="+f.Transform.String())
	}
	if got := strings.Join(parts, ","); got != "tenant_id=identity,start_time_day=day" {
		t.Errorf("partition spec %s, want tenant_id=identity,start_time_day=day", got)
	}

	// The dedup model: tracelake merge, then a request stored twice (a
	// Collector's retried produce) merged by run's merge.every (its merge
	// at the idle exit): its spans are kept once, and verify reports the
	// copies.
	for i, want := range []int{spans, 0} { // the second has nothing to add
		out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput()
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("model otel_spans_dedup: %d raw rows read, %d target rows changed", want, want)) {
			t.Errorf("merge %d: %v\n%s", i+1, err, out)
		}
	}
	td := tracegen.New(4242).OTLPTrace()
	n := td.SpanCount()
	copied := marshalOTLP(t, "otlp_proto", td)
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: copied}, &kgo.Record{Topic: testTopic, Value: copied}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	appendConfig(t, cfgPath, "merge: {every: 1h}")
	runUntilIdle(t, bin, cfgPath)
	c := verifyJSON(t, bin, cfgPath, 0).Copies
	if c == nil || c.Rows != int64(spans+2*n) || c.Identities != int64(spans+n) || c.Kept != c.Identities || c.Pending != 0 {
		t.Errorf("verify reports copies %+v, want %d rows, %d distinct, all merged once", c, spans+2*n, spans+n)
	}
}

// A process with receivers and no topics runs the receivers alone (with
// its metrics endpoint): what it accepts is in Kafka.
func TestOTLPReceiversAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	cluster, _ := startKafka(t, 1)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("kafka: {brokers: [%q]}\notlp: {http: \"127.0.0.1:0\", forward: {traces_topic: %s}}\nmetrics: {listen: \"127.0.0.1:0\"}\nsink: {duckdb: {path: %q}}\n",
		cluster.ListenAddrs()[0], testTopic, filepath.Join(dir, "unused.duckdb"))), 0o644); err != nil {
		t.Fatal(err)
	}
	run := &child{cmd: exec.Command(bin, "run", "--config", cfgPath), log: &childLog{t: t, prefix: "receivers: ", assigned: make(chan struct{}, 1)}}
	run.cmd.Stderr = run.log
	if err := run.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := regexp.MustCompile(`OTLP receiver listening" protocol=http addr=(\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	var m []string
	for m = listening.FindStringSubmatch(run.log.String()); m == nil || run.get("/metrics") == ""; m = listening.FindStringSubmatch(run.log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("receivers not up in 30s:\n%s", run.log)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition: the child's log and metrics endpoint
	}
	pb := marshalOTLP(t, "otlp_proto", tracegen.New(1).OTLPTrace())
	resp, err := http.Post("http://"+m[1]+"/v1/traces", "application/x-protobuf", bytes.NewReader(pb))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("post: %v %v", err, resp)
	}
	resp.Body.Close()
	if !strings.Contains(run.get("/metrics"), `tracelake_otlp_requests_total{outcome="accepted",protocol="http",signal="traces"} 1`) {
		t.Errorf("the accepted request is not counted:\n%s", run.get("/metrics"))
	}
	run.stop(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs := cl.PollFetches(ctx)
	recs := fs.Records()
	if len(recs) != 1 || !bytes.Equal(recs[0].Value, pb) {
		t.Fatalf("Kafka holds %d records (errors %v), want the request", len(recs), fs.Errors())
	}
}

// otlp.forward.topic: every signal to one topic; a traces loader and a
// logs loader of that topic each load their own signal, nothing else,
// in groups given or left at their defaults. Before, the default was one
// group for both: whichever loader ran first skipped the other signal's
// requests and committed the group past them, and the other loaded none
// of them, verify OK with 0 rows.
func TestOTLPSignalsShareAForwardTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	for _, groups := range [][2]string{{", group: traces", ", group: logs"}, {"", ""}} {
		cluster, _ := startKafka(t, 2)
		traces := writeConfig(t, cluster, "format: otlp_proto"+groups[0],
			"otlp: {http: \"127.0.0.1:0\", forward: {topic: "+testTopic+"}}")
		logs := writeConfig(t, cluster, "format: otlp_proto, signal: logs"+groups[1], "")
		run := startRun(t, bin, traces, "run")
		td := tracegen.New(3).OTLPTrace()
		addr := receiverAddr(t, run)
		run.postOTLP(t, addr, "/v1/traces", marshalOTLP(t, "otlp_proto", td))
		run.postOTLP(t, addr, "/v1/logs", marshalOTLPLogs(t))
		run.stop(t)
		for cfg, want := range map[string]int{traces: td.SpanCount(), logs: 1} {
			rep := runUntilIdle(t, bin, cfg)
			if rows, dlq := rep.Totals(); !rep.OK || rows != int64(want) || dlq != 0 {
				t.Errorf("groups %q, %s: ok=%v rows=%d dlq=%d problems=%v, want %d rows", groups, cfg, rep.OK, rows, dlq, rep.Problems, want)
			}
		}
	}
}

// A loader of a topic the receivers forward logs to, whose config leaves
// kafka.signal at its default (traces): a forwarding process with that
// config is refused at start, but a loader alone (receivers scale apart
// from loaders) took it and skipped every forwarded log request as
// another signal's, with no dead letter, verify OK: requests
// acknowledged to their clients were in no table, and nothing told.
// The message names its topic's signals: the loader dead-letters it.
func TestOTLPLoaderOfAnotherSignalsForwardTopicDeadLettersIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	cluster, _ := startKafka(t, 2)
	// The receivers' process forwards logs to testTopic (and loads them
	// itself, under its own group).
	fwd := writeConfig(t, cluster, "format: otlp_proto, signal: logs, group: receivers",
		"otlp: {http: \"127.0.0.1:0\", forward: {logs_topic: "+testTopic+"}}")
	// A loader alone of the same topic, kafka.signal left out.
	loader := writeConfig(t, cluster, "format: otlp_proto, group: loader", "")
	run := startRun(t, bin, fwd, "run")
	run.postOTLP(t, receiverAddr(t, run), "/v1/logs", marshalOTLPLogs(t))
	run.stop(t)
	rep := runUntilIdle(t, bin, loader)
	if rows, dlq := rep.Totals(); !rep.OK || rows != 0 || dlq != 1 {
		t.Errorf("a loader of kafka.signal traces of the logs forward topic: ok=%v rows=%d dlq=%d problems=%v, want the log request dead-lettered", rep.OK, rows, dlq, rep.Problems)
	}
	out, err := exec.Command(bin, "sql", "--config", loader, "SELECT bool_and(error LIKE '%unless a loader of kafka.signal logs%') AS named FROM otel_spans_dlq").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "true") {
		t.Errorf("the dead letter's reason does not name the kafka.signal to load it with: %v\n%s", err, out)
	}
}

// receiverAddr is the address of run's OTLP/HTTP receiver, from its log.
func receiverAddr(t *testing.T, run *child) string {
	t.Helper()
	m := regexp.MustCompile(`OTLP receiver listening" protocol=http addr=(\S+)`).FindStringSubmatch(run.log.String())
	if m == nil {
		t.Fatalf("no receiver address:\n%s", run.log)
	}
	return m[1]
}

// A new user's first config: receivers, a DuckDB file, no Kafka, no
// otlp.mode. The receivers load what they take (they forwarded to a
// 127.0.0.1:9092 that was not there: each request waited 10s and was
// answered 503), and the closing line counts it (it said records=0
// loaded=0) with the time run, rounded.
func TestOTLPReceiversWithoutKafkaLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin := buildBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	addr := freeAddr(t)
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf("otlp: {http: %q}\nsink: {duckdb: {path: %q}}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
		addr, filepath.Join(dir, "first.duckdb"))), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startRunUntil(t, bin, cfgPath, "first hour", "OTLP receiver listening")
	const requests = 5
	g := tracegen.New(5)
	spans := 0
	client := &http.Client{Timeout: 5 * time.Second} // a load answers within a second; a forward to no Kafka took 10s
	for range requests {
		td := g.OTLPTrace()
		spans += td.SpanCount()
		resp, err := client.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(marshalOTLP(t, "otlp_proto", td)))
		if err != nil {
			t.Fatalf("post: %v\n%s", err, run.log)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("answered %d, want 200:\n%s", resp.StatusCode, run.log)
		}
	}
	run.stop(t)
	closing := regexp.MustCompile(`tracelake stopped" records=0 otlp_requests=(\d+) loaded=(\d+) dlq=0 files=\d+ loads=[1-9]\d* elapsed=(\S+)`).FindStringSubmatch(run.log.String())
	if closing == nil || closing[1] != fmt.Sprint(requests) || closing[2] != fmt.Sprint(spans) {
		t.Fatalf("the closing line does not count %d requests and %d spans loaded:\n%s", requests, spans, run.log)
	}
	if !regexp.MustCompile(`^(\d+m)?\d+(\.\d)?s$|^\d00ms$`).MatchString(closing[3]) {
		t.Errorf("elapsed=%s, want it rounded (12.3s, 4m5s)", closing[3])
	}
	var stored int64
	mustScan(t, openDuckDBFile(t, filepath.Join(dir, "first.duckdb")).QueryRow(`SELECT count(*) FROM otel_spans`), &stored)
	if stored != int64(spans) {
		t.Errorf("otel_spans holds %d spans, want %d", stored, spans)
	}
}

// otlp.mode load, no Kafka: the receivers load each request into the sink
// and answer after the load committed. An OTLP/gRPC exporter sends GenAI
// spans while tracelake is killed with SIGKILL at random moments: the
// exporter retries what was not answered, every span is stored (copies
// only from answers lost to a kill), the dedup model keeps each once, each
// span's genai_operations row is written with it under the tenant the
// client sent (tenancy.kafka_header plays no part), verify is OK, and a
// signal the process does not load is refused for good (404).
func TestOTLPReceiversLoadDirectlyKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("grpc: %q, http: %q", grpcAddr, httpAddr), fmt.Sprintf("{duckdb: {path: %q}}", filepath.Join(dir, "test.duckdb")))
	const spans = 3000
	run := killLoadModeWhileSending(t, bin, cfgPath, grpcAddr, spans)
	logs := marshalOTLPLogs(t)
	resp, err := http.Post("http://"+httpAddr+"/v1/logs", "application/x-protobuf", bytes.NewReader(logs))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("logs posted to a process loading traces: %d, want 404", resp.StatusCode)
	}
	run.stop(t)
	rep := verifyJSON(t, bin, cfgPath, 0)
	if !rep.OK || rep.Copies.Identities != spans {
		t.Fatalf("ok=%v problems=%v copies=%+v, want %d distinct spans", rep.OK, rep.Problems, rep.Copies, spans)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	db := openDuckDBFile(t, filepath.Join(dir, "test.duckdb"))
	var kept, distinct, ops, opSpans int64
	mustScan(t, db.QueryRow(`SELECT count(*), count(DISTINCT span_attributes->>'$.seq') FROM otel_spans_dedup`), &kept, &distinct)
	if kept != spans || distinct != spans {
		t.Fatalf("otel_spans_dedup: %d rows, %d distinct, want %d (otel_spans holds %d)", kept, distinct, spans, rep.Copies.Rows)
	}
	var otherTenants int64
	mustScan(t, db.QueryRow(`SELECT count(*) FROM otel_spans WHERE tenant_id IS DISTINCT FROM 'team-b'`), &otherTenants)
	if otherTenants != 0 {
		t.Errorf("%d spans not of the tenant that sent them (team-b)", otherTenants)
	}
	mustScan(t, db.QueryRow(`SELECT count(*), count(DISTINCT span_id) FROM genai_operations`), &ops, &opSpans)
	if opSpans != spans || ops != rep.Copies.Rows {
		t.Errorf("genai_operations: %d rows of %d spans, want one per stored span (%d) of %d spans", ops, opSpans, rep.Copies.Rows, spans)
	}
	t.Logf("%d spans stored for %d sent: %d copies from retries across the kills", rep.Copies.Rows, spans, rep.Copies.Rows-spans)
}

// freeAddr is a loopback address with a port free at the time of the call.
//
// The port is below the kernel's ephemeral range where it has one: a
// port the kernel hands out for "127.0.0.1:0" or an outgoing connection
// could be taken by any listener or client of the parallel tests (or of
// the child's next run: its metrics endpoint) while a killed run's
// receivers are down, and the restarted run could not bind it. A port is
// handed out once per test process: two parallel tests whose children
// bind their ports only later (each run started again after a kill)
// could otherwise be given the same one.
func freeAddr(t testing.TB) string {
	t.Helper()
	low := ephemeralLow()
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for range 100 {
		addr := "127.0.0.1:0"
		if low > 10_000 {
			addr = fmt.Sprintf("127.0.0.1:%d", 10_000+rand.IntN(low-10_000))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use: another
		}
		addr = ln.Addr().String()
		ln.Close()
		if givenPorts.addrs[addr] {
			continue // free now, but a parallel test's child will bind it
		}
		givenPorts.addrs[addr] = true
		return addr
	}
	t.Fatal("no free port below the ephemeral range in 100 tries")
	return ""
}

// givenPorts are the addresses freeAddr handed out in this process.
var givenPorts = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 where
// it is not known (not Linux).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	var low, high int
	if _, err := fmt.Sscan(string(b), &low, &high); err != nil {
		return 0
	}
	return low
}

// marshalOTLPLogs is a logs export request of one record, in protobuf.
func marshalOTLPLogs(t *testing.T) []byte {
	t.Helper()
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
	b, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// streamSpans sends spans spans named name with attrs and a "seq"
// attribute through an OTLP/gRPC exporter to addr as tenant ("" for none),
// as a steady stream of ~3s, retrying as the SDK does; the channel says
// how the exporter ended.
func streamSpans(t *testing.T, addr, tenant string, spans int, name string, attrs ...attribute.KeyValue) <-chan error {
	t.Helper()
	ctx := context.Background()
	// Reconnecting within 100ms (gRPC waits a second and more by default),
	// so that every run, killed or not, takes requests.
	reconnect := grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}})
	var headers map[string]string
	if tenant != "" {
		headers = map[string]string{"x-scope-orgid": tenant}
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithDialOption(reconnect),
		otlptracegrpc.WithHeaders(headers), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: 2 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	// Blocking and a queue for all: the SDK would drop spans, not
	// tracelake, when its queue fills while a kill holds an export.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxExportBatchSize(50),
		sdktrace.WithMaxQueueSize(spans), sdktrace.WithBlocking(), sdktrace.WithBatchTimeout(20*time.Millisecond)))
	sent := make(chan error, 1)
	go func() {
		tr := tp.Tracer("tracelake.test")
		for i := range spans {
			_, s := tr.Start(ctx, name)
			s.SetAttributes(append([]attribute.KeyValue{attribute.Int("seq", i)}, attrs...)...)
			s.End()
			if i%25 == 24 {
				time.Sleep(20 * time.Millisecond) // a steady stream across the kills, not one burst
			}
		}
		sent <- tp.Shutdown(ctx)
	}()
	return sent
}

// otlp.mode load on Iceberg and Databend (DuckDB: the kill test above):
// concurrent OTLP/HTTP requests are each answered 200 once their load
// committed, and then every span is in the table once with its
// genai_operations row (verify checks both against the ledger).
func TestOTLPLoadModeOnIcebergAndDatabend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on the child
	bin := buildBinary(t)
	for name, sinkCfg := range icebergAndDatabendSinks(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("http: %q", addr), sinkCfg(dir))
			// Receivers alone are never idle: asking to exit when idle is a
			// usage error, not a run that never ends.
			idle := exec.Command(bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
			if out, _ := idle.CombinedOutput(); idle.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "kafka.topics") {
				t.Errorf("run --exit-when-idle without kafka.topics: exit %d, want %d:\n%s", idle.ProcessState.ExitCode(), exitUsage, out)
			}
			run := startRunUntil(t, bin, cfgPath, name, "OTLP receiver listening")
			const requests = 20
			g := tracegen.New(11)
			spans := 0
			var wg sync.WaitGroup
			for range requests {
				td := g.OTLPTrace()
				spans += td.SpanCount()
				body := marshalOTLP(t, "otlp_proto", td)
				wg.Go(func() {
					resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("answered %d", resp.StatusCode)
					}
				})
			}
			wg.Wait()
			if page := run.get("/"); !strings.Contains(page, "otlp:traces</td><td>0</td><td>receivers</td><td>20</td>") {
				t.Errorf("the status page does not show the receivers' loads (20 requests):\n%s", page)
			}
			run.stop(t)
			rep := verifyJSON(t, bin, cfgPath, 0)
			if rows, dlq := rep.Totals(); !rep.OK || rows != int64(spans) || dlq != 0 {
				t.Fatalf("ok=%v rows=%d dlq=%d copies=%+v problems=%v, want %d spans once", rep.OK, rows, dlq, rep.Copies, rep.Problems, spans)
			}
		})
	}
}

// otlp.mode load on Iceberg (a local warehouse) and the test Databend
// server, killed with SIGKILL at random moments while an OTLP/gRPC
// exporter sends GenAI spans: every span is stored (copies only from
// answers lost to a kill) and verify is OK — no gap in the receivers'
// sequence, no position twice, each span's genai_operations row beside it.
// Iceberg commits its tables one by one, so a kill can fall between them.
func TestOTLPLoadModeKill9OnIcebergAndDatabend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on the child
	bin := buildBinary(t)
	for name, sinkCfg := range icebergAndDatabendSinks(t) {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			grpcAddr := freeAddr(t)
			cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("grpc: %q", grpcAddr), sinkCfg(dir))
			const spans = 2000
			run := killLoadModeWhileSending(t, bin, cfgPath, grpcAddr, spans)
			run.stop(t)
			out, _ := exec.Command(bin, "verify", "--config", cfgPath).CombinedOutput()
			rep := verifyJSON(t, bin, cfgPath, 0)
			if !rep.OK || rep.Copies == nil || rep.Copies.Identities != int64(spans) {
				t.Fatalf("ok=%v problems=%v copies=%+v, want %d distinct spans\n%s", rep.OK, rep.Problems, rep.Copies, spans, out)
			}
			t.Logf("%d spans stored for %d sent", rep.Copies.Rows, spans)
		})
	}
}

// writeLoadModeConfig writes, in dir, the config of receivers (the otlp
// section's listeners) loading into sink, and returns its path. The tenant
// comes from the request alone (no Kafka header).
func writeLoadModeConfig(t *testing.T, dir, receivers, sink string) string {
	t.Helper()
	path := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("otlp: {mode: load, %s}\ntenancy: {kafka_header: \"\"}\nsink: %s\nmetrics: {listen: \"127.0.0.1:0\"}\n", receivers, sink)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// killLoadModeWhileSending kills `tracelake run` of cfgPath (receivers
// loading) with SIGKILL at three random moments while an OTLP/gRPC
// exporter sends that many GenAI spans of team-b to grpcAddr, and returns the
// run started last, running, once the exporter has sent them all.
func killLoadModeWhileSending(t *testing.T, bin, cfgPath, grpcAddr string, spans int) *child {
	t.Helper()
	sent := streamSpans(t, grpcAddr, "team-b", spans, "chat gpt-4o-mini", attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "openai"), attribute.String("gen_ai.request.model", "gpt-4o-mini"),
		attribute.Int("gen_ai.usage.input_tokens", 100), attribute.Int("gen_ai.usage.output_tokens", 20))
	const listening = "OTLP receiver listening"
	killAtRandomMomentsAfter(t, bin, cfgPath, 3, listening)
	run := startRunUntil(t, bin, cfgPath, "run last", listening)
	if err := <-sent; err != nil {
		t.Fatalf("the exporter gave up: %v", err)
	}
	return run
}

// icebergAndDatabendSinks are the sink configs, by name, of a local
// Iceberg warehouse in a test's directory and of a test Databend server.
func icebergAndDatabendSinks(t *testing.T) map[string]func(dir string) string {
	return map[string]func(dir string) string{
		"iceberg": func(dir string) string {
			return fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q}}", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
		},
		"databend": func(string) string {
			srv := databendtest.New("u", "p")
			srv.Set(func() { srv.SQL = true }) // the dedup model's setup
			t.Cleanup(srv.Close)
			return fmt.Sprintf("{type: databend, databend: {dsn: %q}}", srv.DSN(""))
		},
	}
}

// otlp.mode load: a load failing with an error no retry in the process
// can fix (sink.ErrFatal: here Databend refusing the stage upload with
// 403; on DuckDB, a database a disk error invalidated) stops `tracelake
// run` with exit 1 naming it, as a Kafka load does, once its request is
// answered 503 (the client retries against the restarted process). The
// run went on answering 503 for ever instead: a DuckDB file invalidated
// stays so until the process restarts, so every signal's requests were
// refused for good, and no supervisor restarts a process that runs.
func TestOTLPLoadModeStopsOnFatalSinkError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // mostly waiting on the child
	bin := buildBinary(t)
	srv := databendtest.New("u", "p")
	srv.Set(func() { srv.SQL = true }) // the dedup model's setup
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("http: %q, signals: [traces, logs]", addr), fmt.Sprintf("{type: databend, databend: {dsn: %q}}", srv.DSN("")))
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	exited := make(chan error, 1)
	go func() { exited <- run.cmd.Wait() }()
	t.Cleanup(func() {
		_ = run.cmd.Process.Kill() // if the test failed with it running
	})
	run.postOTLP(t, addr, "/v1/logs", marshalOTLPLogs(t))
	srv.Set(func() { srv.UploadStatus = func(string) int { return http.StatusForbidden } })
	resp, err := http.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(marshalOTLP(t, "otlp_proto", tracegen.New(2).OTLPTrace())))
	if err != nil {
		t.Fatalf("post: %v\n%s", err, run.log)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a request whose load failed for good answered %d, want 503 (retry)", resp.StatusCode)
	}
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != exitFailed || !strings.Contains(run.log.String(), "403") {
			t.Errorf("run ended with %v, want exit %d naming Databend's 403:\n%s", err, exitFailed, run.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run still running 30s after a fatal load error:\n%s", run.log)
	}
}

// A logs loader with start_offset latest, upgraded from a release whose
// default group was tracelake for every signal: its partitions had a
// committed start there (a run commits each start at assignment) and no
// ledger position (nothing came while it ran). A request the receivers
// forwarded while the loader was down for the upgrade was read from
// there by the release before; now the loader is in tracelake-logs,
// where the partition has no offset, and started at the end, past the
// request: acknowledged, in no table, verify OK.
func TestOTLPLogsLoaderMovedToItsOwnGroupStartsWhereTheFormerOneWas(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own Kafka and files; mostly waiting on the child
	bin := buildBinary(t)
	cluster, cl := startKafka(t, 2)
	// What the release before's run committed at assignment.
	starts := kadm.Offsets{}
	for p := int32(0); p < 2; p++ {
		starts.Add(kadm.Offset{Topic: testTopic, Partition: p, At: 0, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(context.Background(), "tracelake", starts)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	// Forwarded by the receivers meanwhile.
	rec := &kgo.Record{Topic: testTopic, Value: marshalOTLPLogs(t), Headers: []kgo.RecordHeader{
		{Key: "X-Scope-OrgID", Value: []byte("t1")}, {Key: "otlp-signal", Value: []byte("logs")}, {Key: "otlp-topic-signals", Value: []byte("logs")}}}
	if err := cl.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	loader := writeConfig(t, cluster, "format: otlp_proto, signal: logs, start_offset: latest", "")
	rep := runUntilIdle(t, bin, loader)
	if rows, dlq := rep.Totals(); !rep.OK || rows != 1 || dlq != 0 {
		t.Errorf("ok=%v rows=%d dlq=%d problems=%v, want the request forwarded during the upgrade loaded", rep.OK, rows, dlq, rep.Problems)
	}
}
