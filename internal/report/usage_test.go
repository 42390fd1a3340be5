package report

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// An agent invocation span carries the usage of the whole invocation: the
// OpenTelemetry GenAI agent spans (gen-ai-agent-spans.md, "Invoke agent
// span") list gen_ai.request.model and gen_ai.usage.input_tokens /
// output_tokens on invoke_agent spans, and instrumentations set them to the
// run's totals (Pydantic AI's agent run span, Sentry's OpenAI Agents
// integration: the sums of the run's model requests), while each of those
// requests is also a chat span of its own with its usage. tracelake prices
// both (fixtures.json: "otel agent, Anthropic, ..." prices an invoke_agent
// span); the report counts the trace's LLM usage once, as its chats':
// an operation with a descendant operation with usage is left out of the
// sums.
func TestAgentUsageNotCountedTwiceWithItsChats(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	// The agent (span a) and its two chats (b, c, children of a); the
	// agent's usage is the sum of its chats' (gpt-4o: $2.5/M in, $10/M out).
	for i, r := range []struct {
		span, parent, op, agent string
		in, out                 int64
		cost                    string
	}{
		{"a", "", "invoke_agent", "researcher", 1500, 300, "0.006750000000"},
		{"b", "a", "chat", "", 1000, 200, "0.004500000000"},
		{"c", "a", "chat", "", 500, 100, "0.002250000000"},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, agent_name, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', 'trace-1', ?, ?, CAST(? AS TIMESTAMP), 10, ?, 'openai', 'gpt-4o', nullif(?, ''), 'ok', ?, ?, ?, CAST(? AS DECIMAL(18,12)), 'otlp', 0, 1, ?)`,
			r.span, r.parent, start, r.op, r.agent, r.in, r.out, r.in+r.out, r.cost, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 1500 || r.OutputTokens != 300 || r.CostUSD != "0.006750000000" {
		t.Errorf("report totals: input %d output %d cost %s, want 1500 300 0.006750000000 (the agent's usage is its chats')",
			r.InputTokens, r.OutputTokens, r.CostUSD)
	}
	if len(r.Traces) != 1 || r.Traces[0].CostUSD != "0.006750000000" || r.Traces[0].Tokens != 1800 {
		t.Errorf("most expensive traces %+v, want trace-1 at 0.006750000000 and 1800 tokens", r.Traces)
	}
	if len(r.Models) != 1 || r.Models[0].InputTokens != 1500 || r.Models[0].CostText != "0.006750000000" {
		t.Errorf("models %+v, want gpt-4o with 1500 input tokens at 0.006750000000", r.Models)
	}
}

// Token counts are kept as sent (README: a bogus count is stored, its cost
// null), and each of these fits its BIGINT column; but their sum does not
// fit the int64 the report scans it into: the sum is clamped to int64 and
// the report — every tenant's, the status page's /report too — is drawn.
func TestReportSurvivesHugeTokenCounts(t *testing.T) {
	db := operations(t)
	if _, err := db.Exec(`INSERT INTO genai_operations SELECT * REPLACE (4611686018427387904 AS input_tokens, NULL AS total_cost_usd,
		koffset + 7000 + kindex AS koffset, span_id || '-bogus' AS span_id) FROM genai_operations WHERE trace_id = 'trace-a' AND koffset < 1000`); err != nil {
		t.Fatal(err)
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatalf("two spans with 2^62 input tokens each fail the report: %v", err)
	}
	if r.Operations != 16 {
		t.Errorf("operations %d, want 16", r.Operations)
	}
}

// A sum over no token counts is 0 tokens: an empty window, a tenant whose
// operations are tool calls, a model that never read the cache, a trace
// whose operations have no counts. DuckDB's least and greatest skip a
// null argument, so the int64 clamp of a null sum was the range's end:
// every such figure read 9,223,372,036,854,775,807. Each figure is checked
// against SQL over the same rows.
func TestNoTokensSumToZero(t *testing.T) {
	db := operations(t)
	build := func(opt Options) *Report {
		t.Helper()
		opt.Table = "genai_operations"
		if opt.Now.IsZero() {
			opt.Now = now
		}
		r, err := Build(context.Background(), db, opt)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The window holds no operation (a day a year after the fixture's).
	if r := build(Options{Since: 24 * time.Hour, Now: now.AddDate(1, 0, 0)}); r.Operations != 0 || r.InputTokens != 0 || r.OutputTokens != 0 || r.CostUSD != "0.000000000000" {
		t.Errorf("empty window: %d operations, %d input and %d output tokens, cost %s; want none", r.Operations, r.InputTokens, r.OutputTokens, r.CostUSD)
	}
	// A tenant whose operations are tool calls, without tokens.
	if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, start_time, duration_ms, operation, tool_name, status, ktopic, kpartition, koffset, kindex)
		VALUES ('tools', 'trace-t', 's1', TIMESTAMP '2026-11-30 12:00:00', 5, 'execute_tool', 'search', 'ok', 'otlp', 0, 9000, 0)`); err != nil {
		t.Fatal(err)
	}
	if r := build(Options{Since: 7 * 24 * time.Hour, Tenant: "tools"}); r.Operations != 1 || r.InputTokens != 0 || r.OutputTokens != 0 {
		t.Errorf("tool calls alone: %d operations, %d input and %d output tokens; want 1, 0, 0", r.Operations, r.InputTokens, r.OutputTokens)
	}
	// No operation of the fixture reads the cache; a model's figures are
	// its rows' sums.
	r := build(Options{Since: 7 * 24 * time.Hour})
	for _, m := range r.Models {
		var in, out, cache int64
		if err := db.QueryRow(`SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), coalesce(sum(cache_read_tokens), 0)
			FROM (SELECT DISTINCT ON (tenant_id, trace_id, span_id) * FROM genai_operations WHERE start_time >= ?)
			WHERE coalesce(response_model, request_model, '(none)') = ? AND (input_tokens IS NOT NULL OR output_tokens IS NOT NULL)`,
			now.Add(-7*24*time.Hour), m.Model).Scan(&in, &out, &cache); err != nil {
			t.Fatal(err)
		}
		if m.InputTokens != in || m.OutputTokens != out || m.CacheRead != cache {
			t.Errorf("model %s: %d input, %d output, %d cache read tokens; want %d, %d, %d", m.Model, m.InputTokens, m.OutputTokens, m.CacheRead, in, out, cache)
		}
	}
	for _, d := range r.ByDay {
		if d.Tokens < 0 || d.Tokens > 1_000_000 {
			t.Errorf("%s on %s: %d tokens", d.Model, d.Day, d.Tokens)
		}
	}
}

// Parent ids are as sent, and bogus ones can make an operation its own
// parent, or two operations each other's. An operation is left out of
// the sums for a descendant's usage (README: usage counts once per
// trace), and one in such a cycle is no descendant of the others: each
// operation's usage still counts once, none is lost. Before, the cycle
// made each its own descendant and every one of them was left out.
func TestUsageInAParentCycleCountsOnce(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	// trace-1: a chat that is its own parent. trace-2: chats b and c,
	// each the other's parent, and an agent d above neither. trace-3:
	// an agent a whose chat b is its parent and child (its usage the
	// chat's), under no cycle of the chat's own: trace-3 is the plain
	// case, a above b.
	for i, r := range []struct {
		trace, span, parent, op string
		in                      int64
	}{
		{"trace-1", "a", "a", "chat", 100},
		{"trace-2", "b", "c", "chat", 200},
		{"trace-2", "c", "b", "chat", 300},
		{"trace-2", "d", "", "invoke_agent", 0},
		{"trace-3", "a", "", "invoke_agent", 400},
		{"trace-3", "b", "a", "chat", 400},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', ?, ?, nullif(?, ''), CAST(? AS TIMESTAMP), 10, ?, 'openai', 'gpt-4o', 'ok', nullif(?, 0), nullif(?, 0), nullif(?, 0),
			CAST(? AS DECIMAL(18,12)) / 1000000, 'otlp', 0, ?, 0)`,
			r.trace, r.span, r.parent, start, r.op, r.in, r.in, 2*r.in, r.in, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// Each chat's usage once: 100 + 200 + 300 + 400 (trace-3's agent's
	// 400 is its chat's).
	if r.Operations != 6 || r.InputTokens != 1000 || r.OutputTokens != 1000 || r.CostUSD != "0.001000000000" {
		t.Errorf("totals: %d operations, %d input and %d output tokens, cost %s; want 6, 1000, 1000, 0.001000000000",
			r.Operations, r.InputTokens, r.OutputTokens, r.CostUSD)
	}
	got := map[string]int64{}
	for _, tc := range r.Traces {
		got[tc.TraceID] = tc.Tokens
	}
	if got["trace-1"] != 200 || got["trace-2"] != 1000 || got["trace-3"] != 800 {
		t.Errorf("tokens by trace %v, want trace-1 200, trace-2 1000, trace-3 800", got)
	}
}

// emptyOperations is an empty genai_operations with the columns tracelake
// loads.
func emptyOperations(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var defs []string
	for _, c := range duckdb.TypedColumns(&genai.Table) {
		defs = append(defs, sqltext.Ident(c.Name)+" "+c.Type)
	}
	if _, err := db.Exec("CREATE TABLE genai_operations (" + strings.Join(defs, ", ") + ")"); err != nil {
		t.Fatal(err)
	}
	return db
}

// A span whose span id is all zero (invalid in OTLP, but stored: its id
// is null) has no identity to tell copies by. The report counted each
// operation once by (tenant, trace, span id), and a PARTITION BY puts
// every null together: two such operations of one trace were one, the
// other's usage and cost gone. Such operations are told apart by what
// they are (a client's retry of one still counts once).
func TestOperationsWithoutSpanIDAreNotOne(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	for i, r := range []struct {
		name    string
		in      int64
		koffset int
	}{
		{"chat a", 100, 1},
		{"chat b", 200, 2},
		{"chat b", 200, 3}, // chat b again: a client's retry
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, start_time, duration_ms, span_name, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', 'trace-1', NULL, CAST(? AS TIMESTAMP), 10, ?, 'chat', 'openai', 'gpt-4o', 'ok', ?, 0, ?,
			CAST(? AS DECIMAL(18,12)) / 1000000, 'otlp', 0, ?, ?)`, start, r.name, r.in, r.in, r.in, r.koffset, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.Operations != 2 || r.InputTokens != 300 || r.CostUSD != "0.000300000000" {
		t.Errorf("two operations without a span id (one sent twice): %d operations, %d input tokens, cost %s; want 2, 300, 0.000300000000",
			r.Operations, r.InputTokens, r.CostUSD)
	}
}

// A span without a start time (OTLP's 0: unset) is stored with a null
// start_time. A window (--since 7d) cannot place it, but the report of
// everything (--since all) must count it: it left out every such
// operation, its usage and its cost. It has no day to be drawn on.
func TestReportOfEverythingCountsOperationsWithoutStart(t *testing.T) {
	db := emptyOperations(t)
	for i, start := range []string{now.Add(-time.Hour).Format("2006-01-02 15:04:05"), ""} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', 'trace-1', ?, CAST(nullif(?, '') AS TIMESTAMP), 10, 'chat', 'openai', 'gpt-4o', 'ok', 100, 0, 100,
			0.0001, 'otlp', 0, ?, 0)`, fmt.Sprintf("s%d", i), start, i); err != nil {
			t.Fatal(err)
		}
	}
	all, err := Build(context.Background(), db, Options{Table: "genai_operations", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if all.Operations != 2 || all.InputTokens != 200 || all.CostUSD != "0.000200000000" || len(all.Models) != 1 || all.Models[0].Operations != 2 {
		t.Errorf("everything: %d operations, %d input tokens, cost %s, models %+v; want 2, 200, 0.000200000000, gpt-4o's 2",
			all.Operations, all.InputTokens, all.CostUSD, all.Models)
	}
	if len(all.ByDay) != 1 || all.ByDay[0].Tokens != 100 {
		t.Errorf("by day %+v, want the one operation with a start on its day", all.ByDay)
	}
	week, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if week.Operations != 1 {
		t.Errorf("the last 7 days: %d operations, want the one with a start", week.Operations)
	}
}

// The report's costs are exact decimals (DECIMAL sums as text), shown
// rounded: rounded through a float64 they took the binary value's side of
// a half (2.675 is 2.67499999… as a double: $2.67).
func TestMoneyRoundsTheDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"2.675000000000":    "$2.68",
		"1.005000000000":    "$1.01",
		"0.123450000000":    "$0.1235",
		"0.000049999999":    "$0.0000",
		"1234567.994999999": "$1234567.99",
		"12.000000000000":   "$12.00",
		"0.000000000000":    "$0.0000",
	} {
		if got := money(in); got != want {
			t.Errorf("money(%s) = %s, want %s", in, got, want)
		}
	}
}

