package report

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// rollUp applies the rollups and the wrapper rule to the report's
// operations (opsTable): it nulls the usage of the operations rolled up
// and deletes the wrappers.
//
// An operation with a descendant operation that has usage in its
// trace (an agent, chain or workflow span carrying the sum of its
// model calls: instrumentations set invoke_agent's usage to the
// run's) would count that usage twice with its descendants': its
// tokens and costs are left out of the sums (null in opsTable; its row
// in the table keeps them), and it still counts as an operation.
// Descendants are followed by parent_span_id from operation to
// operation. In a cycle (an operation its own parent, two each
// other's) each is the others' ancestor and descendant: such a
// descendant does not roll up an operation with usage, or every
// operation of the cycle would be left out and its usage lost.
//
// An agent, chain or workflow whose model calls hang under spans that
// are no operation (Strands Agents' execute_event_loop_cycle between
// invoke_agent and its chats) has no descendant operation by parent:
// it is rolled up too when a model call with usage of its trace starts
// within it. Only such aggregates are, never a model call: two calls
// of a trace may run at once, one within the other's time, each its
// own usage. Only a model call whose parent is no operation rolls up
// by time: one whose parent is an operation is that operation's
// (found by parent), and an agent running beside it (a remote agent
// with the service's usage and no calls of its own) keeps its usage.
//
// An operation whose child operation (by parent_span_id) is the same
// operation of the same model wraps that call: @ai-sdk/otel's embed,
// embedMany and rerank write a root span beside one span per provider
// call, both of the call's operation and model, the usage (if any) on
// the calls (older releases put their sum on the root too). Read one
// span at a time the two are alike (a call without usage or a failed
// one is the root's twin), so each is a row; the report counts the
// calls, and the wrapper neither as an operation nor for its usage,
// nor its error (its calls' own). It still takes part in the rollups
// above: it is its calls' parent operation. Agents, chains, workflows
// and tasks are never wrappers (a sub-agent on the agent's model is a
// run of its own), nor an operation whose child is also its ancestor
// (a cycle of bogus parent ids, where each would wrap the other and
// both be lost), nor one with usage that no operation under it carries
// (not rolled up): that usage is the call's only count, left out with
// the wrapper its tokens and cost were lost, so it counts as before.
//
// The rules are worked out here, in one pass over the operations, not in
// SQL: a recursive query follows each operation's parents to its root,
// which costs the square of a chain's depth (a same-model chain of 50,000
// operations, each its child's wrapper, did not finish in a minute), and
// the report runs inside the served process. Each operation has at most
// one parent (span ids are unique in a trace once copies are left out),
// so the operations and their parents are a forest whose roots may be
// cycles: taking off the operations without children, then those whose
// children are all off, visits each operation once, children before
// parents, and leaves exactly the cycles.
//
// The walk holds in Go memory the operations of a batch of whole traces
// (about walkBatch, and the rest of its last trace), never the window's
// (a week of a busy tenant is tens of millions of operations, gigabytes
// of heap in the served process, whose memory is bounded): a parent is
// only ever found in its operation's trace (same tenant_id and
// trace_id), so DuckDB writes the operations in the order of their
// traces and the walk reads them a batch of traces at a time, each batch
// walked and its results written to a temporary table before the next,
// then applied by one UPDATE and one DELETE. One trace of millions of
// spans is still held whole, ~200 bytes an operation with walk's index
// (a trace of 5 million, ~1 GB): the rule follows parents anywhere in a
// trace, so memory is bounded by the largest trace, not by the window.
func rollUp(ctx context.Context, db *sql.Tx) error {
	// The operations with a tenant and a trace, each trace numbered by
	// the operations before it (k, in the order of the traces' first
	// rowids; DuckDB's sort spills within its memory_limit) and written
	// in that order, so a batch's read skips the others' row groups; one
	// without either is no other's parent, child or neighbour in time
	// (SQL's null equals nothing): no rule applies to it. The end is
	// DuckDB's, as the rule was written in SQL: duration_ms is a DOUBLE,
	// its interval rounded to the microsecond. DuckDB finds each one's
	// parent (a hash join, once per operation) and numbers the traces: Go
	// reads no ids, which took most of the time.
	for _, q := range []string{"CREATE OR REPLACE TEMPORARY TABLE " + walkTable + " AS SELECT t.k, o.rowid AS row, t.trace," +
		" p.rowid AS parent, o.span_id IS NOT NULL AS id, coalesce(o.span_id IS NOT NULL AND o.operation = p.operation AND " + wrapModel("o") + " = " + wrapModel("p") + ", false) AS same_call," +
		" coalesce(o.operation IN (" + aggregateOperations + "), false) AS aggregate, o.input_tokens IS NOT NULL OR o.output_tokens IS NOT NULL AS usage," +
		" epoch_us(o.start_time) AS began, epoch_us(o.start_time + o.duration_ms * INTERVAL 1 MILLISECOND) AS ended" +
		" FROM " + opsTable + " o JOIN (SELECT *, sum(n) OVER (ORDER BY trace) - n AS k FROM (SELECT tenant_id, trace_id, min(rowid) AS trace, count(*) AS n FROM " + opsTable +
		" WHERE tenant_id IS NOT NULL AND trace_id IS NOT NULL GROUP BY ALL)) t ON t.tenant_id = o.tenant_id AND t.trace_id = o.trace_id" +
		" LEFT JOIN " + opsTable + " p ON p.tenant_id = o.tenant_id AND p.trace_id = o.trace_id AND p.span_id = o.parent_span_id ORDER BY t.k",
		"CREATE OR REPLACE TEMPORARY TABLE " + walkedTable + " (row BIGINT, wrapper BOOLEAN)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("number the operations by trace: %w", err)
		}
	}
	var total int64
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+walkTable).Scan(&total); err != nil {
		return fmt.Errorf("count the operations by trace: %w", err)
	}
	// A batch is the traces whose first operation is numbered in it:
	// whole traces, at most walkBatch operations and the rest of the
	// last trace (none when a trace larger than the batch started in the
	// one before).
	var ops []walkOp
	for from := int64(0); from < total; from += walkBatch {
		var err error
		if ops, err = readWalk(ctx, db, ops[:0], from, from+walkBatch); err != nil {
			return err
		}
		if heldOps != nil {
			heldOps(len(ops))
		}
		rolled, wrappers := walk(ops)
		if err := writeWalked(ctx, db, rolled, false); err != nil {
			return err
		}
		if err := writeWalked(ctx, db, wrappers, true); err != nil {
			return err
		}
	}
	set := make([]string, len(usage))
	for i, c := range usage {
		set[i] = c + " = NULL"
	}
	for _, q := range []string{"UPDATE " + opsTable + " SET " + strings.Join(set, ", ") + " WHERE rowid IN (SELECT row FROM " + walkedTable + " WHERE NOT wrapper)",
		"DELETE FROM " + opsTable + " WHERE rowid IN (SELECT row FROM " + walkedTable + " WHERE wrapper)",
		"DROP TABLE " + walkTable,
		"DROP TABLE " + walkedTable,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("leave out the usage rolled up and the wrappers: %w", err)
		}
	}
	return nil
}

