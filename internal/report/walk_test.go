package report

import (
	"context"
	"testing"
	"time"
)

// The report runs inside the served process (/report) and tracelake
// report: the rollups and the wrapper rule must cost about one step per
// operation whatever the shape of the traces. Following each operation's
// parents to the root (a recursive query per operation) cost the square
// of a chain's depth: a same-model chain of 2,000 operations took seconds,
// one of 50,000 (a bogus exporter, or a loop of calls each under the one
// before) kept the report from finishing. A chain of 50,000 embeddings
// (each its child's wrapper, the last the call with the usage) and a cycle
// of 50,000 (each operation the parent of the next, the last the first's)
// are reported well within the deadline; the quadratic walk cannot finish
// them in it.
func TestDeepChainsReportWithinDeadline(t *testing.T) {
	const depth = 50_000
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	// chain: s0 the root, s(i) under s(i-1), the last with the usage.
	// cycle: c(i) under c(i-1), c0 under the last; every one with usage.
	if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, total_tokens, ktopic, kpartition, koffset, kindex)
		SELECT 't', 'chain', 's' || i, CASE WHEN i > 0 THEN 's' || (i - 1) END, CAST(? AS TIMESTAMP), 10, 'embeddings',
			'openai', 'text-embedding-3-small', 'ok', CASE WHEN i = ? - 1 THEN 7 END, CASE WHEN i = ? - 1 THEN 7 END, 'otlp', 0, i, 0
		FROM range(?) r(i)
		UNION ALL
		SELECT 't', 'cycle', 'c' || i, 'c' || ((i + ? - 1) % ?), CAST(? AS TIMESTAMP), 10, 'chat',
			'openai', 'gpt-4o', 'ok', 3, 3, 'otlp', 0, ? + i, 0
		FROM range(?) r(i)`, start, depth, depth, depth, depth, depth, start, depth, depth); err != nil {
		t.Fatal(err)
	}
	// Generous: the linear rule takes well under a second here (a few
	// under -race); the quadratic walk takes hours.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	began := time.Now()
	r, err := Build(ctx, db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatalf("report of a chain and a cycle of %d operations each: %v (after %s)", depth, err, time.Since(began))
	}
	// The chain is one call (every operation above it its wrapper); in
	// the cycle each operation is its own call, none another's
	// descendant, each usage counted.
	if r.Operations != 1+depth || r.InputTokens != 7+3*depth {
		t.Errorf("%d operations, %d input tokens; want %d, %d", r.Operations, r.InputTokens, 1+depth, 7+3*depth)
	}
}
