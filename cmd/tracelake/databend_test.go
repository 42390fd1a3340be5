package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tracelake/tracelake/internal/sink/databend/databendtest"
	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// referenceConfig writes the reference tool's JSON config file (the keys
// its README documents) pointing at cluster and srv.
func referenceConfig(t testing.TB, cluster *kfake.Cluster, srv *databendtest.Server, password string, extra map[string]any) string {
	t.Helper()
	return referenceConfigAt(t, cluster.ListenAddrs()[0], strings.Replace(srv.DSN(""), srv.Password, password, 1), extra)
}

// referenceConfigAt is referenceConfig for a broker and a Databend DSN
// given by address (servers in other processes).
func referenceConfigAt(t testing.TB, broker, dsn string, extra map[string]any) string {
	t.Helper()
	metrics, err := net.ResolveTCPAddr("tcp", freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"kafkaBootstrapServers": broker,
		"kafkaTopic":            testTopic,
		"KafkaConsumerGroup":    "bend-ingest",
		"isJsonTransform":       false,
		"databendDSN":           dsn,
		"databendTable":         "trace_raw",
		"batchSize":             1000,
		"batchMaxInterval":      10,
		"dataFormat":            "json",
		"workers":               1,
		"copyPurge":             true,
		"copyForce":             false,
		"disableVariantCheck":   false,
		"copyIntoFileCount":     5,
		"copyIntoMaxInterval":   5,
		"maxRetryDelay":         2,
		"useReplaceMode":        false,
		"metricsPort":           metrics.Port,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runIdle(t *testing.T, bin, cfgPath string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
	// A run that never becomes idle is stopped with SIGQUIT, so its output
	// ends with every goroutine's stack: where it was stuck.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// partitionOffsets returns the offsets in the fake's raw table per
// partition, failing on any offset loaded twice.
func partitionOffsets(t *testing.T, srv *databendtest.Server) map[int32]map[int64]bool {
	t.Helper()
	seen := map[int32]map[int64]bool{}
	for _, r := range srv.Rows("trace_raw") {
		var md struct {
			Partition int32
			Offset    int64
		}
		if err := json.Unmarshal(r["record_metadata"], &md); err != nil {
			t.Fatal(err)
		}
		if seen[md.Partition] == nil {
			seen[md.Partition] = map[int64]bool{}
		}
		if seen[md.Partition][md.Offset] {
			t.Fatalf("partition %d offset %d loaded twice", md.Partition, md.Offset)
		}
		seen[md.Partition][md.Offset] = true
	}
	return seen
}

// countRows checks that the partitions hold n rows in all (each at most
// once: partitionOffsets).
func countRows(t *testing.T, seen map[int32]map[int64]bool, n int) {
	t.Helper()
	total := 0
	for _, offs := range seen {
		total += len(offs)
	}
	if total != n {
		t.Fatalf("%d rows, want %d", total, n)
	}
}

// databendSetup builds the binary, starts a fake Databend (user cloudapp,
// password s3cret) and a Kafka with n traces produced over partitions.
func databendSetup(t *testing.T, partitions int32, n int, seed uint64) (string, *databendtest.Server, *kfake.Cluster, *kgo.Client) {
	t.Helper()
	return databendSetupNodes(t, 1, partitions, n, seed)
}

// databendSetupNodes is databendSetup with a fake Databend of nodes
// query nodes behind one balancer.
func databendSetupNodes(t *testing.T, nodes int, partitions int32, n int, seed uint64) (string, *databendtest.Server, *kfake.Cluster, *kgo.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	srv := databendtest.NewCluster("cloudapp", "s3cret", nodes)
	t.Cleanup(srv.Close)
	cluster, cl := startKafka(t, partitions)
	if n > 0 {
		if err := tracegen.Produce(context.Background(), cl, testTopic, n, seed, nil); err != nil {
			t.Fatal(err)
		}
	}
	return bin, srv, cluster, cl
}

// ledgerSums adds up the records and dead letters a ledger table counts.
func ledgerSums(srv *databendtest.Server, ledger string) (records, dlq int64) {
	for _, r := range srv.Rows(ledger) {
		var a, b int64
		_ = json.Unmarshal(r["records"], &a)
		_ = json.Unmarshal(r["dlq_records"], &b)
		records, dlq = records+a, dlq+b
	}
	return records, dlq
}

// The seeds' end-to-end test of the reference tool (seeds/001): 100,000
// messages, batchSize 1,000, copyIntoFileCount 5, one worker, one
// partition, run from the reference's own config file: 100 uploads, 20
// COPY INTO executions, 100,000 rows with offsets 0 to 99,999.
func TestReferenceConfigFileAgainstDatabend(t *testing.T) {
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	const n = 100_000
	bin, srv, cluster, _ := databendSetup(t, 1, n, 7)
	cfgPath := referenceConfig(t, cluster, srv, "s3cret", nil)
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	offs := partitionOffsets(t, srv)
	countRows(t, offs, n)
	if !offs[0][0] || !offs[0][n-1] {
		t.Errorf("offsets 0 and %d are not both loaded", n-1)
	}

	uploads := srv.Uploads()
	claims := 0
	for _, u := range uploads {
		if strings.HasPrefix(u, "~/tracelake/trace_raw/claim-") {
			claims++ // a load's claim of a partition (internal/sink/databend/claim.go)
		}
	}
	if len(uploads)-claims != 100 || claims != 20 {
		t.Errorf("%d uploads of rows and %d claims of ledger positions, want 100 and 20 (one per load)", len(uploads)-claims, claims)
	}
	copyRe := regexp.MustCompile(`^COPY INTO "trace_raw" FROM @~/tracelake/trace_raw/ FILES = \(([^)]*)\) FILE_FORMAT = \(TYPE = NDJSON MISSING_FIELD_AS = FIELD_DEFAULT COMPRESSION = AUTO\) PURGE = FALSE FORCE = FALSE ON_ERROR = CONTINUE$`)
	copies, files := 0, 0
	for _, s := range srv.Statements() {
		if m := copyRe.FindStringSubmatch(s); m != nil {
			copies++
			files += strings.Count(m[1], "'") / 2
		}
	}
	if copies != 20 || files != 100 {
		t.Errorf("%d COPY INTO executions loading %d files; want 20 loading 100", copies, files)
	}
	for _, u := range uploads {
		if !strings.HasSuffix(u, ".ndjson.zst") {
			t.Errorf("upload %s is not zstd NDJSON", u)
		}
	}
	if left := srv.StageFiles(); len(left) != 0 {
		t.Errorf("copyPurge true but %d files stay in the stage", len(left))
	}
	if ledgerRecords, _ := ledgerSums(srv, "trace_raw_ledger"); ledgerRecords != n {
		t.Errorf("ledger counts %d records, want %d", ledgerRecords, n)
	}

	// verify reads Databend's ledger and tables: all there, once.
	rep := verifyJSON(t, bin, cfgPath, 0)
	if rows, dlq := rep.Totals(); rows != n || dlq != 0 || rep.Partitions[0].LedgerNext != n || rep.Partitions[0].Lag != 0 {
		t.Errorf("verify: %+v", rep)
	}

	// A second run resumes past everything: no upload, no COPY.
	before := len(srv.Statements())
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	for _, s := range srv.Statements()[before:] {
		if strings.HasPrefix(s, "COPY") || strings.HasPrefix(s, "PRESIGN") {
			t.Errorf("second run loaded again: %s", s)
		}
	}

	// A row written twice behind tracelake's back: verify says so, exit 1.
	srv.AppendRow("trace_raw", srv.Rows("trace_raw")[42])
	rep = verifyJSON(t, bin, cfgPath, 1)
	if rep.OK || !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "1 offsets stored more than once") }) {
		t.Errorf("verify missed a duplicate: %v", rep.Problems)
	}
}

