// Package merge turns the raw table into modelled tables: for each model
// (config merge.models) it projects typed columns out of raw_data, keeps the
// latest change per business key and merges it into the target table —
// incrementally and exactly once in DuckDB, and as Databend SQL (stream,
// MERGE INTO, task) for the Databend sink.
package merge

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Change kinds, computed per raw row.
const (
	kindUpsert = "upsert" // insert, or update the key's row
	kindInsert = "insert" // insert only if the key has no row
	kindDelete = "delete"
	kindSkip   = "skip" // a Kafka tombstone (no value): nothing to merge
	kindBad    = "bad"  // not a change event of the model's format
)

// WatermarkTable keeps, per model and partition, the next raw offset to merge.
const WatermarkTable = "tracelake_merge_watermarks"

// DecidingSuffix names, after a model's target, the table of each key's
// deciding change (plan.deciding), kept by DuckDB merges of a model with
// a version.
const DecidingSuffix = "_deciding"

// plan is a model with its quoted names, ready to be written as SQL.
type plan struct {
	m               config.Model
	target, source  string // quoted
	ledger, rejects string // quoted
	tombstones      string // quoted; "" without a version column
	// deciding (quoted; "" without a version column, and unused on
	// Databend) keeps, per key of the target or its tombstones, the
	// version and Kafka coordinates of the change that gave its row or
	// deleted it: what a merge compares an incoming change with, by
	// latestOrder, as a rebuild compares the two in one increment.
	deciding     string
	keys, values []config.Column
	version      string // quoted column name, "" if none
	// upto, when set, names the model whose watermarks bound the rows
	// read: only a partition's rows below that model's watermark
	// (Merger.Check: what that model's target has merged).
	upto string
	// lit quotes a string literal in the dialect the plan writes:
	// sqltext.String for DuckDB, sqltext.DatabendString for Databend
	// (whose lexer reads backslashes as escapes).
	lit func(string) string
}

func newPlan(m config.Model) *plan {
	p := &plan{
		m:       m,
		target:  sqltext.Name(m.Target),
		source:  sqltext.Name(m.Source),
		ledger:  sqltext.Name(m.Source + "_ledger"),
		rejects: sqltext.Name(m.Name + "_rejects"),
		lit:     sqltext.String,
	}
	for _, c := range m.Columns {
		if slices.Contains(m.Key, c.Name) {
			p.keys = append(p.keys, c)
		} else {
			p.values = append(p.values, c)
		}
	}
	if m.Version != "" {
		p.version = sqltext.Ident(m.Version)
		p.tombstones = sqltext.Name(m.Target + "_tombstones")
		p.deciding = sqltext.Name(m.Target + DecidingSuffix)
	}
	return p
}

// columnDefs is "name TYPE, …" for CREATE TABLE.
func columnDefs(cols []config.Column) string {
	defs := make([]string, len(cols))
	for i, c := range cols {
		defs[i] = sqltext.Ident(c.Name) + " " + c.Type
	}
	return strings.Join(defs, ", ")
}

// list renders each column through f, joined by sep.
func list(cols []config.Column, sep string, f func(c config.Column, i int) string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = f(c, i)
	}
	return strings.Join(parts, sep)
}

// keyMatch is "a.k1 = b.k1 AND …".
func (p *plan) keyMatch(a, b string) string {
	return list(p.keys, " AND ", func(c config.Column, _ int) string {
		q := sqltext.Ident(c.Name)
		return a + "." + q + " = " + b + "." + q
	})
}

// keyList is "k1, k2" quoted.
func (p *plan) keyList() string {
	return list(p.keys, ", ", func(c config.Column, _ int) string { return sqltext.Ident(c.Name) })
}

// latestOrder orders a key's changes newest first: by version if the model
// has one, then by Kafka partition and offset (within a partition, the
// offset is the order the changes were produced in). Two changes of a
// version on two partitions are thus ordered by partition, as the
// changelog models order changes of one position; newerSQL is the same
// order between an incoming change and the deciding one a merge kept.
// With a version and topic (the column of the change's Kafka topic, ""
// for none: Databend's), a tie in all three (two topics feeding one raw
// table) goes by topic, so that a merge and a rebuild order it alike.
func (p *plan) latestOrder(partition, offset, topic string) string {
	order := partition + " DESC, " + offset + " DESC"
	if p.version != "" {
		order = p.version + " DESC, " + order
		if topic != "" {
			order += ", " + topic + " DESC"
		}
	}
	return order
}

// kindExpr is the SQL computing a row's change kind from the action field
// (json format), given the expression of the action value.
func (p *plan) kindExpr(action string) string {
	if p.m.Action.Path == "" {
		return p.lit(kindUpsert)
	}
	return fmt.Sprintf("CASE WHEN %s IN (%s) THEN %s WHEN %s IN (%s) THEN %s ELSE %s END",
		action, sqltext.QuoteAll(p.m.Action.Delete, p.lit), p.lit(kindDelete),
		action, sqltext.QuoteAll(p.m.Action.Insert, p.lit), p.lit(kindInsert), p.lit(kindUpsert))
}