// walkBatch is about how many operations the walk reads at once (~10
// MB); a test makes it small so that traces lie across batches' bounds.
var walkBatch int64 = 1 << 16

// walkTable and walkedTable are rollUp's temporary tables: the operations
// as walk reads them, numbered in the order of their traces; the rows
// rolled up and the wrappers.
const (
	walkTable   = "tracelake_report_walk"
	walkedTable = "tracelake_report_walked"
)

// writeWalked writes rows to walkedTable, as wrappers or as rolled up.
func writeWalked(ctx context.Context, db *sql.Tx, rows []int64, wrapper bool) error {
	if len(rows) == 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+walkedTable+" SELECT unnest(?::BIGINT[]), ?", rows, wrapper); err != nil {
		return fmt.Errorf("write %d operations rolled up or wrappers: %w", len(rows), err)
	}
	return nil
}

// walkOp is an operation as the rollups and the wrapper rule read it.
type walkOp struct {
	row int64 // rowid in opsTable
	// trace numbers its (tenant_id, trace_id), null if either is null:
	// such an operation is no other's neighbour in time (SQL's null
	// equals nothing).
	trace sql.NullInt64
	// parent is the rowid of its parent operation (by parent_span_id in
	// its trace), null for none.
	parent sql.NullInt64
	id     bool // span_id is not null
	// sameCall: it has an id, and its operation and model (wrapModel)
	// are its parent's.
	sameCall   bool
	aggregate  bool          // one of aggregateOperations
	usage      bool          // input or output tokens
	start, end sql.NullInt64 // microseconds since the epoch
}