// verifyJSON runs `tracelake verify --json`, checks its exit code and
// returns the report.
func verifyJSON(t testing.TB, bin, cfgPath string, wantExit int) verify.Report {
	t.Helper()
	out, err := exec.Command(bin, "verify", "--config", cfgPath, "--json").Output()
	code, stderr := 0, []byte(nil)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code, stderr = exit.ExitCode(), exit.Stderr
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantExit {
		t.Fatalf("verify exit %d, want %d:\n%s%s", code, wantExit, out, stderr)
	}
	var rep verify.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify output: %v\n%s", err, out)
	}
	return rep
}

// Uploads that fail with 503 are retried with backoff; nothing is lost or
// doubled. A COPY whose reply is lost is retried as a whole load.
func TestDatabendFaultsAreRetried(t *testing.T) {
	const n = 5000
	bin, srv, cluster, _ := databendSetup(t, 3, n, 3)
	var failures, dropped atomic.Int32 // the hooks run on the server's goroutines
	srv.UploadStatus = func(string) int {
		if failures.Load() < 2 {
			failures.Add(1)
			return 503
		}
		return 0
	}
	srv.DropReply = func(sql string) bool {
		if strings.HasPrefix(sql, `COPY INTO "trace_raw" `) && dropped.Load() < 1 {
			dropped.Add(1)
			return true
		}
		return false
	}
	cfgPath := referenceConfig(t, cluster, srv, "s3cret", map[string]any{"workers": 2})
	out, err := runIdle(t, bin, cfgPath)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if failures.Load() != 2 || dropped.Load() != 1 {
		t.Fatalf("faults injected: %d upload failures, %d dropped replies", failures.Load(), dropped.Load())
	}
	if !strings.Contains(out, "HTTP 503") {
		t.Errorf("the failed upload was not logged:\n%s", out)
	}
	countRows(t, partitionOffsets(t, srv), n)
}

