package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// otlp.signals: one load-mode run takes traces, logs and metrics, each
// into its own table of one DuckDB file with its own ledger (verify is OK
// for each, asked through the run's socket with a config naming the
// table), and merge.every merges every table's dedup model.
func TestOneRunLoadsEverySignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin := buildBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "all.duckdb")
	addr := freeAddr(t)
	base := fmt.Sprintf("otlp: {http: %q, signals: [traces, logs, metrics]}\nsink: {duckdb: {path: %q}}\nmerge: {every: 300ms}\nmetrics: {listen: \"\"}\n", addr, db)
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	if err := os.WriteFile(cfgPath, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	g, meter := tracegen.New(3), tracegen.NewMeter()
	var spans, logs, points int
	post := func(path string, body []byte) { t.Helper(); run.postOTLP(t, addr, path, body) }
	for range 5 {
		td := g.OTLPTrace()
		ld, md := tracegen.LogsOf(td), meter.Record(td)
		spans, logs, points = spans+td.SpanCount(), logs+ld.LogRecordCount(), points+md.DataPointCount()
		tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
		lb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		mb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
		post("/v1/traces", tb)
		post("/v1/logs", lb)
		post("/v1/metrics", mb)
	}
	// Every request was answered after its load committed; the models
	// follow within merge.every.
	want := fmt.Sprintf("%d|%d|%d", spans, logs, points)
	var got string
	counts := regexp.MustCompile(`(?m)^(\d+\|\d+\|\d+)\s*$`)
	deadline := time.Now().Add(30 * time.Second)
	for got != want && time.Now().Before(deadline) {
		out, err := exec.Command(bin, "sql", "--duckdb", db,
			"SELECT (SELECT count(*) FROM otel_spans_dedup) || '|' || (SELECT count(*) FROM otel_logs_dedup) || '|' || (SELECT count(*) FROM otel_metrics_dedup) AS n").Output()
		if m := counts.FindStringSubmatch(string(out)); err == nil && m != nil {
			got = m[1]
		}
		if got != want {
			time.Sleep(100 * time.Millisecond) // the merge loop's next round
		}
	}
	if got != want {
		t.Fatalf("the dedup models hold %s spans|logs|points, want %s:\n%s", got, want, run.log)
	}
	// verify goes through the run's socket, for the table its config
	// names.
	for sig, n := range map[string]int{"traces": spans, "logs": logs, "metrics": points} {
		sigCfg := filepath.Join(dir, sig+".yaml")
		if err := os.WriteFile(sigCfg, []byte(base+"kafka: {signal: "+sig+"}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rep := verifyJSON(t, bin, sigCfg, 0)
		if rows, dlq := rep.Totals(); !rep.OK || rows != int64(n) || dlq != 0 {
			t.Errorf("%s: ok=%v rows=%d dlq=%d problems=%v, want %d rows once", sig, rep.OK, rows, dlq, rep.Problems, n)
		}
	}
	// verify with run's own config checks every signal's tables, through
	// the socket and standalone; a log record deleted is then a gap.
	checkSignals := func(rep verify.Report) {
		t.Helper()
		got := map[string]int64{}
		for _, s := range rep.Signals {
			got[s.Table], _ = s.Totals()
		}
		if want := map[string]int64{"otel_logs": int64(logs), "otel_metrics": int64(points)}; !maps.Equal(got, want) {
			t.Errorf("verify of run's config checked %v rows of the other signals' tables, want %v", got, want)
		}
	}
	checkSignals(verifyJSON(t, bin, cfgPath, 0))
	run.stop(t)
	if out, err := exec.Command(bin, "sql", "--duckdb", db, "DELETE FROM otel_logs WHERE koffset = 2").CombinedOutput(); err != nil {
		t.Fatalf("delete a log request's records: %v\n%s", err, out)
	}
	rep := verifyJSON(t, bin, cfgPath, 1)
	if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.HasPrefix(p, "otel_logs: ") }) {
		t.Errorf("a log record deleted: problems %q, want otel_logs's gap", rep.Problems)
	}
}

