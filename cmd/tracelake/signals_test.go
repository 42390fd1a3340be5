package main

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

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
// logs and metrics into one DuckDB file (extra: more config lines) and
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
	cfg := fmt.Sprintf("otlp: {http: %q, signals: [traces, logs, metrics]}\nsink: {duckdb: {path: %q}}\n%smetrics: {listen: \"\"}\n", addr, db, extra)
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
