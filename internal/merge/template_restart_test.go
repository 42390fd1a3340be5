package merge

import (
	"context"
	"log/slog"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// A restart with another cdc.log_table template (and the model template
// as it was) routed a source table's changes into a second changelog
// table, whose model is the first one's: two changelog tables merged into
// one model by one set of watermarks. The second merged first (its name
// sorts first) moved the model's watermark past every change of the
// first, whose changes not merged before the restart were never merged.
// A source table whose model keeps its name now keeps its changelog
// table: the new template names the changelog tables of source tables
// first seen after it. With both templates new, a source table's changes
// go into a new changelog table and model, as before.
func TestChangelogLogTemplateChangedAtARestart(t *testing.T) {
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.flush()
	l.mustMerge()
	// Moved into cdc_db_orders_log, not merged yet: the run stops.
	l.change(0, "orders", "u", 110, row(1, "b"), "id")
	l.flush()

	// Another process, the same database file, new templates.
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium, LogTemplate: "a_{database}_{table}_log"})
	l.change(0, "orders", "c", 120, row(2, "c"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|b", "2|c")
	l.want(`SELECT log_table, coalesce(model_table, '') FROM cdc_routes ORDER BY ALL`, "cdc_db_orders_log|cdc_db_orders")

	// Both templates new (a source switched to another server's log).
	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium, LogTemplate: "b_{database}_{table}_log", ModelTemplate: "b_{database}_{table}"})
	l.change(0, "orders", "c", 130, row(3, "d"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|b", "2|c")
	l.want(`SELECT id, v FROM b_db_orders ORDER BY id`, "3|d")
	l.want(`SELECT log_table, coalesce(model_table, '') FROM cdc_routes ORDER BY ALL`, "b_db_orders_log|b_db_orders", "cdc_db_orders_log|cdc_db_orders")
}

// The README's advice after a failover to a server with binlog files of
// its own: snapshot the tables again into new changelog and model tables
// (both templates new), whose positions do not compare with the old. A
// changelog table that the run before the restart created and did not
// merge yet (no model in the registry) took the new server's changes as
// well, and its model, named by the new template, merged the two
// servers' changes by position: the new server's snapshot, at lower
// positions of its own binlog, lost to the old server's changes as
// resends. The old table's changes belong to the model the templates
// named when it was created.
func TestChangelogBothTemplatesChangedBeforeFirstMerge(t *testing.T) {
	var opt duckdb.Options
	l := newChangeLoader(t, func(o *duckdb.Options) { opt = *o })
	// The old server, far into its binlog; moved, not merged: the run
	// stops before its first merge.
	l.change(0, "orders", "c", 5000, row(1, "old"), "id")
	l.flush()

	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium, LogTemplate: "b_{database}_{table}_log", ModelTemplate: "b_{database}_{table}"})

	// The new server's snapshot, at the start of its own binlog.
	l.change(0, "orders", "r", 100, row(1, "new"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM b_db_orders ORDER BY id`, "1|new")
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|old")
	l.want(`SELECT log_table, coalesce(model_table, '') FROM cdc_routes ORDER BY ALL`, "b_db_orders_log|b_db_orders", "cdc_db_orders_log|cdc_db_orders")
}

// reopen is a restart of l's process: its sink closed and opened again
// with opt (the same database file), its decoder and merger made with
// opts.
func (l *changeLoader) reopen(opt duckdb.Options, opts cdc.Options) {
	l.t.Helper()
	if err := l.s.Close(); err != nil {
		l.t.Fatal(err)
	}
	s, err := duckdb.Open(opt)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { s.Close() })
	if err := s.Prepare(context.Background()); err != nil {
		l.t.Fatal(err)
	}
	if l.dec, err = pipeline.NewChangelogDecoder(opts, s); err != nil {
		l.t.Fatal(err)
	}
	names, err := cdc.NewDecoder(opts)
	if err != nil {
		l.t.Fatal(err)
	}
	l.s, l.merger = s, NewChangelogMerger(NewMerger(s.DB(), slog.New(slog.DiscardHandler)), s, names)
}