// genai.operations: on asks for genai_operations from the spans of
// kafka.signal traces; the other signals of otlp.signals have none. Their
// tables are loaded, checked and verified without it: verify of
// otel_logs must not hold the operations of spans against the log
// records (every operation an orphan there), and OK stays OK.
func TestGenAIOperationsOnAreOnlyTheSpans(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin, cfgPath, _, run, _ := runTakingEverySignal(t, 5, "genai: {operations: \"on\"}\n")
	check := func(how string, rep verify.Report) {
		t.Helper()
		if !rep.OK || rep.Derived == nil || rep.Derived.Rows == 0 {
			t.Errorf("verify %s: ok=%v problems=%q derived=%+v, want OK with the spans' operations", how, rep.OK, rep.Problems, rep.Derived)
		}
		for _, s := range rep.Signals {
			if s.Derived != nil {
				t.Errorf("verify %s: %s checked against %s, which holds no spans", how, s.Derived.Table, s.Table)
			}
		}
	}
	check("through run", verifyJSON(t, bin, cfgPath, 0))
	run.stop(t)
	check("standalone", verifyJSON(t, bin, cfgPath, 0))
}

// tracelake merge with the config of a load-mode run taking several
// signals merges every table's dedup model, as run's merge.every does:
// with merge.every 0 it is what fills otel_logs_dedup and
// otel_metrics_dedup.
func TestMergeMergesEverySignalsDedup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin, cfgPath, db, run, sent := runTakingEverySignal(t, 3, "")
	td, ld, md := sent.traces, sent.logs, sent.metrics
	run.stop(t)
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	conn := openDuckDBFile(t, db)
	for table, want := range map[string]int{"otel_spans_dedup": td.SpanCount(), "otel_logs_dedup": ld.LogRecordCount(), "otel_metrics_dedup": md.DataPointCount()} {
		var n int64
		if err := conn.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
			t.Errorf("%s: %v", table, err)
		} else if n != int64(want) {
			t.Errorf("%s holds %d rows after tracelake merge, want %d", table, n, want)
		}
	}
}

// sentSignals are the requests runTakingEverySignal sent.
type sentSignals struct {
	traces  ptrace.Traces
	logs    plog.Logs
	metrics pmetric.Metrics
}

// runTakingEverySignal starts `tracelake run` in load mode taking traces,
// logs and metrics into one DuckDB file (extra: more config lines; no
// status page unless they configure metrics) and
// posts one request of each, made from tracegen's seed: each answered
// 200. It returns the binary, the config, the database, the run and what
// it sent.
func runTakingEverySignal(t *testing.T, seed uint64, extra string) (bin, cfgPath, db string, run *child, sent sentSignals) {
	t.Helper()
	bin = buildBinary(t)
	dir := t.TempDir()
	db = filepath.Join(dir, "all.duckdb")
	addr := freeAddr(t)
	cfgPath = filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("otlp: {http: %q, signals: [traces, logs, metrics]}\nsink: {duckdb: {path: %q}}\n%s", addr, db, extra)
	if !strings.Contains(extra, "metrics:") {
		cfg += "metrics: {listen: \"\"}\n" // no status page unless extra asks for one
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run = startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	g, meter := tracegen.New(seed), tracegen.NewMeter()
	td := g.OTLPTrace()
	sent = sentSignals{td, tracegen.LogsOf(td), meter.Record(td)}
	tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(sent.traces)
	lb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(sent.logs)
	mb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(sent.metrics)
	for path, body := range map[string][]byte{"/v1/traces": tb, "/v1/logs": lb, "/v1/metrics": mb} {
		run.postOTLP(t, addr, path, body)
	}
	return bin, cfgPath, db, run, sent
}

// postOTLP posts body (an OTLP protobuf request) to path of the receiver
// at addr of run c, which must answer 200.
func (c *child) postOTLP(t *testing.T, addr, path string, body []byte) {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("post %s: %v\n%s", path, err, c.log)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s answered %d, want 200:\n%s", path, resp.StatusCode, c.log)
	}
}

