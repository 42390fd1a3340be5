package report

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

var now = time.Date(2026, 11, 30, 18, 0, 0, 0, time.UTC)

// operations creates genai_operations (the columns tracelake loads) with
// three days of chats on two models, tool calls, an agent and failures,
// and one operation older than the window.
func operations(t *testing.T) *sql.DB {
	t.Helper()
	db := emptyOperations(t)
	exec := func(q string) {
		t.Helper()
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
	}
	spans := 0
	insert := func(day int, trace, op, model, tool, agent, status string, in, out int64, cost string, ms float64) {
		start := now.Add(-time.Duration(day) * 24 * time.Hour).Format("2006-01-02 15:04:05")
		spans++
		exec(fmt.Sprintf(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, start_time, duration_ms, service_name, operation,
			request_model, tool_name, agent_name, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', '%s', 's%d', TIMESTAMP '%s', %f, 'agent', '%s', %s, %s, %s, '%s', %s, %s, %s, %s, 'otlp', 0, %d, 0)`,
			trace, spans, start, ms, op, null(model), null(tool), null(agent), status, nullInt(in), nullInt(out), nullInt(in+out), null(cost), spans))
	}
	for day := range 3 {
		insert(day, "trace-a", "chat", "gpt-4o", "", "", "ok", 1000, 200, "0.004500000000", 900)
		insert(day, "trace-b", "chat", "claude-sonnet-4-5", "", "", "ok", 3000, 500, "0.016500000000", 2100)
		insert(day, "trace-b", "execute_tool", "", "search", "", "ok", 0, 0, "", 40)
		insert(day, "trace-b", "invoke_agent", "", "", "researcher", map[bool]string{true: "error", false: "ok"}[day == 1], 0, 0, "", 5000)
	}
	insert(0, "trace-c", "chat", "my-finetune", "", "", "error", 10, 0, "", 100) // unpriced
	// A copy of trace-a's first chat (a client's retry): counted once.
	exec(`INSERT INTO genai_operations SELECT * REPLACE (koffset + 1000 AS koffset) FROM genai_operations WHERE trace_id = 'trace-a' LIMIT 1`)
	insert(30, "trace-old", "chat", "gpt-3.5-turbo", "", "", "ok", 5, 5, "1.000000000000", 1)
	return db
}

func null(s string) string {
	if s == "" {
		return "NULL"
	}
	return "'" + s + "'"
}

func nullInt(n int64) string {
	if n == 0 {
		return "NULL"
	}
	return fmt.Sprint(n)
}

func TestBuild(t *testing.T) {
	r, err := Build(context.Background(), operations(t), Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.Operations != 13 || r.Errors != 2 || r.Unpriced != 1 || r.CostUSD != "0.063000000000" || r.InputTokens != 12010 {
		t.Errorf("totals: ops=%d errors=%d unpriced=%d cost=%s input=%d", r.Operations, r.Errors, r.Unpriced, r.CostUSD, r.InputTokens)
	}
	if len(r.Days) != 3 || len(r.Models) != 3 || r.Models[0].Model != "claude-sonnet-4-5" {
		t.Errorf("days %v models %+v", r.Days, r.Models)
	}
	if len(r.Traces) != 2 || r.Traces[0].TraceID != "trace-b" || r.Traces[0].CostUSD != "0.049500000000" {
		t.Errorf("most expensive traces: %+v", r.Traces)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "search" || r.Tools[0].Count != 3 || len(r.Agents) != 1 || r.Agents[0].Errors != 1 {
		t.Errorf("tools %+v agents %+v", r.Tools, r.Agents)
	}
}

// With a tenant, the report counts that tenant's operations alone: another
// tenant's copy of trace-b's operations changes nothing of t's report and
// is all of u's.
func TestBuildOneTenant(t *testing.T) {
	db := operations(t)
	if _, err := db.Exec(`INSERT INTO genai_operations SELECT * REPLACE ('u' AS tenant_id, 'trace-u' AS trace_id, koffset + 5000 AS koffset)
		FROM genai_operations WHERE trace_id = 'trace-b'`); err != nil {
		t.Fatal(err)
	}
	build := func(tenant string) *Report {
		t.Helper()
		r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Tenant: tenant, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := build(""); r.Operations != 22 {
		t.Errorf("every tenant: %d operations, want 22", r.Operations)
	}
	if r := build("t"); r.Operations != 13 || r.CostUSD != "0.063000000000" || len(r.Traces) != 2 || r.Traces[0].TraceID != "trace-b" {
		t.Errorf("tenant t: ops=%d cost=%s traces=%+v, want trace-b's tenant's report", r.Operations, r.CostUSD, r.Traces)
	}
	r := build("u")
	if r.Operations != 9 || r.CostUSD != "0.049500000000" || len(r.Traces) != 1 || r.Traces[0].Tenant != "u" || r.Tenant != "u" {
		t.Errorf("tenant u: ops=%d cost=%s traces=%+v", r.Operations, r.CostUSD, r.Traces)
	}
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil || !strings.Contains(page.String(), "tenant u") {
		t.Errorf("the page does not name its tenant: %v", err)
	}
}

// The page renders in a real browser (Chromium, headless) and each chart
// draws the series the data has: one per priced model in the cost and
// tokens charts, p50/p90/p99 for latency, the error rate.
func TestRenderedInChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (.ci/run installs Debian's)")
		}
		t.Skip("chromium is not installed")
	}
	r, err := Build(context.Background(), operations(t), Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "http://") || strings.Contains(page.String(), "https://") || strings.Contains(page.String(), "src=") {
		t.Error("the page refers to something outside itself")
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", "file://"+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	m := regexp.MustCompile(`data-rendered="([^"]*)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script did not run in the browser:\n%.2000s", dom)
	}
	var drawn []struct {
		Chart, Series string
		Area          float64
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &drawn); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, d := range drawn {
		if d.Area <= 0 && d.Series != "error rate" {
			t.Errorf("%s chart: series %s covers no area", d.Chart, d.Series)
		}
		got[d.Chart] = append(got[d.Chart], d.Series)
	}
	want := map[string][]string{
		"cost":    {"claude-sonnet-4-5", "gpt-4o"}, // my-finetune has tokens but no cost: no bar
		"tokens":  {"claude-sonnet-4-5", "gpt-4o", "my-finetune"},
		"latency": {"p50", "p90", "p99"},
		"errors":  {"error rate"},
	}
	for chart, series := range want {
		g := got[chart]
		slices.Sort(g)
		if !slices.Equal(g, series) {
			t.Errorf("%s chart: series %v, want %v", chart, g, series)
		}
	}
}
