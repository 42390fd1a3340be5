package report

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
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

// referenceRollUp is the rollups and the wrapper rule as they were written
// in SQL (recursive queries following each operation's parents to its
// root, quadratic in a chain's depth): the reference rollUp is compared
// with on small traces.
func referenceRollUp(ctx context.Context, db *sql.Tx) error {
	same := func(a, b string) string {
		return a + ".tenant_id = " + b + ".tenant_id AND " + a + ".trace_id = " + b + ".trace_id"
	}
	var nulled []string
	for _, c := range usage {
		nulled = append(nulled, fmt.Sprintf("CASE WHEN rolled_up THEN NULL ELSE %[1]s END AS %[1]s", c))
	}
	for _, q := range []string{"CREATE TEMPORARY TABLE reference_operations AS WITH RECURSIVE ops AS (SELECT * FROM " + opsTable + "), " +
		" ancestors AS (SELECT c.span_id AS origin, p.tenant_id, p.trace_id, p.span_id, p.parent_span_id FROM ops c JOIN ops p ON " + same("p", "c") +
		" AND p.span_id = c.parent_span_id WHERE c.input_tokens IS NOT NULL OR c.output_tokens IS NOT NULL" +
		" UNION SELECT a.origin, p.tenant_id, p.trace_id, p.span_id, p.parent_span_id FROM ancestors a JOIN ops p ON " + same("p", "a") +
		" AND p.span_id = a.parent_span_id)," +
		" rolled AS (SELECT DISTINCT a.tenant_id, a.trace_id, a.span_id FROM ancestors a ANTI JOIN ancestors b ON " + same("b", "a") +
		" AND b.origin = a.span_id AND b.span_id = a.origin" +
		" UNION SELECT o.tenant_id, o.trace_id, o.span_id FROM ops o JOIN ops c ON " + same("c", "o") +
		" AND c.span_id <> o.span_id AND c.start_time BETWEEN o.start_time AND o.start_time + o.duration_ms * INTERVAL 1 MILLISECOND" +
		" ANTI JOIN ops p ON " + same("p", "c") + " AND p.span_id = c.parent_span_id" +
		" WHERE o.operation IN (" + aggregateOperations + ") AND (c.operation IS NULL OR c.operation NOT IN (" + aggregateOperations + "))" +
		" AND (o.input_tokens IS NOT NULL OR o.output_tokens IS NOT NULL) AND (c.input_tokens IS NOT NULL OR c.output_tokens IS NOT NULL))," +
		" wrapping AS (SELECT o.tenant_id, o.trace_id, o.span_id, o.parent_span_id, c.span_id AS child FROM ops o JOIN ops c ON " + same("c", "o") +
		" AND c.parent_span_id = o.span_id AND c.span_id <> o.span_id AND c.operation = o.operation AND " + wrapModel("c") + " = " + wrapModel("o") +
		" LEFT JOIN rolled r ON " + same("r", "o") + " AND r.span_id = o.span_id" +
		" WHERE o.operation NOT IN (" + aggregateOperations + ") AND (r.span_id IS NOT NULL OR (o.input_tokens IS NULL AND o.output_tokens IS NULL)))," +
		" above AS (SELECT tenant_id, trace_id, span_id AS origin, parent_span_id AS span_id FROM wrapping" +
		" UNION SELECT a.tenant_id, a.trace_id, a.origin, p.parent_span_id FROM above a JOIN ops p ON " + same("p", "a") + " AND p.span_id = a.span_id)," +
		" wrappers AS (SELECT DISTINCT w.tenant_id, w.trace_id, w.span_id FROM wrapping w ANTI JOIN above a ON " + same("a", "w") +
		" AND a.origin = w.span_id AND a.span_id = w.child)" +
		" SELECT * EXCLUDE (rolled_up) REPLACE (" + strings.Join(nulled, ", ") + ") FROM (SELECT ops.*, r.span_id IS NOT NULL AS rolled_up FROM ops LEFT JOIN rolled r ON " +
		same("r", "ops") + " AND r.span_id = ops.span_id ANTI JOIN wrappers w ON " + same("w", "ops") + " AND w.span_id = ops.span_id)",
		"DELETE FROM " + opsTable,
		"INSERT INTO " + opsTable + " SELECT * FROM reference_operations",
		"DROP TABLE reference_operations",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("reference rollup: %w", err)
		}
	}
	return nil
}