// `tracelake run` in load mode taking traces, logs and metrics, killed
// with SIGKILL at random moments while the OpenTelemetry Go SDK's
// exporters (OTLP/gRPC for team-a, OTLP/HTTP for team-b, retry on) send
// every signal, then restarted for the exporters' remaining retries: each
// item an export was answered 2xx for is stored, under the tenant that
// sent it, no more often than its export sent requests (copies come only
// from answers lost to a kill); verify is OK for every signal's tables,
// each dedup model keeps every stored item once, and each stored span has
// its genai_operations row. Both tenants send the same metric series.
func TestLongEverySignalKill9StoresEachAnsweredItem(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary while the SDK's exporters send, too slow with the race detector: go test -run '^TestLong' ./...")
	}
	t.Parallel() // mostly waiting on kills and restarts
	bin := buildBinary(t)
	for name, sinkCfg := range everySignalSinks() {
		t.Run(name, func(t *testing.T) {
			everySignalAcrossStops(t, bin, sinkCfg(t.TempDir()), func(cfgPath, mark string) {
				killAtRandomMomentsAfter(t, bin, cfgPath, 3, mark)
			})
		})
	}
}

// everySignalSinks are the sink configs, by name, of the runs of the
// every-signal tests: a DuckDB file and a local Iceberg warehouse in dir.
func everySignalSinks() map[string]func(dir string) string {
	return map[string]func(dir string) string{
		"duckdb": func(dir string) string { return fmt.Sprintf("{duckdb: {path: %q}}", filepath.Join(dir, "all.duckdb")) },
		"iceberg": func(dir string) string {
			return fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q}}", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
		},
	}
}

// The same with SIGTERM: each run stopped while requests of every signal
// are in flight exits 0, and what it answered 2xx is stored, on DuckDB
// and on Iceberg (where each load is a catalog commit, so more requests
// wait behind the one in progress as the run stops).
func TestLongEverySignalSIGTERMStoresEachAnsweredItem(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary while the SDK's exporters send, too slow with the race detector: go test -run '^TestLong' ./...")
	}
	t.Parallel() // mostly waiting on stops and restarts
	bin := buildBinary(t)
	for name, sinkCfg := range everySignalSinks() {
		t.Run(name, func(t *testing.T) {
			everySignalAcrossStops(t, bin, sinkCfg(t.TempDir()), func(cfgPath, mark string) {
				for i := range 3 {
					run := startRunUntil(t, bin, cfgPath, fmt.Sprintf("run %d", i), mark)
					time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond) // a random moment of the stream
					run.stop(t)
				}
			})
		})
	}
}

