package report

import (
	"context"
	"testing"
	"time"
)

// BenchmarkReportLargeWindow builds the report over 200,000 operations:
// 40,000 traces of an agent and its four chats, each chat's usage rolled
// up from the agent's (report.go, Build).
func BenchmarkReportLargeWindow(b *testing.B) {
	db := emptyOperations(b)
	if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
		SELECT 't' || (i // 5 % 3), 'trace-' || (i // 5), 's' || i, CASE WHEN i % 5 = 0 THEN NULL ELSE 's' || (i - i % 5) END,
			TIMESTAMP '2026-11-30 12:00:00' - INTERVAL (i % 5000) MINUTE, 10, CASE WHEN i % 5 = 0 THEN 'invoke_agent' ELSE 'chat' END,
			'openai', 'gpt-4o', 'ok', 100, 10, 110, 0.00035, 'otlp', 0, i, 0 FROM range(200000) r(i)`); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
		if err != nil {
			b.Fatal(err)
		}
		// The agents' usage is their chats': 160,000 chats of 100 tokens.
		if r.Operations != 200000 || r.InputTokens != 16_000_000 {
			b.Fatalf("%d operations, %d input tokens; want 200000, 16000000", r.Operations, r.InputTokens)
		}
	}
}