// tracelake run against the server as databend-query's source behaves,
// each case with the reference's config file: COPY slower than the
// server's wait time (Running replies, null page sessions), two nodes
// behind a balancer, commit conflicts every few loads, and a COMMIT
// whose reply is lost and that lands after the retry read the ledger
// (the 2014 guard). Every message lands once and the run exits 0.
func TestDatabendAsTheRealServerBehaves(t *testing.T) {
	const n = 5000
	cases := []struct {
		name   string
		nodes  int
		inject func(srv *databendtest.Server, hits *atomic.Int32)
	}{
		{"slow COPY", 1, func(srv *databendtest.Server, hits *atomic.Int32) {
			srv.WaitTime = 50 * time.Millisecond
			srv.StatementTime = func(sql string) time.Duration {
				if strings.HasPrefix(sql, "COPY INTO") {
					hits.Add(1)
					return 300 * time.Millisecond
				}
				return 0
			}
		}},
		{"two nodes", 2, func(srv *databendtest.Server, hits *atomic.Int32) {
			srv.StatementTime = func(sql string) time.Duration {
				if sql == "COMMIT" {
					hits.Add(1)
				}
				return 0
			}
		}},
		{"commit conflicts", 1, func(srv *databendtest.Server, hits *atomic.Int32) {
			var commits atomic.Int32
			codes := []int{databendtest.CodeOCCRetryFailure, databendtest.CodeUnresolvableConflict, databendtest.CodeTableVersionMismatched}
			srv.CommitError = func() int {
				if c := commits.Add(1); c%3 == 0 {
					hits.Add(1)
					return codes[int(c/3)%len(codes)]
				}
				return 0
			}
		}},
		{"late commit", 1, func(srv *databendtest.Server, hits *atomic.Int32) {
			var commits atomic.Int32
			srv.LateCommit = func() bool {
				if commits.Add(1) == 2 {
					hits.Add(1)
					return true
				}
				return false
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bin, srv, cluster, _ := databendSetupNodes(t, c.nodes, 3, n, 21)
			var hits atomic.Int32
			c.inject(srv, &hits)
			cfgPath := referenceConfig(t, cluster, srv, "s3cret", map[string]any{"workers": 2, "batchSize": 250, "copyIntoMaxInterval": 1})
			out, err := runIdle(t, bin, cfgPath)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			if hits.Load() == 0 {
				t.Fatal("the case's behaviour was never hit")
			}
			countRows(t, partitionOffsets(t, srv), n)
			if records, _ := ledgerSums(srv, "trace_raw_ledger"); records != n {
				t.Errorf("ledger counts %d records, want %d", records, n)
			}
		})
	}
}

// A wrong password stops the run at once with one clear line, exit 1,
// without the password in the output.
func TestDatabendWrongPasswordStops(t *testing.T) {
	bin, srv, cluster, _ := databendSetup(t, 1, 0, 0)
	cfgPath := referenceConfig(t, cluster, srv, "hunter2", nil)
	start := time.Now()
	out, err := runIdle(t, bin, cfgPath)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("want exit 1, got %v\n%s", err, out)
	}
	if !strings.Contains(out, "Databend refused the credentials of sink.databend.dsn") || strings.Contains(out, "hunter2") {
		t.Errorf("output:\n%s", out)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("took %s: the refusal was retried", time.Since(start))
	}
}