// Strands Agents (strands-agents/sdk-python, telemetry/tracer.py) nests
// its model calls under an event-loop cycle span that no convention marks
// as an operation: invoke_agent (end_agent_span: gen_ai.usage.* set to
// the run's accumulated usage) → execute_event_loop_cycle (only
// event_loop.cycle_id) → chat (end_model_invoke_span: the call's usage).
// The agent's usage is its chats' sum, as in
// TestAgentUsageNotCountedTwiceWithItsChats, and must count once; found
// only from operation to operation, the chats are no descendants of the
// agent and the trace's tokens count twice.
func TestStrandsAgentUsageNotCountedTwiceThroughItsCycleSpans(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	// Spans x and y are the two cycles (otel_spans only): b is x's chat,
	// c is y's.
	for i, r := range []struct {
		span, parent, op string
		in, out          int64
	}{
		{"a", "", "invoke_agent", 1500, 300},
		{"b", "x", "chat", 1000, 200},
		{"c", "y", "chat", 500, 100},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, ktopic, kpartition, koffset, kindex)
			VALUES ('t', 'trace-1', ?, nullif(?, ''), CAST(? AS TIMESTAMP), 10, ?, 'strands-agents', 'us.anthropic.claude-sonnet-4-20250514-v1:0', 'ok', ?, ?, ?, 'otlp', 0, 1, ?)`,
			r.span, r.parent, start, r.op, r.in, r.out, r.in+r.out, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 1500 || r.OutputTokens != 300 {
		t.Errorf("report totals: input %d output %d, want 1500 300 (the agent's usage is its chats', reached through its cycle spans)", r.InputTokens, r.OutputTokens)
	}
}

// Two model calls of a trace running at once, one within the other's
// time, are each their own usage; an agent with usage and no model call
// within its time keeps its own (only a model call with usage within an
// agent, chain or workflow rolls it up).
func TestOverlappingModelCallsEachCount(t *testing.T) {
	db := emptyOperations(t)
	at := func(d time.Duration) string { return now.Add(-time.Hour + d).Format("2006-01-02 15:04:05.000") }
	for i, r := range []struct {
		trace, span, op, start string
		duration, in, out      int64
	}{
		{"trace-1", "long", "chat", at(0), 10_000, 1000, 200},
		{"trace-1", "short", "chat", at(2 * time.Second), 1_000, 500, 100},
		{"trace-2", "agent", "invoke_agent", at(0), 1_000, 70, 30},
		{"trace-2", "later", "chat", at(5 * time.Second), 1_000, 7, 3},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, ktopic, kpartition, koffset, kindex)
			VALUES ('t', ?, ?, CAST(? AS TIMESTAMP), ?, ?, 'openai', 'gpt-4o', 'ok', ?, ?, ?, 'otlp', 0, 1, ?)`,
			r.trace, r.span, r.start, r.duration, r.op, r.in, r.out, r.in+r.out, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 1577 || r.OutputTokens != 333 {
		t.Errorf("report totals: input %d output %d, want 1577 333 (both calls, and the agent with no call within it)", r.InputTokens, r.OutputTokens)
	}
}

