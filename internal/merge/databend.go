package merge

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Dialects SQL prints in.
const (
	DialectDatabend = "databend"
	DialectDuckDB   = "duckdb"
)

// SQL returns the statements that maintain the model in dialect, as text
// for people (tracelake merge --print-sql) and for the Databend sink.
func SQL(m config.Model, dialect string) (string, error) {
	p := newPlan(m)
	switch dialect {
	case DialectDatabend:
		return p.databend(), nil
	case DialectDuckDB:
		var b strings.Builder
		fmt.Fprintf(&b, "-- model %s: %s -> %s (one transaction per merge; tracelake runs this)\n", m.Name, m.Source, m.Target)
		stmts := append(p.tableSQL(), p.incrementSQL(0, math.MaxInt64), p.rejectSQL())
		stmts = append(stmts, p.latestSQL()...)
		stmts = append(stmts, p.mergeSQL())
		stmts = append(stmts, p.tombstoneSQL()...)
		stmts = append(stmts, p.watermarkSQL())
		b.WriteString("BEGIN;\n")
		for _, s := range stmts {
			b.WriteString(s + ";\n")
		}
		b.WriteString("COMMIT;\n")
		return b.String(), nil
	}
	return "", fmt.Errorf("dialect %q: want databend or duckdb", dialect)
}

// DatabendStatements are a model's statements for Databend. Databend
// tracks the increment itself: an append-only stream on the raw table,
// consumed atomically by one statement. Two stages keep rejects and
// exactly-once together:
//
//  1. Split: one INSERT FIRST consumes the raw stream, writing each
//     projected row either to <model>_changes (typed) or to
//     <model>_rejects (with the reason);
//  2. Merge: one MERGE consumes a stream on <model>_changes, keeping the
//     latest change per key.
//
// Each statement commits with its stream's offset, so a failure between
// them leaves the changes in the second stream for the next run.
type DatabendStatements struct {
	Setup []string // target, changes and rejects tables, the two streams (idempotent)
	Split string
	Merge string
	Task  string // a Databend task running Split and Merge every minute when there are new rows
}

// Databend returns the model's statements for Databend.
func Databend(m config.Model) DatabendStatements {
	p := newPlan(m)
	raw := sqltext.Name(m.Name + "_raw_stream")
	changes := sqltext.Name(m.Name + "_changes")
	changesStream := sqltext.Name(m.Name + "_changes_stream")
	st := DatabendStatements{
		Setup: []string{
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", p.target, columnDefs(m.Columns)),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s, tl_kind VARCHAR, kpartition INT, koffset BIGINT)", changes, columnDefs(m.Columns)),
			fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (topic VARCHAR, \"partition\" INT, \"offset\" BIGINT, reason VARCHAR, rejected_at TIMESTAMP)", p.rejects),
			fmt.Sprintf("CREATE STREAM IF NOT EXISTS %s ON TABLE %s APPEND_ONLY = TRUE", raw, p.source),
			fmt.Sprintf("CREATE STREAM IF NOT EXISTS %s ON TABLE %s APPEND_ONLY = TRUE", changesStream, changes),
		},
		Split: p.databendSplit(raw, changes),
		Merge: p.databendMerge(changesStream),
	}
	st.Task = fmt.Sprintf("CREATE TASK IF NOT EXISTS %s WAREHOUSE = 'default' SCHEDULE = 1 MINUTE\n  WHEN STREAM_STATUS(%s) = TRUE\nAS BEGIN\n%s;\n%s;\nEND",
		sqltext.Name(m.Name+"_merge"), sqltext.String(m.Name+"_raw_stream"), indent(st.Split), indent(st.Merge))
	return st
}

// databend renders the model's Databend statements as a script.
func (p *plan) databend() string {
	m := p.m
	st := Databend(m)
	var b strings.Builder
	fmt.Fprintf(&b, "-- model %s: %s -> %s\n", m.Name, m.Source, m.Target)
	for i, q := range st.Setup {
		b.WriteString(q + ";\n")
		if i == len(st.Setup)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString("-- 1. project the new raw rows; rows that do not fit go to the rejects\n")
	b.WriteString(st.Split + ";\n\n")
	b.WriteString("-- 2. merge the latest change per key\n")
	b.WriteString(st.Merge + ";\n\n")
	b.WriteString("-- schedule both, when the raw table has new rows\n")
	b.WriteString(st.Task + ";\n")
	return b.String()
}

// databendPath renders a JSON path ($.a.b[0]) as Databend variant access.
func databendPath(doc, path string) string {
	var b strings.Builder
	b.WriteString(doc)
	rest := strings.TrimPrefix(path, "$")
	for rest != "" {
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			b.WriteString(rest[:end+1])
			rest = rest[end+1:]
			continue
		}
		rest = rest[1:] // past the dot
		if rest[0] == '"' {
			// A quoted key: ."gen_ai.request.model"
			end := strings.IndexByte(rest[1:], '"') + 1
			b.WriteString("[" + sqltext.String(rest[1:end]) + "]")
			rest = rest[end+1:]
			continue
		}
		end := strings.IndexAny(rest, ".[")
		if end < 0 {
			end = len(rest)
		}
		b.WriteString("[" + sqltext.String(rest[:end]) + "]")
		rest = rest[end:]
	}
	return b.String()
}

