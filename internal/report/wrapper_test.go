package report

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// @ai-sdk/otel (vercel/ai, packages/otel/src/open-telemetry.ts) writes for
// each embed and embedMany a root span "embeddings {model}"
// (onEmbedOperationStart) and under it one span per provider call
// (onEmbedStart: embedMany makes one per chunk of values), both with
// gen_ai.operation.name embeddings, gen_ai.provider.name and
// gen_ai.request.model, kind CLIENT, scope gen_ai; only the calls get
// gen_ai.usage.input_tokens (onEmbedEnd, when the provider returned a
// finite count: @ai-sdk/google's embeddings return none), and a failure
// sets an error status on the calls and the root alike. rerank has the
// same shape (root and call both rerank, no usage). Older releases put
// the calls' summed tokens on the root too. The mapper reads one span at a
// time and cannot tell the root from its call (without usage they are the
// same span to it): each is a genai_operations row. Each was counted as an
// operation: an embed was two, its root's row a second operation without
// tokens, a failed embed two errors (an older release's root was already
// left out of the sums, as any operation above calls with tokens, but
// still counted).
// The report counts one operation per provider call: an operation whose
// child operation is the same operation of the same model is that call's
// wrapper, and counts neither as an operation nor its usage.
func TestWrapperOfTheSameOperationCountsOnce(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	const small, gemini = "text-embedding-3-small", "gemini-embedding-001"
	// text-embedding-3-small: $0.02/M input tokens.
	cost := func(in int64) string { return fmt.Sprintf("%d", in*2) } // in 1e-8 USD
	rows := []struct {
		trace, span, parent, op, provider, model, agent, status string
		in                                                      int64 // 0: no usage
	}{
		// embed: the root and its one call.
		{"embed", "r", "", "embeddings", "openai", small, "", "ok", 0},
		{"embed", "c", "r", "embeddings", "openai", small, "", "ok", 14},
		// embedMany of two chunks.
		{"many", "r", "", "embeddings", "openai", small, "", "ok", 0},
		{"many", "c1", "r", "embeddings", "openai", small, "", "ok", 28},
		{"many", "c2", "r", "embeddings", "openai", small, "", "ok", 14},
		// @ai-sdk/google: no usage on the call either.
		{"google", "r", "", "embeddings", "gcp.gemini", gemini, "", "ok", 0},
		{"google", "c", "r", "embeddings", "gcp.gemini", gemini, "", "ok", 0},
		// A failed embed: the root and its call both failed.
		{"failed", "r", "", "embeddings", "openai", small, "", "error", 0},
		{"failed", "c", "r", "embeddings", "openai", small, "", "error", 0},
		// An older release: the calls' sum on the root too.
		{"older", "r", "", "embeddings", "openai", small, "", "ok", 42},
		{"older", "c1", "r", "embeddings", "openai", small, "", "ok", 28},
		{"older", "c2", "r", "embeddings", "openai", small, "", "ok", 14},
		// rerank: root and call, no usage.
		{"rerank", "r", "", "rerank", "cohere", "rerank-v3.5", "", "ok", 0},
		{"rerank", "c", "r", "rerank", "cohere", "rerank-v3.5", "", "ok", 0},
		// Not wrappers: an agent invoking a sub-agent on the same model
		// (two runs, each an operation), and an embed's call under a
		// chat of another operation.
		{"agents", "a", "", "invoke_agent", "openai", "gpt-4o", "planner", "ok", 0},
		{"agents", "b", "a", "invoke_agent", "openai", "gpt-4o", "writer", "ok", 0},
		{"agents", "e", "b", "embeddings", "openai", small, "", "ok", 7},
	}
	for i, r := range rows {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, agent_name, status, input_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', ?, ?, nullif(?, ''), CAST(? AS TIMESTAMP), 10, ?, ?, ?, nullif(?, ''), ?, nullif(?, 0), nullif(?, 0),
			CASE WHEN ? = ? AND ? > 0 THEN CAST(? AS DECIMAL(18,12)) / 100000000 END, 'otlp', 0, ?, 0)`,
			r.trace, r.span, r.parent, start, r.op, r.provider, r.model, r.agent, r.status, r.in, r.in,
			r.model, small, r.in, cost(r.in), i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// One operation per provider call: embed 1, embedMany 2, google 1,
	// failed 1, older 2, rerank 1; the agents' trace 3.
	const in = 14 + 28 + 14 + 28 + 14 + 7
	if r.Operations != 11 || r.Errors != 1 || r.InputTokens != in || r.CostUSD != fmt.Sprintf("0.%012d", in*2*10000) {
		t.Errorf("totals: %d operations, %d errors, %d input tokens, cost %s; want 11, 1, %d, 0.%012d (one operation per provider call)",
			r.Operations, r.Errors, r.InputTokens, r.CostUSD, in, in*2*10000)
	}
	byOp := map[string]OperationStats{}
	for _, o := range r.ByOperation {
		byOp[o.Operation] = o
	}
	if e := byOp["embeddings"]; e.Count != 8 || e.Errors != 1 {
		t.Errorf("embeddings: %d operations, %d errors; want 8, 1", e.Count, e.Errors)
	}
	if n := byOp["rerank"].Count; n != 1 {
		t.Errorf("rerank: %d operations, want 1", n)
	}
	if n := byOp["invoke_agent"].Count; n != 2 {
		t.Errorf("invoke_agent: %d operations, want 2 (an agent and its sub-agent are two runs)", n)
	}
	for _, m := range r.Models {
		if m.Model == small && (m.Operations != 6 || m.InputTokens != in) {
			t.Errorf("%s: %d operations with usage, %d input tokens; want 6, %d", small, m.Operations, m.InputTokens, in)
		}
	}
	for _, tc := range r.Traces {
		if tc.TraceID == "older" && (tc.Operations != 2 || tc.Tokens != 42) {
			t.Errorf("trace older: %d operations, %d tokens; want 2, 42 (its calls', not their sum again on the root)", tc.Operations, tc.Tokens)
		}
	}
}

// A wrapper's usage is left out because its calls carry it. Where no call
// under it carries any (the same call seen by two instrumentations of
// which only the outer one read the usage, or a provider's call without
// it under a root that was given the sum), the wrapper's usage is the
// only count of the call's tokens and cost: dropped with the wrapper, the
// call was in the report without them (a figure the report showed before
// wrappers were told apart).
func TestWrapperKeepsTheUsageNoCallOfItCarries(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	const model = "gpt-4o-mini"
	rows := []struct {
		trace, span, parent string
		in, out             int64 // 0: no usage
		cost                string
	}{
		// The outer span read the usage, the call under it none.
		{"outer", "w", "", 120, 30, "0.000036000000"},
		{"outer", "c", "w", 0, 0, ""},
		// A wrapper whose call has the usage (the sum repeated on the
		// wrapper): counted once, as the call's.
		{"both", "w", "", 50, 10, "0.000013500000"},
		{"both", "c", "w", 50, 10, "0.000013500000"},
	}
	for i, r := range rows {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', ?, ?, nullif(?, ''), CAST(? AS TIMESTAMP), 10, 'chat', 'openai', ?, 'ok', nullif(?, 0), nullif(?, 0), nullif(?, 0),
			CAST(nullif(?, '') AS DECIMAL(18,12)), 'otlp', 0, ?, 0)`,
			r.trace, r.span, r.parent, start, model, r.in, r.out, r.in+r.out, r.cost, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.InputTokens != 170 || r.OutputTokens != 40 || r.CostUSD != "0.000049500000" {
		t.Errorf("totals: %d input, %d output tokens, cost %s; want 170, 40, 0.000049500000 (the outer span's usage, which no call under it carries, counts)",
			r.InputTokens, r.OutputTokens, r.CostUSD)
	}
	if len(r.Models) != 1 || r.Models[0].InputTokens != 170 || r.Models[0].CostText != "0.000049500000" {
		t.Errorf("models %+v, want %s with 170 input tokens at 0.000049500000", r.Models, model)
	}
	traces := map[string]TraceCost{}
	for _, tc := range r.Traces {
		traces[tc.TraceID] = tc
	}
	if tc := traces["outer"]; tc.Tokens != 150 || tc.CostUSD != "0.000036000000" {
		t.Errorf("trace outer: %d tokens at %q, want 150 at 0.000036000000", tc.Tokens, tc.CostUSD)
	}
	if tc := traces["both"]; tc.Tokens != 60 || tc.Operations != 1 {
		t.Errorf("trace both: %d tokens, %d operations; want 60, 1 (the call's, its wrapper left out)", tc.Tokens, tc.Operations)
	}
}