// A model call whose parent is an operation belongs to that operation's
// usage (found by parent): it says nothing of another agent that runs at
// the same time. A remote agent (an invoke_agent client span with the
// service's usage and no model calls of its own in the trace) running
// beside a local agent and its chat kept its usage; rolled up by the
// chat's start within its time, its usage was lost. By hand: the local
// agent's 1000/100 is its chat's and counts once; the remote agent's
// 300/30 counts: 1300/130.
func TestConcurrentAgentNotRolledUpByAnotherAgentsChat(t *testing.T) {
	db := emptyOperations(t)
	at := func(d time.Duration) string { return now.Add(-time.Hour + d).Format("2006-01-02 15:04:05.000") }
	for i, r := range []struct {
		span, parent, op, start string
		duration, in, out       int64
	}{
		{"local", "", "invoke_agent", at(0), 10_000, 1000, 100},
		{"local-chat", "local", "chat", at(time.Second), 2_000, 1000, 100},
		{"remote", "", "invoke_agent", at(0), 10_000, 300, 30},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, ktopic, kpartition, koffset, kindex)
			VALUES ('t', 'trace-1', ?, nullif(?, ''), CAST(? AS TIMESTAMP), ?, ?, 'openai', 'gpt-4o', 'ok', ?, ?, ?, 'otlp', 0, 1, ?)`,
			r.span, r.parent, r.start, r.duration, r.op, r.in, r.out, r.in+r.out, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 1300 || r.OutputTokens != 130 {
		t.Errorf("report totals: input %d output %d, want 1300 130 (the local agent's chat once, the remote agent's own usage)", r.InputTokens, r.OutputTokens)
	}
}
