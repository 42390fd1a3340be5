package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
)

// ordersModel is a Debezium model of an orders table.
const ordersModel = `merge:
  models:
    - name: orders
      format: debezium
      key: [order_id]
      columns:
        order_id: {path: $.order_id, type: BIGINT}
        status: {path: $.status, type: VARCHAR}
        total: {path: $.total, type: "DECIMAL(12,2)"}`

// `tracelake merge` on a licence-free Databend (no streams, no tasks),
// its statements executed by the test server: the changes past the
// watermark apply once, in one transaction with the watermark. A merge
// whose COMMIT landed with its reply lost, one whose statement failed
// half-way (rolled back) and a merge repeated change nothing twice.
func TestMergeOnDatabendAppliesChangesOnce(t *testing.T) {
	bin, srv := executingDatabend(t)
	cluster, prod := startKafka(t, 2)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], group: m}\nsink: {type: databend, databend: {dsn: %q}}\nmetrics: {listen: \"127.0.0.1:0\"}\n%s\n",
		cluster.ListenAddrs()[0], testTopic, srv.DSN(""), ordersModel)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	row := func(id int, status, total string) string {
		return fmt.Sprintf(`{"order_id":%d,"status":%q,"total":%s}`, id, status, total)
	}
	produce := func(events ...[2]string) { // key, value ("" for a tombstone)
		t.Helper()
		var recs []*kgo.Record
		for _, e := range events {
			r := &kgo.Record{Topic: testTopic, Key: []byte(e[0])} // a key's changes share a partition
			if e[1] != "" {
				r.Value = []byte(e[1])
			}
			recs = append(recs, r)
		}
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		runUntilIdle(t, bin, cfgPath)
	}
	merge := func(wantErr bool) string {
		t.Helper()
		out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput()
		if (err != nil) != wantErr {
			t.Fatalf("merge: %v (want an error: %v)\n%s", err, wantErr, out)
		}
		return string(out)
	}
	orders := func() []string {
		t.Helper()
		var got []string
		for _, r := range srv.Rows("orders") {
			var status string
			_ = json.Unmarshal(r["status"], &status)
			got = append(got, fmt.Sprintf("%s|%s|%s", r["order_id"], status, r["total"]))
		}
		slices.Sort(got)
		return got
	}

	produce([2]string{"1", debeziumEvent("r", "", row(1, "new", "10.50"))}, [2]string{"2", debeziumEvent("r", "", row(2, "new", "20.00"))},
		[2]string{"3", debeziumEvent("c", "", row(3, "new", "30.00"))})
	// The first merge's COMMIT lands, its reply is lost.
	lost := true
	srv.Set(func() {
		srv.DropReply = func(sql string) bool {
			if sql == "COMMIT" && lost {
				lost = false
				return true
			}
			return false
		}
	})
	out := merge(false)
	if !strings.Contains(out, "model orders: merged (row counts not reported by the engine)") {
		t.Errorf("a Databend merge's report claims counts it does not have:\n%s", out)
	}
	var dropped bool
	if got := orders(); !slices.Equal(got, []string{"1|new|10.5", "2|new|20.0", "3|new|30.0"}) {
		t.Fatalf("after the first merge (its COMMIT reply lost): %v\n%s", got, out)
	}
	if srv.Set(func() { dropped = !lost }); !dropped {
		t.Fatal("the COMMIT reply was never dropped: the test did not test it")
	}

	produce([2]string{"1", debeziumEvent("u", row(1, "new", "10.50"), row(1, "paid", "10.50"))},
		[2]string{"2", debeziumEvent("d", row(2, "new", "20.00"), "")}, [2]string{"2", ""}, // the tombstone after a delete
		[2]string{"4", debeziumEvent("c", "", row(4, "new", "40.00"))}, [2]string{"4", debeziumEvent("u", row(4, "new", "40.00"), row(4, "shipped", "41.00"))},
		[2]string{"5", `{"payload":{"after":{"order_id":5}}}`}) // no op: rejected
	// A merge that fails half-way (the target's MERGE refused): nothing
	// of it stays, the watermark included.
	srv.Set(func() {
		srv.QueryStatus = func(sql string) int {
			if strings.HasPrefix(sql, `MERGE INTO "orders"`) {
				return 500
			}
			return 0
		}
	})
	merge(true)
	srv.Set(func() { srv.QueryStatus = nil })
	if got := orders(); len(got) != 3 || len(srv.Rows("orders_rejects")) != 0 {
		t.Fatalf("a failed merge left changes: %v, rejects %v", got, srv.Rows("orders_rejects"))
	}
	out = merge(false)
	want := []string{"1|paid|10.5", "3|new|30.0", "4|shipped|41.0"}
	if got := orders(); !slices.Equal(got, want) {
		t.Errorf("after the changes: %v, want %v\n%s", got, want, out)
	}
	rejects := srv.Rows("orders_rejects")
	if len(rejects) != 1 || !strings.Contains(string(rejects[0]["reason"]), "not a Debezium change event: op is missing") {
		t.Errorf("rejects %v, want the event without op once", rejects)
	}
	// Repeated: nothing past the watermark, nothing changes (the reject
	// is not written again).
	out = merge(false)
	if got := orders(); !slices.Equal(got, want) || len(srv.Rows("orders_rejects")) != 1 {
		t.Errorf("a repeated merge: %v, rejects %d\n%s", got, len(srv.Rows("orders_rejects")), out)
	}
}