func (p *plan) databendSplit(raw, changes string) string {
	m := p.m
	var inner string
	if m.Format == config.FormatDebezium {
		env := "COALESCE(raw_data['payload'], raw_data)"
		op := env + "['op']::VARCHAR"
		inner = fmt.Sprintf("%s AS tl_op, IF(%s = 'd', %s['before'], %s['after']) AS tl_doc,\n      CASE WHEN %s = 'd' THEN '%s' WHEN %s IN ('c', 'r', 'u') THEN '%s' ELSE '%s' END AS tl_kind",
			op, op, env, env, op, kindDelete, op, kindUpsert, kindBad)
	} else {
		inner = "raw_data AS tl_doc, " + p.kindExpr(databendPath("raw_data", m.Action.Path)+"::VARCHAR") + " AS tl_kind"
	}
	proj := list(m.Columns, ", ", func(c config.Column, i int) string {
		v := databendPath("tl_doc", c.Path)
		if strings.EqualFold(c.Type, "JSON") || strings.EqualFold(c.Type, "VARIANT") {
			return fmt.Sprintf("%s AS tl_raw_%d, %s AS %s", v, i, v, sqltext.Ident(c.Name))
		}
		return fmt.Sprintf("%s::VARCHAR AS tl_raw_%d, TRY_CAST(%s AS %s) AS %s", v, i, v, c.Type, sqltext.Ident(c.Name))
	})
	return fmt.Sprintf(`INSERT FIRST
  WHEN tl_reason IS NULL THEN INTO %s (%s, tl_kind, kpartition, koffset) VALUES (%s, tl_kind, kpartition, koffset)
  ELSE INTO %s (topic, "partition", "offset", reason, rejected_at) VALUES (tl_topic, kpartition, koffset, tl_reason, NOW())
SELECT *, %s AS tl_reason FROM (
  SELECT *, %s FROM (
    SELECT kpartition, koffset, record_metadata['topic']::VARCHAR AS tl_topic,
      %s
    FROM %s WHERE raw_data IS NOT NULL
  )
)`, changes, p.columnList(""), p.columnList(""), p.rejects, p.reasonExpr(), proj, inner, raw)
}

func (p *plan) databendMerge(changesStream string) string {
	return fmt.Sprintf(`MERGE INTO %s AS t USING (
  SELECT %s, tl_kind FROM %s
  QUALIFY ROW_NUMBER() OVER (PARTITION BY %s ORDER BY %s) = 1
) AS s ON %s
%s`, p.target, p.columnList(""), changesStream, p.keyList(), p.latestOrder("kpartition", "koffset"), p.keyMatch("t", "s"), p.mergeClauses())
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// Execer runs statements one after the other in one Databend session (the
// Databend sink).
type Execer interface {
	Exec(ctx context.Context, statements ...string) error
}

// DatabendMerger runs models' Databend statements against the Databend
// sink: on first use the tables and streams (and, with Task, the
// scheduled task), then at each Merge the split and the merge. Databend's
// streams hold the increment, so a failed merge leaves it for the next.
type DatabendMerger struct {
	db   Execer
	task bool
	set  map[string]bool // models whose setup ran
}

// NewDatabendMerger returns a merger running on db; with task it also
// creates each model's Databend task (Databend Cloud schedules it).
func NewDatabendMerger(db Execer, task bool) *DatabendMerger {
	return &DatabendMerger{db: db, task: task, set: map[string]bool{}}
}

// Merge merges the model's new raw rows once. Databend does not report
// row counts through statements' replies here, so Result has only Took.
func (d *DatabendMerger) Merge(ctx context.Context, m config.Model) (Result, error) {
	start := time.Now()
	st := Databend(m)
	if !d.set[m.Name] {
		setup := st.Setup
		if d.task {
			setup = append(slices.Clone(setup), st.Task)
		}
		if err := d.db.Exec(ctx, setup...); err != nil {
			return Result{}, fmt.Errorf("set up model %s in Databend: %w", m.Name, err)
		}
		d.set[m.Name] = true
	}
	if err := d.db.Exec(ctx, st.Split, st.Merge); err != nil {
		return Result{}, fmt.Errorf("merge model %s in Databend: %w", m.Name, err)
	}
	return Result{Model: m.Name, Took: time.Since(start)}, nil
}