// heldOps, if set (a test), is told how many operations the walk holds
// in memory at once.
var heldOps func(n int)

// readWalk appends to ops the operations of walkTable's traces whose
// first operation is numbered from from to to (excluded).
func readWalk(ctx context.Context, db *sql.Tx, ops []walkOp, from, to int64) ([]walkOp, error) {
	rows, err := db.QueryContext(ctx, "SELECT row, trace, parent, id, same_call, aggregate, usage, began, ended FROM "+walkTable+
		" WHERE k >= ? AND k < ?", from, to)
	if err != nil {
		return nil, fmt.Errorf("read the operations' parents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var o walkOp
		if err := rows.Scan(&o.row, &o.trace, &o.parent, &o.id, &o.sameCall, &o.aggregate, &o.usage, &o.start, &o.end); err != nil {
			return nil, fmt.Errorf("read the operations' parents: %w", err)
		}
		ops = append(ops, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the operations' parents: %w", err)
	}
	return ops, nil
}

// walk returns the rows of the operations rolled up and those of the
// wrappers (rollUp's rules), in time linear in len(ops) but for the sort
// of each trace's model calls by start.
func walk(ops []walkOp) (rolled, wrappers []int64) {
	index := make(map[int64]int, len(ops))
	for i, o := range ops {
		index[o.row] = i
	}
	parent := make([]int, len(ops)) // index of the parent operation, -1 for none
	children := make([]int, len(ops))
	for i, o := range ops {
		parent[i] = -1
		if p, ok := index[o.parent.Int64]; o.parent.Valid && ok {
			parent[i] = p
			children[p]++
		}
	}
	// below: an operation under it (not in its cycle) has usage. Taken
	// off children first; what is never taken off lies in a cycle.
	below := make([]bool, len(ops))
	off := make([]bool, len(ops))
	queue := make([]int, 0, len(ops))
	for i := range ops {
		if children[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		off[i] = true
		if p := parent[i]; p >= 0 {
			below[p] = below[p] || below[i] || ops[i].usage
			if children[p]--; children[p] == 0 {
				queue = append(queue, p)
			}
		}
	}
	up := make([]bool, len(ops))
	seen := make([]bool, len(ops))
	for i := range ops {
		if off[i] {
			up[i] = below[i]
			continue
		}
		if seen[i] {
			continue
		}
		// A cycle: every operation under one of its operations is under
		// each. One in the cycle with usage rolls up only an operation
		// without any (as the rule's SQL did: nulling no tokens, it
		// nulls a cost or total without them).
		var tree, usage bool
		for j := i; !seen[j]; j = parent[j] {
			seen[j] = true
			tree = tree || below[j]
			usage = usage || ops[j].usage
		}
		for j := i; ; {
			up[j] = tree || (usage && !ops[j].usage)
			if j = parent[j]; j == i {
				break
			}
		}
	}
	// By time: an aggregate with usage, a model call of its trace with
	// usage and no parent operation starting within it.
	starts := map[int64][]int64{}
	for i, o := range ops {
		if o.trace.Valid && o.id && !o.aggregate && o.usage && o.start.Valid && parent[i] < 0 {
			starts[o.trace.Int64] = append(starts[o.trace.Int64], o.start.Int64)
		}
	}
	for _, s := range starts {
		slices.Sort(s)
	}
	for i, o := range ops {
		if up[i] || !o.aggregate || !o.usage || !o.trace.Valid || !o.id || !o.start.Valid || !o.end.Valid {
			continue
		}
		s := starts[o.trace.Int64]
		if j, _ := slices.BinarySearch(s, o.start.Int64); j < len(s) && s[j] <= o.end.Int64 {
			up[i] = true
		}
	}
	// Wrappers, by their children: one not in a cycle of the same
	// operation and model.
	wraps := make([]bool, len(ops))
	for i, c := range ops {
		p := parent[i]
		if p < 0 || !off[i] || !c.sameCall { // off: in no cycle, not its own parent
			continue
		}
		if o := ops[p]; !o.aggregate && (up[p] || !o.usage) {
			wraps[p] = true
		}
	}
	for i, o := range ops {
		if up[i] {
			rolled = append(rolled, o.row)
		}
		if wraps[i] {
			wrappers = append(wrappers, o.row)
		}
	}
	return rolled, wrappers
}