// `tracelake merge` on Databend runs each model's merge as one
// transaction driven by the watermark table (no streams: a licence-free
// server has none), exactly the statements `--print-sql --dialect
// databend` prints; a commit conflict runs the whole transaction again
// (its reads included), a failed statement rolls it back. With --task it
// creates and resumes the Databend task and merges nothing itself.
func TestMergeAgainstDatabend(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	srv := databendtest.New("u", "p")
	defer srv.Close()
	srv.Accept = func(sql string) bool {
		for _, p := range []string{"MERGE INTO", "UPDATE ", "INSERT INTO", "DELETE FROM", "CREATE TASK", "ALTER TASK"} {
			if strings.HasPrefix(sql, p) {
				return true
			}
		}
		return false
	}
	// The first merge's transaction conflicts once (the COMMIT after
	// the setup's, which forgets the watermarks of the target absent).
	commits := 0
	srv.CommitError = func() int {
		if commits++; commits == 2 {
			return databendtest.CodeUnresolvableConflict
		}
		return 0
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf("kafka: {topics: [t]}\nsink: {type: databend, databend: {dsn: %q}}\n%s\n", srv.DSN(""), strings.Replace(spansModel, "every: 100ms\n", "", 1))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "merge", "--config", cfgPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "model spans:") {
		t.Fatalf("merge: %v\n%s", err, out)
	}
	printed, err := exec.Command(bin, "merge", "--config", cfgPath, "--print-sql", "--dialect", "databend").Output()
	if err != nil {
		t.Fatalf("print-sql: %v", err)
	}
	// What ran: the setup, then one transaction that failed at COMMIT and
	// ran again whole.
	ran := srv.Statements()
	creates := func(q string) bool { return strings.HasPrefix(q, `CREATE TABLE IF NOT EXISTS "trace_spans" `) }
	made := slices.IndexFunc(ran, creates)
	begins := slices.Index(ran[made+1:], "BEGIN") + made + 1
	if made < 0 || begins == made {
		t.Fatalf("no target made, or no transaction after it: %q", ran)
	}
	setup, tx := ran[:begins], ran[begins+1:]
	// A new server has no target: the setup is preceded by the count of
	// the target in system.tables and followed by the deletes that start
	// the model from the first raw row (merge.DatabendStatements.Reset
	// and Forget), which --print-sql must print where they ran, as the
	// rest.
	forgets := func(q string) bool {
		return strings.HasPrefix(q, "DELETE FROM tracelake_merge_watermarks WHERE model = 'spans'")
	}
	if len(setup) == 0 || !strings.HasPrefix(setup[0], "SELECT count(*) FROM system.tables") || !slices.ContainsFunc(setup, forgets) ||
		slices.IndexFunc(setup, creates) < slices.IndexFunc(setup, forgets) {
		t.Errorf("the setup of a model without its target: %q\nwant the target counted first, and its watermarks forgotten after the tables beside it and before the target is made", setup)
	}
	body := tx[:slices.Index(tx, "COMMIT")]
	want := append(append([]string{}, body...), "COMMIT", "ROLLBACK", "BEGIN")
	want = append(append(want, body...), "COMMIT")
	if !slices.Equal(tx, want) {
		t.Errorf("transaction statements:\n%q\nwant the body, a conflicting COMMIT, its ROLLBACK, then the body again:\n%q", tx, want)
	}
	if len(body) < 5 || !strings.HasPrefix(body[0], "UPDATE tracelake_merge_watermarks") || !strings.HasPrefix(body[len(body)-2], "MERGE INTO tracelake_merge_watermarks") {
		t.Errorf("the merge must claim the model first and advance its watermark in the transaction: %q", body)
	}
	for _, q := range ran {
		if strings.Contains(q, "STREAM") {
			t.Errorf("a stream on a licence-free server: %s", q)
		}
	}
	// --print-sql prints what ran, in order.
	at := 0
	for _, q := range append(setup, append([]string{"BEGIN"}, body...)...) {
		i := strings.Index(string(printed[at:]), q+";\n")
		if i < 0 {
			t.Fatalf("--print-sql does not print, in order, the statement that ran:\n%s\n--- printed:\n%s", q, printed)
		}
		at += i + len(q)
	}

	// --task: the task, resumed; no merge by tracelake.
	n := len(srv.Statements())
	out, err = exec.Command(bin, "merge", "--config", cfgPath, "--task").CombinedOutput()
	if err != nil {
		t.Fatalf("merge --task: %v\n%s", err, out)
	}
	var kinds []string
	for _, s := range srv.Statements()[n:] {
		f := strings.Fields(s)
		kinds = append(kinds, strings.Join(f[:min(2, len(f))], " "))
	}
	if !slices.Contains(kinds, "CREATE TASK") || !slices.Contains(kinds, "ALTER TASK") || slices.Contains(kinds, "BEGIN") {
		t.Errorf("merge --task ran %v: want the task created and resumed, no merge transaction", kinds)
	}
	out, err = exec.Command(bin, "sql", "--config", cfgPath, "SELECT 1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "reads the duckdb and iceberg sinks; sink.type is databend") {
		t.Errorf("sql on a databend config: %v\n%s", err, out)
	}
}