// everySignalAcrossStops starts the OpenTelemetry Go SDK's exporters of
// every signal (OTLP/gRPC for team-a, OTLP/HTTP for team-b; both send the
// same metric series) against load-mode runs of sink, which stops start
// and end (each run started once the log says mark), then a last run
// taking the exporters' remaining retries; and checks what is stored.
func everySignalAcrossStops(t *testing.T, bin, sink string, stops func(cfgPath, mark string)) {
	t.Helper()
	// The exporters report each failed export (a refused connection
	// while tracelake is down) to the global handler, which logs it.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	dir := t.TempDir()
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("grpc: %q, http: %q, signals: [traces, logs, metrics]", grpcAddr, httpAddr), sink)
	appendConfig(t, cfgPath, "merge: {every: 300ms}")
	sent := &sentItems{items: map[string]*sentItem{}}
	done, up := make(chan error, 2), make(chan struct{})
	for tenant, proto := range map[string]string{"team-a": "grpc", "team-b": "http"} {
		addr := grpcAddr
		if proto == "http" {
			addr = httpAddr
		}
		go func() { done <- sendEverySignal(sent, proto, addr, tenant, 600, up) }()
	}
	const listening = "OTLP receiver listening"
	stops(cfgPath, listening)
	run := startRunUntil(t, bin, cfgPath, "run last", listening)
	for deadline := time.Now().Add(30 * time.Second); strings.Count(run.log.String(), listening) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("both receivers not listening within 30s:\n%s", run.log)
		}
		time.Sleep(10 * time.Millisecond) // polling the child's log
	}
	close(up)
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("an exporter failed to shut down: %v", err)
		}
	}
	run.stop(t)
	rep := verifyJSON(t, bin, cfgPath, 0)
	if !rep.OK {
		t.Errorf("verify: problems %q", rep.Problems)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	stored := map[string]map[string]int{ // by signal: copies by tenant/identity
		"span":   sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || trace_id || span_id AS k, count(*) AS n FROM otel_spans GROUP BY ALL`),
		"log":    sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || (log_attributes->>'$.seq') AS k, count(*) AS n FROM otel_logs GROUP BY ALL`),
		"metric": sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || metric_name || '/' || (attributes->>'$.series') || '/' || epoch_us(time) AS k, count(*) AS n FROM otel_metrics GROUP BY ALL`),
	}
	kept := map[string]map[string]int{
		"span":   sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || trace_id || span_id AS k, count(*) AS n FROM otel_spans_dedup GROUP BY ALL`),
		"log":    sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || (log_attributes->>'$.seq') AS k, count(*) AS n FROM otel_logs_dedup GROUP BY ALL`),
		"metric": sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || metric_name || '/' || (attributes->>'$.series') || '/' || epoch_us(time) AS k, count(*) AS n FROM otel_metrics_dedup GROUP BY ALL`),
	}
	ops := sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || trace_id || span_id AS k, count(*) AS n FROM genai_operations GROUP BY ALL`)
	sent.mu.Lock()
	defer sent.mu.Unlock()
	acked := map[string]int{}
	for key, it := range sent.items {
		sig, id, _ := strings.Cut(key, " ")
		n := stored[sig][id]
		if it.acked {
			acked[sig]++
		}
		switch {
		case it.acked && n == 0:
			t.Errorf("%s %s was answered 2xx and is not stored", sig, id)
		case n > it.sends:
			t.Errorf("%s %s stored %d times, sent in %d requests", sig, id, n, it.sends)
		}
	}
	for sig, ids := range stored {
		for id, n := range ids {
			if sent.items[sig+" "+id] == nil {
				t.Errorf("%s %s stored %d times, never sent (or under another tenant)", sig, id, n)
			}
			if k := kept[sig][id]; k != 1 {
				t.Errorf("%s %s stored %d times, kept %d times by its dedup model, want once", sig, id, n, k)
			}
			if sig == "span" && ops[id] != n {
				t.Errorf("span %s stored %d times, with %d genai_operations rows", id, n, ops[id])
			}
		}
		for id := range kept[sig] {
			if ids[id] == 0 {
				t.Errorf("%s %s kept by the dedup model, not stored", sig, id)
			}
		}
		if acked[sig] == 0 {
			t.Errorf("no %s was answered 2xx: the test proves nothing", sig)
		}
		t.Logf("%s: %d answered 2xx, %d stored", sig, acked[sig], len(ids))
	}
	for id := range ops {
		if stored["span"][id] == 0 {
			t.Errorf("genai_operations holds span %s, not stored", id)
		}
	}
}

// sentItems are the items the SDK's exporters sent, by "signal
// tenant/identity": in how many requests (retries included), and whether
// an export holding them was answered 2xx.
type sentItems struct {
	mu    sync.Mutex
	items map[string]*sentItem
}

type sentItem struct {
	sends int
	acked bool
}

// sendsKey holds, in an export's context, the count of the requests it
// sent: the exporters' HTTP client and gRPC connection count each.
type sendsKey struct{}

func countSend(ctx context.Context) {
	if n, ok := ctx.Value(sendsKey{}).(*atomic.Int64); ok {
		n.Add(1)
	}
}

type countingTransport struct{ http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	countSend(r.Context())
	return c.RoundTripper.RoundTrip(r)
}

func countingInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	countSend(ctx)
	return invoker(ctx, method, req, reply, cc, opts...)
}

// export runs send (an exporter's export of the items of keys, retries
// and all) and records its requests and outcome.
func (s *sentItems) export(ctx context.Context, keys []string, send func(context.Context) error) error {
	var n atomic.Int64
	err := send(context.WithValue(ctx, sendsKey{}, &n))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		it := s.items[k]
		if it == nil {
			it = &sentItem{}
			s.items[k] = it
		}
		it.sends += int(n.Load())
		it.acked = it.acked || err == nil
	}
	return err
}

type sentSpans struct {
	sdktrace.SpanExporter
	sent   *sentItems
	tenant string
}

func (e sentSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	keys := make([]string, len(spans))
	for i, s := range spans {
		keys[i] = "span " + e.tenant + "/" + s.SpanContext().TraceID().String() + s.SpanContext().SpanID().String()
	}
	return e.sent.export(ctx, keys, func(ctx context.Context) error { return e.SpanExporter.ExportSpans(ctx, spans) })
}

type sentLogs struct {
	sdklog.Exporter
	sent   *sentItems
	tenant string
}

func (e sentLogs) Export(ctx context.Context, recs []sdklog.Record) error {
	keys := make([]string, len(recs))
	for i, r := range recs {
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			if kv.Key == "seq" {
				keys[i] = "log " + e.tenant + "/" + kv.Value.AsString()
			}
			return true
		})
	}
	return e.sent.export(ctx, keys, func(ctx context.Context) error { return e.Exporter.Export(ctx, recs) })
}

type sentMetrics struct {
	sdkmetric.Exporter
	sent   *sentItems
	tenant string
}

func (e sentMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	var keys []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					series, _ := dp.Attributes.Value("series")
					keys = append(keys, fmt.Sprintf("metric %s/%s/%s/%d", e.tenant, m.Name, series.AsString(), dp.Time.UnixMicro()))
				}
			}
		}
	}
	return e.sent.export(ctx, keys, func(ctx context.Context) error { return e.Exporter.Export(ctx, rm) })
}

// sendEverySignal sends n GenAI spans, n log records and a counter's
// points of three series (the same for every tenant) as tenant through
// the SDK's OTLP exporters of proto (grpc or http) to addr, as a steady
// stream of a few seconds, retrying as the SDK does, recording in sent
// what it sent; once up is closed (a receiver listens for good: the
// OTLP/HTTP exporters do not retry a refused connection) it shuts the
// providers down, sending what they hold, and returns.
func sendEverySignal(sent *sentItems, proto, addr, tenant string, n int, up <-chan struct{}) error {
	ctx := context.Background()
	var (
		spanExp   sdktrace.SpanExporter
		logExp    sdklog.Exporter
		metricExp sdkmetric.Exporter
		err       error
	)
	const timeout, maxElapsed = 10 * time.Second, 2 * time.Minute
	if proto == "grpc" {
		reconnect := grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}})
		count := grpc.WithUnaryInterceptor(countingInterceptor)
		headers := map[string]string{"x-scope-orgid": tenant}
		if spanExp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(addr), otlptracegrpc.WithInsecure(), otlptracegrpc.WithDialOption(reconnect, count),
			otlptracegrpc.WithHeaders(headers), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: maxElapsed})); err != nil {
			return err
		}
		if logExp, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpoint(addr), otlploggrpc.WithInsecure(), otlploggrpc.WithDialOption(reconnect, count),
			otlploggrpc.WithHeaders(headers), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: maxElapsed})); err != nil {
			return err
		}
		if metricExp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(addr), otlpmetricgrpc.WithInsecure(), otlpmetricgrpc.WithDialOption(reconnect, count),
			otlpmetricgrpc.WithHeaders(headers), otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: maxElapsed})); err != nil {
			return err
		}
	} else {
		client := &http.Client{Transport: countingTransport{http.DefaultTransport}, Timeout: timeout}
		headers := map[string]string{"X-Scope-OrgID": tenant}
		if spanExp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(), otlptracehttp.WithHTTPClient(client),
			otlptracehttp.WithHeaders(headers), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: maxElapsed})); err != nil {
			return err
		}
		if logExp, err = otlploghttp.New(ctx, otlploghttp.WithEndpoint(addr), otlploghttp.WithInsecure(), otlploghttp.WithHTTPClient(client),
			otlploghttp.WithHeaders(headers), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: maxElapsed})); err != nil {
			return err
		}
		if metricExp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(addr), otlpmetrichttp.WithInsecure(), otlpmetrichttp.WithHTTPClient(client),
			otlpmetrichttp.WithHeaders(headers), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: true, InitialInterval: 50 * time.Millisecond, MaxInterval: 500 * time.Millisecond, MaxElapsedTime: maxElapsed})); err != nil {
			return err
		}
	}
	// Blocking and queues for all: the SDK would drop items, not
	// tracelake, when its queue fills while a kill holds an export.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(sentSpans{spanExp, sent, tenant}, sdktrace.WithMaxExportBatchSize(50),
		sdktrace.WithMaxQueueSize(n), sdktrace.WithBlocking(), sdktrace.WithBatchTimeout(20*time.Millisecond), sdktrace.WithExportTimeout(maxElapsed)))
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(sentLogs{logExp, sent, tenant},
		sdklog.WithMaxQueueSize(n), sdklog.WithExportMaxBatchSize(50), sdklog.WithExportInterval(20*time.Millisecond), sdklog.WithExportTimeout(maxElapsed))))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(sentMetrics{metricExp, sent, tenant},
		sdkmetric.WithInterval(100*time.Millisecond), sdkmetric.WithTimeout(maxElapsed))))
	tr, logger := tp.Tracer("tracelake.test"), lp.Logger("tracelake.test")
	counter, err := mp.Meter("tracelake.test").Int64Counter("tl.test.requests")
	if err != nil {
		return err
	}
	for i := range n {
		_, s := tr.Start(ctx, "chat gpt-4o-mini")
		s.SetAttributes(attribute.Int("seq", i), attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", "openai"), attribute.String("gen_ai.request.model", "gpt-4o-mini"),
			attribute.Int("gen_ai.usage.input_tokens", 100), attribute.Int("gen_ai.usage.output_tokens", 20))
		s.End()
		var rec otellog.Record
		rec.SetBody(attribute.StringValue("tool called"))
		rec.SetTimestamp(time.Now())
		rec.AddAttributes(attribute.String("seq", strconv.Itoa(i)))
		logger.Emit(ctx, rec)
		counter.Add(ctx, 1, metric.WithAttributes(attribute.String("series", fmt.Sprintf("s%d", i%3))))
		time.Sleep(5 * time.Millisecond) // a steady stream across the kills, not one burst
	}
	<-up
	return errors.Join(tp.Shutdown(ctx), lp.Shutdown(ctx), mp.Shutdown(ctx))
}

// sqlCounts runs q (rows of a key k and a count n) with `tracelake sql`
// and returns n by k.
func sqlCounts(t *testing.T, bin, cfgPath, q string) map[string]int {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "sql", "--config", cfgPath, q)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sql %s: %v\n%s%s", q, err, out, &stderr)
	}
	counts := map[string]int{}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range lines[1 : len(lines)-1] { // a header, then the rows, then their count
		f := strings.Fields(line)
		n, err := strconv.Atoi(f[len(f)-1])
		if len(f) != 2 || err != nil {
			t.Fatalf("sql %s: row %q", q, line)
		}
		counts[f[0]] = n
	}
	return counts
}

// `tracelake sql` over an Iceberg lake that a load-mode run taking every
// signal filled reads each signal's dedup model and dead letters, as it
// reads the run's own signal's (and as on DuckDB, where they are tables
// of the file): otel_logs_dedup was refused as no table.
func TestSQLOnIcebergReadsEverySignalsDedup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("http: %q, signals: [traces, logs, metrics]", addr),
		fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q}}", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")))
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	td := tracegen.New(7).OTLPTrace()
	ld, md := tracegen.LogsOf(td), tracegen.NewMeter().Record(td)
	tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	lb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	mb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	for path, body := range map[string][]byte{"/v1/traces": tb, "/v1/logs": lb, "/v1/metrics": mb} {
		run.postOTLP(t, addr, path, body)
	}
	run.stop(t)
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	for table, want := range map[string]int{"otel_spans_dedup": td.SpanCount(), "otel_logs_dedup": ld.LogRecordCount(),
		"otel_metrics_dedup": md.DataPointCount(), "otel_logs_dlq": 0, "otel_metrics_dlq": 0} {
		got := sqlCounts(t, bin, cfgPath, "SELECT 'rows' AS k, count(*) AS n FROM "+table)
		if got["rows"] != want {
			t.Errorf("sql reads %d rows of %s, want %d", got["rows"], table, want)
		}
	}
}

// One signal's loads failing (its stage directory unwritable: a disk
// error) while the others load: its requests are answered 503 (retry)
// and the other signals' 200; once the fault clears its next request is
// stored, and verify is OK for every signal's tables, no position lost
// to the failed loads.
func TestOneSignalsFailingLoadsLeaveTheOthersAndComeBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin, cfgPath, db, run, sent := runTakingEverySignal(t, 9, "")
	addr := regexp.MustCompile(`OTLP receiver listening" protocol=http addr=(\S+)`).FindStringSubmatch(run.log.String())[1]
	stage := db + ".stage.otel_logs"
	if err := os.RemoveAll(stage); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stage, nil, 0o644); err != nil { // a file where the directory was: writes in it fail
		t.Fatal(err)
	}
	tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(sent.traces)
	lb, _ := (&plog.ProtoMarshaler{}).MarshalLogs(sent.logs)
	mb, _ := (&pmetric.ProtoMarshaler{}).MarshalMetrics(sent.metrics)
	resp, err := http.Post("http://"+addr+"/v1/logs", "application/x-protobuf", bytes.NewReader(lb))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("logs whose load failed answered %d, want 503", resp.StatusCode)
	}
	run.postOTLP(t, addr, "/v1/traces", tb)
	run.postOTLP(t, addr, "/v1/metrics", mb)
	if err := os.Remove(stage); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(stage, 0o755); err != nil {
		t.Fatal(err)
	}
	run.postOTLP(t, addr, "/v1/logs", lb) // the client's retry
	run.stop(t)
	rep := verifyJSON(t, bin, cfgPath, 0)
	got := map[string]int64{}
	got["otel_spans"], _ = rep.Totals()
	for _, s := range rep.Signals {
		got[s.Table], _ = s.Totals()
	}
	want := map[string]int64{"otel_spans": 2 * int64(sent.traces.SpanCount()), "otel_logs": 2 * int64(sent.logs.LogRecordCount()), "otel_metrics": 2 * int64(sent.metrics.DataPointCount())}
	if !rep.OK || !maps.Equal(got, want) {
		t.Errorf("verify: ok=%v problems=%q rows %v, want %v", rep.OK, rep.Problems, got, want)
	}
}