// sameAsReference builds the report of db with rollUp and with
// referenceRollUp and says how they differ.
func sameAsReference(t *testing.T, db *sql.DB, what string) {
	t.Helper()
	opt := Options{Table: "genai_operations", Now: now}
	got, err := Build(context.Background(), db, opt)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want, err := build(context.Background(), db, opt, referenceRollUp)
	if err != nil {
		t.Fatalf("%s: reference: %v", what, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: report\n%+v\nwant (the rule as written in SQL)\n%+v", what, *got, *want)
	}
}

// The rules worked out in one pass report what they did as recursive
// queries: on the report's fixtures, and on random traces of operations,
// calls and wrappers of a few models, agents and chains, spans without an
// id or a parent, parents missing, an operation its own parent, cycles of
// two or more, copies of spans, and model calls starting within agents.
//
// The walk reads a few operations at a time here, so that traces lie
// across its batches' bounds.
func TestRollUpAsTheReference(t *testing.T) {
	defer func(n int64) { walkBatch = n }(walkBatch)
	walkBatch = 7
	sameAsReference(t, operations(t), "fixture")
	db := emptyOperations(t)
	start := now.Add(-time.Hour)
	for seed := range uint64(120) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		pick := func(of ...string) any {
			if s := of[rnd.IntN(len(of))]; s != "" {
				return s
			}
			return nil
		}
		if _, err := db.Exec("DELETE FROM genai_operations"); err != nil {
			t.Fatal(err)
		}
		spans := 2 + rnd.IntN(40)
		// A third of the traces are of one operation and model (chains
		// and cycles of wrappers), a third of agents and their calls.
		operation := func() any {
			return pick("chat", "chat", "embeddings", "embeddings", "invoke_agent", "chain", "task", "")
		}
		model := func() any { return pick("a", "a", "b", "") }
		switch seed % 3 {
		case 0:
			operation = func() any { return pick("embeddings", "embeddings", "embeddings", "chat") }
			model = func() any { return pick("a", "a", "a", "") }
		case 1:
			operation = func() any { return pick("invoke_agent", "chat", "chat", "execute_tool") }
		}
		id := func() any {
			if rnd.IntN(12) == 0 {
				return nil
			}
			return fmt.Sprintf("s%d", rnd.IntN(spans+2)) // some never a span's
		}
		for i := range spans {
			span := fmt.Sprintf("s%d", i)
			if rnd.IntN(15) == 0 {
				span = ""
			}
			op := operation()
			var parent any
			switch rnd.IntN(8) {
			case 0:
				parent = span // its own parent
			case 1, 2:
				parent = id() // anywhere: later spans make cycles
			case 3:
				parent = nil
			default:
				if i > 0 {
					parent = fmt.Sprintf("s%d", rnd.IntN(i))
				}
			}
			if parent == "" || seed%3 == 1 && op == "invoke_agent" {
				parent = nil // agents beside each other's calls
			}
			var in, out, total, cost any
			if rnd.IntN(2) == 0 {
				in, total, cost = rnd.IntN(100), rnd.IntN(120), fmt.Sprintf("0.%04d", rnd.IntN(10000))
			}
			if rnd.IntN(4) == 0 {
				out = rnd.IntN(50)
			}
			if rnd.IntN(6) == 0 {
				total, cost = rnd.IntN(120), fmt.Sprintf("0.%04d", rnd.IntN(10000)) // without tokens
			}
			var began any
			if rnd.IntN(10) != 0 {
				began = start.Add(time.Duration(rnd.IntN(20)) * time.Second).Format("2006-01-02 15:04:05")
			}
			var ms any
			if rnd.IntN(10) != 0 {
				ms = []float64{0, 999.9995, 1000, 2500, 8000}[rnd.IntN(5)]
			}
			copies := 1
			if rnd.IntN(10) == 0 {
				copies = 2
			}
			for c := range copies {
				if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
					request_model, response_model, status, input_tokens, output_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
					VALUES (?, ?, nullif(?, ''), ?, CAST(? AS TIMESTAMP), ?, ?, ?, ?, ?, ?, ?, ?, CAST(? AS DECIMAL(18,12)), 'otlp', 0, ?, 0)`,
					pick("t", "t", "t", "u"), pick("x", "x", "y", ""), span, parent, began, ms,
					op, model(), pick("a", "b", ""), pick("ok", "ok", "error"), in, out, total, cost, i*2+c); err != nil {
					t.Fatal(err)
				}
			}
		}
		sameAsReference(t, db, fmt.Sprintf("seed %d", seed))
	}
}

// Bogus parent ids make cycles, which the walk must end at and the
// wrapper rule must not lose: an operation its own parent, two each
// other's, three in a ring with a call under one of them. An operation
// whose child is also its ancestor wraps no call (each would wrap the
// other and both be lost); one of the ring with a call under it that is
// in no cycle wraps that call.
func TestWrappersInParentCycles(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	for i, r := range []struct {
		trace, span, parent string
		in, total           int64
	}{
		{"self", "e", "e", 0, 0},
		{"two", "x", "y", 0, 0},
		{"two", "y", "x", 0, 0},
		{"ring", "p", "r", 0, 0},
		{"ring", "q", "p", 0, 0},
		{"ring", "r", "q", 0, 0},
		{"ring", "h", "p", 5, 5},
		// A total and cost without tokens in a cycle with usage: rolled
		// up by it, as the rule's queries did (only an operation with
		// tokens is not).
		{"totals", "u", "v", 10, 10},
		{"totals", "v", "u", 0, 3},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, total_tokens, total_cost_usd, ktopic, kpartition, koffset, kindex)
			VALUES ('t', ?, ?, ?, CAST(? AS TIMESTAMP), 10, 'embeddings', 'openai', 'text-embedding-3-small', 'ok',
			nullif(?, 0), nullif(?, 0), CAST(nullif(?, 0) AS DECIMAL(18,12)) / 1000000, 'otlp', 0, ?, 0)`, r.trace, r.span, r.parent, start, r.in, r.total, r.total, i); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Build(ctx, db, Options{Table: "genai_operations", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// self 1, two 2, ring: q, r and the call h (p wraps h), totals 2.
	if r.Operations != 8 || r.InputTokens != 15 || r.CostUSD != "0.000015000000" {
		t.Errorf("%d operations, %d input tokens, cost %s; want 8, 15, 0.000015000000", r.Operations, r.InputTokens, r.CostUSD)
	}
	sameAsReference(t, db, "cycles")
}

// The report runs inside the served process, whose memory is bounded
// (README, max_inflight_bytes + memory_limit): the rollups and the
// wrapper rule hold in Go memory the operations of a batch of traces and
// of the largest trace, never every operation of the window (a week of a
// busy tenant is tens of millions, gigabytes of Go heap). A window of
// 300,000 traces of one call and one trace of 5,000 (a same-model chain,
// each operation its child's wrapper) is reported with at most a batch
// (the walk reads 65,536 at a time) and that trace held at once.
func TestRollUpHoldsABatchOfTracesAtATime(t *testing.T) {
	const traces, largest = 300_000, 5_000
	db := emptyOperations(t)
	start := now.Add(-time.Hour).Format("2006-01-02 15:04:05")
	if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, total_tokens, ktopic, kpartition, koffset, kindex)
		SELECT 't', 'trace-' || i, 's', NULL, CAST(? AS TIMESTAMP), 10, 'chat', 'openai', 'gpt-4o', 'ok', 2, 2, 'otlp', 0, i, 0
		FROM range(?) r(i)
		UNION ALL
		SELECT 't', 'chain', 's' || i, CASE WHEN i > 0 THEN 's' || (i - 1) END, CAST(? AS TIMESTAMP), 10, 'embeddings',
			'openai', 'text-embedding-3-small', 'ok', CASE WHEN i = ? - 1 THEN 7 END, CASE WHEN i = ? - 1 THEN 7 END, 'otlp', 1, i, 0
		FROM range(?) r(i)`, start, traces, start, largest, largest, largest); err != nil {
		t.Fatal(err)
	}
	most := 0
	heldOps = func(n int) { most = max(most, n) }
	defer func() { heldOps = nil }()
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Since: 7 * 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if r.Operations != traces+1 || r.InputTokens != 2*traces+7 {
		t.Errorf("%d operations, %d input tokens; want %d, %d", r.Operations, r.InputTokens, traces+1, 2*traces+7)
	}
	if budget := 1<<16 + largest; most > budget {
		t.Errorf("the walk held %d operations at once (of %d in the window); want at most %d (a batch and the largest trace)", most, traces+largest, budget)
	}
}

// A parent is its operation's trace's and tenant's: two tenants sharing a
// trace id are two traces (each agent rolled up by its own chat, neither
// by the other's), and an operation whose parent id is a span of another
// trace has no parent operation. The time rule takes a call starting at
// its agent's end (the end is within), and not an agent of unknown
// duration (its end unknown, both usages count).
func TestRollUpTenantsTracesAndTimeBounds(t *testing.T) {
	db := emptyOperations(t)
	start := now.Add(-time.Hour)
	for i, r := range []struct {
		tenant, trace, span, parent, op string
		at                              time.Duration
		ms                              any
		in                              int64
	}{
		// shared: t's agent a rolled up by its chat c; u's agent a by its
		// own chat c (a join by trace id alone would give each chat both
		// agents as parents).
		{"t", "shared", "a", "", "invoke_agent", 0, 10_000.0, 100},
		{"t", "shared", "c", "a", "chat", time.Second, 10.0, 40},
		{"u", "shared", "a", "", "invoke_agent", 0, 10_000.0, 7},
		{"u", "shared", "c", "a", "chat", time.Second, 10.0, 3},
		// u's agent b in the same trace id as t's call d (no parent
		// operation, starting within b): not b's, another tenant's trace.
		{"u", "shared", "b", "", "invoke_agent", time.Minute, 10_000.0, 11},
		{"t", "shared", "d", "none", "chat", time.Minute + time.Second, 10.0, 5},
		// edge: the call starts at the agent's end.
		{"t", "edge", "g", "", "invoke_agent", 0, 1_000.0, 50},
		{"t", "edge", "h", "none", "chat", time.Second, 10.0, 20},
		// nodur: the agent's duration is unknown.
		{"t", "nodur", "g", "", "invoke_agent", 0, nil, 30},
		{"t", "nodur", "h", "none", "chat", 0, 10.0, 2},
		// p2's call under p1's agent id: another trace's span.
		{"t", "p1", "a", "", "invoke_agent", 0, 10.0, 60},
		{"t", "p2", "c", "a", "chat", 0, 10.0, 6},
	} {
		if _, err := db.Exec(`INSERT INTO genai_operations (tenant_id, trace_id, span_id, parent_span_id, start_time, duration_ms, operation,
			provider, request_model, status, input_tokens, total_tokens, ktopic, kpartition, koffset, kindex)
			VALUES (?, ?, ?, nullif(?, ''), CAST(? AS TIMESTAMP), ?, ?, 'openai', 'gpt-4o', 'ok', ?, ?, 'otlp', 0, ?, 0)`,
			r.tenant, r.trace, r.span, r.parent, start.Add(r.at).Format("2006-01-02 15:04:05"), r.ms, r.op, r.in, r.in, i); err != nil {
			t.Fatal(err)
		}
	}
	r, err := Build(context.Background(), db, Options{Table: "genai_operations", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// shared 40+3+11+5, edge 20, nodur 30+2, p1 and p2 60+6.
	if want := int64(40 + 3 + 11 + 5 + 20 + 30 + 2 + 60 + 6); r.Operations != 12 || r.InputTokens != want {
		t.Errorf("%d operations, %d input tokens; want 12, %d", r.Operations, r.InputTokens, want)
	}
	sameAsReference(t, db, "tenants, traces and time bounds")
}