// executingDatabend is the binary and a Databend test server that
// executes the merge statements (Server.SQL), for a parallel test.
func executingDatabend(t *testing.T) (string, *databendtest.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	srv := databendtest.New("u", "p")
	srv.Set(func() { srv.SQL = true })
	t.Cleanup(srv.Close)
	return buildBinary(t), srv
}

// debeziumEvent renders a change event with the schema wrapper.
func debeziumEvent(op, before, after string) string {
	if before == "" {
		before = "null"
	}
	if after == "" {
		after = "null"
	}
	return fmt.Sprintf(`{"schema":{"type":"struct"},"payload":{"before":%s,"after":%s,"source":{"connector":"postgresql"},"op":%q,"ts_ms":1}}`, before, after, op)
}

// The OpenTelemetry tables' dedup model on Databend, its statements
// executed by the test server: spans kept once by their ids (tracelake
// merge, then run's merge.every), log records once by a hash of their
// columns, in which a body "1" and a body 1 are different records; a
// repeated merge adds nothing and verify reports the copies.
func TestOTLPDedupOnDatabend(t *testing.T) {
	bin, srv := executingDatabend(t)
	config := func(cluster *kfake.Cluster, signal string) string {
		path := filepath.Join(t.TempDir(), "tracelake.yaml")
		cfg := fmt.Sprintf("kafka: {brokers: [%q], topics: [%s], group: %s, format: otlp_proto, signal: %s}\nsink: {type: databend, databend: {dsn: %q}}\nmetrics: {listen: \"127.0.0.1:0\"}\n",
			cluster.ListenAddrs()[0], testTopic, signal, signal, srv.DSN(""))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	merge := func(cfgPath string) {
		t.Helper()
		if out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput(); err != nil {
			t.Fatalf("merge: %v\n%s", err, out)
		}
	}
	ids := func(table string) (rows int, distinct map[string]bool) {
		distinct = map[string]bool{}
		for _, r := range srv.Rows(table) {
			distinct[string(r["tenant_id"])+string(r["trace_id"])+string(r["span_id"])] = true
		}
		return len(srv.Rows(table)), distinct
	}

	cluster, prod := startKafka(t, 2)
	spansCfg := config(cluster, "traces")
	spans, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	copied := marshalOTLP(t, "otlp_proto", tracegen.New(4242).OTLPTrace())
	copies := tracegen.New(4242).OTLPTrace().SpanCount()
	produceTwice := func(value []byte) {
		t.Helper()
		if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Value: value}, &kgo.Record{Topic: testTopic, Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produceTwice(copied) // a Collector's retried produce
	runUntilIdle(t, bin, spansCfg)
	// The first merge's COMMIT lands and its reply is lost: the retry
	// finds nothing past the watermark.
	lost := true
	srv.Set(func() {
		srv.DropReply = func(sql string) bool {
			drop := sql == "COMMIT" && lost
			lost = lost && !drop
			return drop
		}
	})
	merge(spansCfg)
	srv.Set(func() {
		if lost {
			t.Error("the merge's COMMIT reply was never dropped")
		}
		srv.DropReply = nil
	})
	merge(spansCfg) // nothing past the watermark
	kept, distinct := ids("otel_spans_dedup")
	if raw := len(srv.Rows("otel_spans")); raw != spans+2*copies || kept != spans+copies || len(distinct) != kept {
		t.Fatalf("otel_spans %d rows, otel_spans_dedup %d rows (%d distinct), want %d and %d once each", raw, kept, len(distinct), spans+2*copies, spans+copies)
	}
	// The same request once more, merged by run's merge.every (its merge
	// at the idle exit).
	produceTwice(copied)
	// The idle exit's merge runs in the shutdown's time (shutdown_timeout,
	// 30 s by default), its statements executed by the test server, which
	// is slow under -race on a loaded machine: what is checked is what it
	// merges, not how fast.
	appendConfig(t, spansCfg, "merge: {every: 1h}\nshutdown_timeout: 5m")
	runUntilIdle(t, bin, spansCfg)
	c := verifyJSON(t, bin, spansCfg, 0).Copies
	if kept, _ := ids("otel_spans_dedup"); kept != spans+copies || c == nil || c.Rows != int64(spans+4*copies) || c.Identities != int64(kept) || c.Kept != int64(kept) || c.Pending != 0 {
		t.Errorf("otel_spans_dedup %d rows; verify reports copies %+v, want %d rows, %d distinct, all merged once", kept, c, spans+4*copies, spans+copies)
	}

	// Logs: no ids, a hash of the columns. Three records alike but for
	// their bodies' values and types, sent twice.
	cluster, prod = startKafka(t, 1)
	logsCfg := config(cluster, "logs")
	ld := plog.NewLogs()
	recs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	recs.AppendEmpty().Body().SetStr("1")
	recs.AppendEmpty().Body().SetInt(1)
	recs.AppendEmpty().Body().SetStr("12")
	for i := range recs.Len() {
		recs.At(i).SetTimestamp(pcommon.Timestamp(1_796_040_000_000_000_000))
	}
	value, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	produceTwice(value)
	runUntilIdle(t, bin, logsCfg)
	merge(logsCfg)
	var bodies []string
	for _, r := range srv.Rows("otel_logs_dedup") {
		bodies = append(bodies, string(r["body"]))
	}
	slices.Sort(bodies)
	if want := []string{`"1"`, `"12"`, `1`}; !slices.Equal(bodies, want) {
		t.Errorf("otel_logs_dedup bodies %v, want %v (of otel_logs' %d rows)", bodies, want, len(srv.Rows("otel_logs")))
	}
	// --print-sql prints the transaction that ran, statement by statement
	// in order; other dialects are refused.
	printed, err := exec.Command(bin, "merge", "--config", logsCfg, "--print-sql", "--dialect", "databend").Output()
	if err != nil {
		t.Fatalf("print-sql: %v", err)
	}
	ran := srv.Statements()
	begin := len(ran) - 1
	for begin >= 0 && ran[begin] != "BEGIN" {
		begin--
	}
	tx := ran[begin+1:]
	if begin < 0 || !slices.Contains(tx, "COMMIT") {
		t.Fatalf("no merge transaction ran: %q", ran)
	}
	tx = tx[:slices.Index(tx, "COMMIT")]
	if len(tx) != 5 || !strings.Contains(string(printed), "BEGIN;\n"+strings.Join(tx, ";\n")+";\nCOMMIT;\n") {
		t.Errorf("--print-sql does not print the merge that ran (%d statements):\n%s\nran:\n%s", len(tx), printed, strings.Join(tx, ";\n"))
	}
	if out, err := exec.Command(bin, "merge", "--config", logsCfg, "--print-sql", "--dialect", "duckdb").CombinedOutput(); err == nil {
		t.Errorf("--print-sql --dialect duckdb printed a dedup model that is not SQL there:\n%s", out)
	}
	// The model is tracelake's own: no task, no other model to name.
	for _, flag := range []string{"--task", "--model=x", "--rebuild=x"} {
		cmd := exec.Command(bin, "merge", "--config", logsCfg, flag)
		if out, _ := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != exitUsage || !strings.Contains(string(out), "one built-in model, otel_logs_dedup") {
			t.Errorf("merge %s with an OpenTelemetry table: exit %d, want %d:\n%s", flag, cmd.ProcessState.ExitCode(), exitUsage, out)
		}
	}
}
