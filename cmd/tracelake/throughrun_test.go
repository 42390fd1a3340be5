package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// command runs the binary with args and returns its standard output,
// standard error and exit code.
func command(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// generatedAt is the report's one line that changes from run to run.
var generatedAt = regexp.MustCompile(`generated \d{4}-\d\d-\d\d \d\d:\d\d UTC`)

// While `tracelake run` holds the DuckDB file, sql, verify, report, dlq
// list and reconcile go through it and answer what they answer once it
// stopped; sql --tenant there sees its tenant's rows alone and refuses a
// qualified name; merge and dlq replay say why they do not go through it;
// the socket is its owner's alone and gone after the run; /report takes
// a tenant. Before the socket, every one of these commands stopped at
// "another process has the file open".
func TestCommandsWhileRunHoldsTheFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 2)
	cfgPath := writeConfig(t, cluster, "format: otlp_proto", "tenancy: {kafka_header: tenant}\nmerge: {every: 200ms}")
	dbPath := filepath.Join(filepath.Dir(cfgPath), "test.duckdb")
	ctx := context.Background()
	spans, err := tracegen.ProduceOTLP(ctx, prod, testTopic, "otlp_proto", 120, 11)
	if err != nil {
		t.Fatal(err)
	}
	teamA := tracegen.New(99)
	for range 5 {
		td := teamA.OTLPTrace()
		spans += td.SpanCount()
		r := &kgo.Record{Topic: testTopic, Value: marshalOTLP(t, "otlp_proto", td), Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("team-a")}}}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: testTopic, Value: []byte("not OTLP")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := startRun(t, bin, cfgPath, "run")
	defer run.cmd.Process.Kill()
	// Through run, until everything is loaded and merged.
	for deadline := time.Now().Add(90 * time.Second); ; {
		out, stderr, code := command(t, bin, "verify", "--config", cfgPath, "--json")
		var rep verify.Report
		if code != exitUsage && json.Unmarshal([]byte(out), &rep) == nil {
			if rows, dlq := rep.Totals(); rep.OK && rows == int64(spans) && dlq == 1 && rep.Copies != nil && rep.Copies.Pending == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not everything loaded and merged through run after 90s (exit %d):\n%s\n%s\n%s", code, out, stderr, run.log)
		}
		time.Sleep(100 * time.Millisecond) // polling a condition: the loads and merges
	}
	fi, err := os.Stat(dbPath + ".sock")
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket: %v, mode %v, want 0600", err, fi.Mode())
	}

	queries := [][]string{
		{"sql", "SELECT tenant_id, count(*) AS spans, count(DISTINCT trace_id) AS traces FROM otel_spans GROUP BY ALL ORDER BY ALL"},
		{"sql", "--tenant", "team-a", "SELECT count(*) AS n, count(DISTINCT tenant_id) AS tenants, min(tenant_id) AS tenant FROM otel_spans"},
		{"sql", "SELECT operation, count(*) AS n, sum(total_cost_usd) AS cost FROM genai_operations GROUP BY ALL ORDER BY ALL"},
		{"verify", "--json"},
		{"report", "--since", "all", "-o", "-"},
		{"report", "--since", "all", "--tenant", "team-a", "-o", "-"},
		{"dlq", "list"},
		{"reconcile", "--left", "otel_spans", "--right", "otel_spans_dedup", "--key", "tenant_id,trace_id,span_id"},
	}
	ask := func(args []string) string {
		t.Helper()
		name := args[0]
		rest := args[1:]
		if name == "dlq" {
			name, rest = "dlq "+args[1], args[2:]
		}
		argv := append(append(strings.Fields(name), "--config", cfgPath), rest...)
		out, stderr, code := command(t, bin, argv...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s\n%s", argv, code, out, stderr)
		}
		return generatedAt.ReplaceAllString(out, "generated …")
	}
	live := make([]string, len(queries))
	for i, q := range queries {
		live[i] = ask(q)
	}
	if !strings.Contains(live[6], "not OTLP") || !strings.HasSuffix(live[6], "(1 rows)\n") || !strings.HasPrefix(live[7], "EQUAL") {
		t.Errorf("dlq list or reconcile through run:\n%s\n%s", live[6], live[7])
	}
	if f := strings.Fields(live[1]); len(f) != 8 || f[3] == "0" || f[4] != "1" || f[5] != "team-a" {
		t.Errorf("sql --tenant team-a through run:\n%s", live[1])
	}
	if !strings.Contains(live[5], "tenant team-a") || strings.Contains(live[5], `<td class="l">default</td>`) || !strings.Contains(live[4], `<td class="l">default</td>`) {
		t.Errorf("report --tenant team-a through run shows another tenant, or every tenant's does not:\n%.3000s", live[5])
	}

	// What does not go through run says so, in one line.
	pid := run.cmd.Process.Pid
	for _, c := range []struct {
		args []string
		want string // the whole of stderr, or its start with prefix
		code int
	}{
		{[]string{"sql", "--config", cfgPath, "--tenant", "team-a", "SELECT count(*) FROM main.otel_spans"}, "tracelake: query refused: ", exitFailed},
		{[]string{"merge", "--config", cfgPath}, fmt.Sprintf("tracelake: merge writes the tables, and tracelake run (pid %d) holds %s: it merges them itself with merge.every (set it and restart run), or stop run to merge\n", pid, dbPath), exitFailed},
		{[]string{"dlq", "replay", "--config", cfgPath}, fmt.Sprintf("tracelake: dlq replay writes the tables, and tracelake run (pid %d) holds %s: stop run, replay, then start run again\n", pid, dbPath), exitFailed},
	} {
		out, stderr, code := command(t, bin, c.args...)
		prefix := c.args[0] == "sql"
		if code != c.code || out != "" || !strings.HasPrefix(stderr, c.want) || !prefix && stderr != c.want {
			t.Errorf("%s while run holds the file: exit %d, stdout %q, stderr\n%s\nwant\n%s", c.args, code, out, stderr, c.want)
		}
	}

	// The status page's report, for one tenant.
	if page := run.get("/report?tenant=team-a&since=all"); !strings.Contains(page, "tenant team-a") || strings.Contains(page, `<td class="l">default</td>`) {
		t.Errorf("/report?tenant=team-a:\n%.3000s", page)
	}
	if page := run.get("/report?tenant=default&since=all"); !strings.Contains(page, `<td class="l">default</td>`) || strings.Contains(page, `<td class="l">team-a</td>`) {
		t.Errorf("/report?tenant=default:\n%.3000s", page)
	}
	if page := run.get("/report?tenant=team%2Fa"); !strings.Contains(page, "tenant:") {
		t.Errorf("/report with a bad tenant: %q", page)
	}

	run.stop(t)
	if _, err := os.Lstat(dbPath + ".sock"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket outlived run: %v", err)
	}
	// The same commands on the stopped database answer the same.
	for i, q := range queries {
		if got := ask(q); got != live[i] {
			t.Errorf("%s: through run\n%s\nstopped\n%s", q, live[i], got)
		}
	}
}