// SIGKILL at random moments against Databend: every message lands once,
// and the ledger's ranges per partition are contiguous from offset 0.
func TestDatabendCrashKill9ExactlyOnce(t *testing.T) {
	t.Parallel() // mostly waiting on kills, restarts and the group's rebalances
	const first, during = 20_000, 20_000
	bin, srv, cluster, prod := databendSetup(t, 4, first, 1)
	cfgPath := filepath.Join(t.TempDir(), "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [%s], group: crash, session_timeout: 6s, rebalance_timeout: 6s}
workers: 2
batch: {max_records: 500, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
sink: {type: databend, databend: {dsn: %q}}
metrics: {listen: "127.0.0.1:0"}
`, cluster.ListenAddrs()[0], testTopic, srv.DSN(""))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	go func() { produced <- tracegen.Produce(context.Background(), prod, testTopic, during, 2, nil) }()
	killAfterFirstLoad(t, bin, cfgPath, func(*child) bool { return len(srv.Rows("trace_raw")) > 0 })
	killAtRandomMoments(t, bin, cfgPath, 4)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	if rep := verifyJSON(t, bin, cfgPath, 0); !rep.OK {
		t.Errorf("verify after kills: %v", rep.Problems)
	}

	seen := partitionOffsets(t, srv)
	countRows(t, seen, first+during)
	type rng2 struct{ first, last int64 }
	ranges := map[int32][]rng2{}
	for _, r := range srv.Rows("trace_raw_ledger") {
		var p int32
		var f, l int64
		_ = json.Unmarshal(r["partition"], &p)
		_ = json.Unmarshal(r["first_offset"], &f)
		_ = json.Unmarshal(r["last_offset"], &l)
		ranges[p] = append(ranges[p], rng2{f, l})
	}
	for p, rs := range ranges {
		slices.SortFunc(rs, func(a, b rng2) int { return int(a.first - b.first) })
		next := int64(0)
		for _, r := range rs {
			if r.first != next {
				t.Errorf("partition %d: ledger range %d-%d after %d: a gap or an overlap", p, r.first, r.last, next-1)
			}
			next = r.last + 1
		}
		if next != int64(len(seen[p])) {
			t.Errorf("partition %d: ledger ends at %d, table has %d rows", p, next-1, len(seen[p]))
		}
	}
}

// The reference's transform mode (isJsonTransform: true) against
// Databend: objects land in the user's table; values the table rejects
// and values that are not objects land in the dead-letter table; every
// offset is in exactly one of them.
func TestReferenceTransformModeAgainstDatabend(t *testing.T) {
	const good = 3000
	bin, srv, cluster, cl := databendSetup(t, 2, good, 5)
	srv.CreateTable("spans", []string{"trace_id", "span_id", "latency_ms"}, []string{"VARCHAR", "VARCHAR", "INT"})
	bad := []string{`{"trace_id": "t", "latency_ms": "slow"}`, `not json`, `[1, 2]`, `{"latency_ms": 1.5}`}
	for _, v := range bad {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic, Partition: 1, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := referenceConfig(t, cluster, srv, "s3cret", map[string]any{"isJsonTransform": true, "databendTable": "spans", "workers": 2})
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if n := len(srv.Rows("spans")); n != good {
		t.Errorf("%d rows in spans, want %d", n, good)
	}
	reasons := map[string]int{}
	for _, r := range srv.Rows("spans_dlq") {
		var stage string
		_ = json.Unmarshal(r["stage"], &stage)
		reasons[stage]++
	}
	if reasons["load"] != 2 || reasons["decode"] != 2 {
		t.Errorf("dead letters by stage %v; want 2 rejected by Databend (load) and 2 not objects (decode)", reasons)
	}
	if records, dlq := ledgerSums(srv, "spans_ledger"); records != good || dlq != int64(len(bad)) {
		t.Errorf("ledger: %d records, %d dead letters; want %d and %d", records, dlq, good, len(bad))
	}
}

// The reference's useStreamingLoad: the files go through the query node
// (no presigned URL) and are loaded in the load's transaction, every
// message once; the log says how.
func TestReferenceStreamingLoadAgainstDatabend(t *testing.T) {
	const n = 5000
	bin, srv, cluster, _ := databendSetup(t, 2, n, 11)
	cfgPath := referenceConfig(t, cluster, srv, "s3cret", map[string]any{"useStreamingLoad": true, "workers": 2})
	out, err := runIdle(t, bin, cfgPath)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	countRows(t, partitionOffsets(t, srv), n)
	for _, st := range srv.Statements() {
		if strings.HasPrefix(st, "PRESIGN") {
			t.Fatalf("streaming load presigned an upload: %s", st)
		}
	}
	if !strings.Contains(out, "streaming_load: files go through the query node") {
		t.Errorf("how streaming load loads was not logged:\n%s", out)
	}
}

// OTLP into Databend: otel_spans created with typed columns, every span
// once under kill -9 at random moments, verify OK; an OTLP metrics message
// whose gauge is NaN (which Databend's DOUBLE cannot take from JSON) loads
// its other points and dead-letters that one with Databend's error.
func TestOTLPIntoDatabend(t *testing.T) {
	t.Parallel() // mostly waiting on kills and restarts, as the other OTLP kill tests
	bin, srv, cluster, prod := databendSetup(t, 4, 0, 0)
	srv.Set(func() { srv.SQL = true }) // the dedup model's setup
	cfgPath := filepath.Join(t.TempDir(), "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [%s], format: otlp_proto, group: crash, session_timeout: 6s, rebalance_timeout: 6s}
workers: 2
batch: {max_records: 100, max_interval: 100ms}
load: {max_files: 3, max_interval: 100ms}
sink: {type: databend, databend: {dsn: %q}}
metrics: {listen: "127.0.0.1:0"}
`, cluster.ListenAddrs()[0], testTopic, srv.DSN(""))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	spans, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	produced := make(chan int, 1)
	go func() {
		n, err := tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 1000, 2)
		if err != nil {
			t.Error(err)
		}
		produced <- n
	}()
	killAfterFirstLoad(t, bin, cfgPath, func(*child) bool { return len(srv.Rows("otel_spans")) > 0 })
	killAtRandomMoments(t, bin, cfgPath, 3)
	spans += <-produced
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	rep := verifyJSON(t, bin, cfgPath, 0)
	if rows, dlq := rep.Totals(); !rep.OK || rows != int64(spans) || dlq != 0 {
		t.Fatalf("verify after kills: ok=%v rows=%d dlq=%d problems=%v, want %d spans", rep.OK, rows, dlq, rep.Problems, spans)
	}
	seen := map[string]bool{}
	for _, r := range srv.Rows("otel_spans") {
		id := string(r["trace_id"]) + string(r["span_id"])
		if seen[id] {
			t.Fatalf("span %s stored twice", id)
		}
		seen[id] = true
		if _, err := strconv.ParseInt(string(r["start_time"]), 10, 64); err != nil || string(r["tenant_id"]) != `"default"` {
			t.Fatalf("row without its typed columns: %v", r)
		}
	}
	if len(seen) != spans {
		t.Fatalf("%d distinct spans stored, want %d", len(seen), spans)
	}
	// Every generated span is a GenAI operation: each in genai_operations
	// once, loaded with it, chats priced.
	if d := rep.Derived; d == nil || d.Rows != int64(spans) || d.Duplicates != 0 || d.Orphans != 0 || d.Mismatched != 0 {
		t.Fatalf("verify's check of genai_operations: %+v, want %d rows", d, spans)
	}
	ops := map[string]bool{}
	priced := 0
	for _, r := range srv.Rows("genai_operations") {
		id := string(r["trace_id"]) + string(r["span_id"])
		if ops[id] || !seen[id] {
			t.Fatalf("operation %s stored twice, or without its span", id)
		}
		ops[id] = true
		if string(r["operation"]) == `"chat"` {
			if !regexp.MustCompile(`^"\d+\.\d{12}"$`).Match(r["total_cost_usd"]) {
				t.Fatalf("a chat without its cost as exact decimal text: %s", r["total_cost_usd"])
			}
			priced++
		}
	}
	if len(ops) != spans || priced == 0 {
		t.Fatalf("%d operations (%d chats priced), want %d", len(ops), priced, spans)
	}
	// The report reads the operations from Databend; a price update and
	// a rebuild reprice one model's calls and change nothing else.
	page := filepath.Join(t.TempDir(), "report.html")
	if out, err := exec.Command(bin, "report", "--config", cfgPath, "--since", "all", "-o", page).CombinedOutput(); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if html, err := os.ReadFile(page); err != nil || !strings.Contains(string(html), "gpt-4o-2024-08-06") {
		t.Errorf("the report lacks the models: %v", err)
	}
	before := opsByID(srv.Rows("genai_operations"))
	if err := os.WriteFile(cfgPath, []byte(cfg+"genai: {prices_file: "+filepath.Join(t.TempDir(), "prices.json")+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "prices", "update", "--config", cfgPath, "--file", repricedTable(t, "openai", "gpt-4o")).CombinedOutput(); err != nil {
		t.Fatalf("prices update: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "merge", "--config", cfgPath, "--rebuild", "genai_operations").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), fmt.Sprintf("%d operations", spans)) {
		t.Fatalf("merge --rebuild: %v\n%s", err, out)
	}
	after := opsByID(srv.Rows("genai_operations"))
	repriced := 0
	for id, b := range before {
		a := after[id]
		for col, v := range b {
			switch {
			case strings.HasSuffix(col, "_cost_usd") && string(b["price_id"]) == `"openai/gpt-4o"`:
				var cost string
				_ = json.Unmarshal(v, &cost)
				if want := `"` + double(t, cost) + `"`; string(a[col]) != want {
					t.Fatalf("span %s: %s %s after the rebuild, want %s", id, col, a[col], want)
				}
				repriced++
			case string(a[col]) != string(v):
				t.Fatalf("span %s: %s changed from %s to %s", id, col, v, a[col])
			}
		}
	}
	if len(after) != len(before) || repriced == 0 {
		t.Fatalf("%d operations after the rebuild (%d costs repriced), want %d", len(after), repriced, len(before))
	}

	// Metrics: a NaN gauge is a row Databend rejects.
	metricsCfg := strings.Replace(strings.Replace(cfg, "format: otlp_proto,", "format: otlp_proto, signal: metrics,", 1), "topics: ["+testTopic+"]", "topics: [otlp_metrics]", 1)
	metricsCfg = strings.Replace(metricsCfg, "group: crash", "group: metrics", 1)
	if err := os.WriteFile(cfgPath, []byte(metricsCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("queue.depth")
	points := g.SetEmptyGauge().DataPoints()
	for _, v := range []float64{1, math.NaN(), 3} {
		p := points.AppendEmpty()
		p.SetTimestamp(pcommon.Timestamp(1_796_040_000_000_000_000))
		p.SetDoubleValue(v)
	}
	value, err := (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(prod).CreateTopic(context.Background(), 1, 1, nil, "otlp_metrics"); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "otlp_metrics", Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if out, err := runIdle(t, bin, cfgPath); err != nil {
		t.Fatalf("metrics run: %v\n%s", err, out)
	}
	rep = verifyJSON(t, bin, cfgPath, 0)
	if rows, dlq := rep.Totals(); !rep.OK || rows != 2 || dlq != 1 {
		t.Fatalf("metrics: ok=%v rows=%d dlq=%d problems=%v, want 2 points and 1 dead letter", rep.OK, rows, dlq, rep.Problems)
	}
	dl := srv.Rows("otel_metrics_dlq")
	if len(dl) != 1 || !strings.Contains(string(dl[0]["error"]), "must be number") {
		t.Fatalf("dead letters: %v", dl)
	}
}

// opsByID keys genai_operations rows by trace and span id.
func opsByID(rows []databendtest.Row) map[string]databendtest.Row {
	out := map[string]databendtest.Row{}
	for _, r := range rows {
		out[string(r["trace_id"])+string(r["span_id"])] = r
	}
	return out
}