// tracelake merge --print-sql with the config of a load-mode run taking
// several signals prints the dedup model of each signal's table, each
// under its title, as tracelake merge merges each: kafka.signal's alone
// left the others' SQL unseen.
func TestMergePrintsEverySignalsDedupSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {signal: logs}\notlp: {http: %q, signals: [traces, logs, metrics]}\nsink: {duckdb: {path: %q}}\n",
		freeAddr(t), filepath.Join(dir, "all.duckdb"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "merge", "--config", cfgPath, "--print-sql").CombinedOutput()
	if err != nil {
		t.Fatalf("merge --print-sql: %v\n%s", err, out)
	}
	for _, table := range []string{"otel_spans", "otel_logs", "otel_metrics"} {
		if title := fmt.Sprintf("-- model %s_dedup: %s,", table, table); strings.Count(string(out), title) != 1 {
			t.Errorf("merge --print-sql prints %q %d times, want once:\n%s", title, strings.Count(string(out), title), out)
		}
	}
}

// With kafka.signal logs and traces among otlp.signals, genai_operations
// is made from the spans' table (genai.operations auto): the status
// page's /report, tracelake report (through run and standalone) and
// merge --rebuild genai_operations find it there. They looked at
// kafka.signal's configuration alone, which loads no operations, and
// refused (report, rebuild) or served nothing (/report).
func TestGenAIOperationsOfSpansNotTheMainSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin, cfgPath, db, run, _ := runTakingEverySignal(t, 5, "kafka: {signal: logs}\nmetrics: {listen: \"127.0.0.1:0\"}\n")
	if page := run.get("/"); !strings.Contains(page, `href="/report"`) {
		t.Errorf("the status page does not link the report:\n%.2000s", page)
	}
	if page := run.get("/report?since=all"); !strings.Contains(page, "GenAI operations") {
		t.Errorf("/report of the spans' operations:\n%.2000s", page)
	}
	report := func(how string) {
		t.Helper()
		out, err := exec.Command(bin, "report", "--config", cfgPath, "--since", "all", "-o", "-").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "GenAI operations") {
			t.Errorf("report %s: %v\n%.2000s", how, err, out)
		}
	}
	report("through run")
	run.stop(t)
	report("standalone")
	conn := openDuckDBFile(t, db)
	var n int64
	mustScan(t, conn.QueryRow("SELECT count(*) FROM genai_operations"), &n)
	if n == 0 {
		t.Fatal("genai_operations is empty: the spans sent have no operation to rebuild")
	}
	if _, err := conn.Exec("DELETE FROM genai_operations"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	out, err := exec.Command(bin, "merge", "--config", cfgPath, "--rebuild", "genai_operations").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("from otel_spans: %d operations", n)) {
		t.Errorf("merge --rebuild genai_operations: %v\n%s", err, out)
	}
}

// On Iceberg, with kafka.signal logs and traces among otlp.signals,
// tracelake sql reads every table the run loads: genai_operations (the
// spans' derived table) and the other signals' dead-letter and dedup
// tables, beside kafka.signal's. The read path listed kafka.signal's
// tables and the other signals' main tables alone.
func TestIcebergSQLReadsEverySignalsTables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin := buildBinary(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := writeLoadModeConfig(t, dir, fmt.Sprintf("http: %q, signals: [traces, logs]", addr),
		fmt.Sprintf("{type: iceberg, iceberg: {catalog: %q, warehouse: %q}}\nkafka: {signal: logs}",
			filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse")))
	run := startRunUntil(t, bin, cfgPath, "run", "OTLP receiver listening")
	td := tracegen.New(5).OTLPTrace()
	tb, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	run.postOTLP(t, addr, "/v1/traces", tb)
	run.postOTLP(t, addr, "/v1/logs", marshalOTLPLogs(t))
	run.stop(t)
	// The dedup tables are made by the first merge.
	if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	count := regexp.MustCompile(`(?m)^\s*(\d+)\s*$`)
	for table, some := range map[string]bool{"genai_operations": true, "otel_spans_dedup": true, "otel_spans_dlq": false, "otel_logs_dedup": true} {
		out, err := exec.Command(bin, "sql", "--config", cfgPath, "SELECT count(*) AS n FROM "+table).CombinedOutput()
		m := count.FindStringSubmatch(string(out))
		if err != nil || m == nil {
			t.Errorf("sql on %s: %v\n%s", table, err, out)
		} else if some && m[1] == "0" {
			t.Errorf("sql on %s: no rows, want those the run loaded:\n%s", table, out)
		}
	}
}

// tracelake dlq list with the config of a load-mode run taking several
// signals lists every signal's dead-letter table, each under its name,
// standalone and through the run: kafka.signal's alone (otel_logs_dlq
// here) left a span's dead letter in otel_spans_dlq unseen.
func TestDLQListShowsEverySignalsDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel() // its own files; mostly waiting on the child
	bin, cfgPath, db, run, _ := runTakingEverySignal(t, 3, "kafka: {signal: logs}\n")
	run.stop(t)
	// A dead letter as the loader writes one for a request its decoder
	// refuses (the receivers' decoding makes that rare to provoke).
	conn := openDuckDBFile(t, db)
	if _, err := conn.Exec(`INSERT INTO otel_spans_dlq (topic, "partition", "offset", "key", "value", error, stage, add_time) VALUES ('otlp:traces', 0, 99, NULL, 'x'::BLOB, 'refused span request', 'decode', now())`); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	list := func(how string) {
		t.Helper()
		out, err := exec.Command(bin, "dlq", "list", "--config", cfgPath).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "otel_spans_dlq (traces):") || !strings.Contains(string(out), "refused span request") ||
			!strings.Contains(string(out), "otel_logs_dlq (logs):") || !strings.Contains(string(out), "otel_metrics_dlq (metrics):") {
			t.Errorf("dlq list %s: %v, want every signal's dead-letter table, with the span's:\n%s", how, err, out)
		}
	}
	list("standalone")
	again := startRunUntil(t, bin, cfgPath, "run again", "OTLP receiver listening")
	list("through run")
	again.stop(t)
}
