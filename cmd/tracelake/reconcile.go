package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/reconcile"
)

// cmdReconcile is `tracelake reconcile`: compare two tables, a model's
// target with a rebuild of it computed on the fly, or a CDC model's target
// with the live source table in MySQL/MariaDB (--source). Exit 1 when they
// differ. It also runs inside `tracelake run` (env).
func cmdReconcile(ctx context.Context, env *cmdEnv, args []string) error {
	fs := env.flagSet("reconcile")
	var cf configFlags
	cf.register(fs)
	left := fs.String("left", "", "first table")
	right := fs.String("right", "", "second table")
	key := fs.String("key", "", "key columns, comma-separated")
	columns := fs.String("columns", "", "compared columns, comma-separated (default: every column both tables have)")
	model := fs.String("model", "", "compare this model's target with a full rebuild computed on the fly (nothing is written); with --source, the model compared (default: the one whose target is --table's)")
	source := fs.String("source", "", "compare a model's target with its live source table: mysql://user:password@host:port/database[?go-sql-driver parameters, socket=PATH]")
	batch := fs.Int("batch", 1000, "with --source: rows per key-range query on the source")
	rate := fs.Float64("rate", 0, "with --source: at most this many source rows a second (0: no cap)")
	recheck := fs.Int("recheck", 1000, "with --source: differing keys read again from both sides at the end (0: none)")
	examples := fs.Int("examples", 10, "keys that differ to show")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	// --table is sink.table (a config flag) for the other forms; with
	// --source it names the source table instead, and sink.table, which
	// only says which raw table a model reads, is left as configured.
	fs.Lookup("table").Usage = "sink.table; with --source: the source table, database.table"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	table := cf.table
	if *source != "" {
		cf.leaveKey("table")
	}
	cfg, snk, release, err := env.open(ctx, &cf, fs, nil, false, duckDBUse{existing: true})
	if err != nil {
		return err
	}
	defer release()

	var rep *reconcile.Report
	switch {
	case *source != "" && table != "" && *left == "" && *right == "" && *key == "":
		if *batch < 1 || *rate < 0 || *recheck < 0 {
			return usagef("reconcile: --batch must be >= 1, --rate and --recheck >= 0")
		}
		if *recheck == 0 {
			*recheck = -1 // CompareStreams reads 0 as its default
		}
		var changelog *merge.ChangelogMerger
		if cfg.CapturesChanges() {
			// Change capture's models are not in merge.models (refused
			// beside it): looked for there alone, none was found, and
			// reconcile could check no changelog model.
			names, err := cdc.NewDecoder(cfg.CDCOptions())
			if err != nil {
				return err
			}
			changelog = merge.NewChangelogMerger(merge.NewMerger(snk.DB(), cmdLog(ctx)), snk, names)
		}
		if rep, err = reconcileSource(ctx, cfg, snk.DB(), changelog, *model, *source, table, splitComma(*columns), reconcile.StreamSpec{
			Examples: *examples, Recheck: *recheck}, *batch, *rate); err != nil {
			return err
		}
	case *model != "" && *left == "" && *right == "" && *source == "":
		m, err := cfg.Model(*model)
		if err != nil {
			return usageError{err}
		}
		if rep, err = reconcileModel(ctx, merge.NewMerger(snk.DB(), cmdLog(ctx)), m, *examples); err != nil {
			return err
		}
	case *model == "" && *left != "" && *right != "" && *key != "":
		rep, err = reconcile.Compare(ctx, snk.DB(), reconcile.Spec{Left: *left, Right: *right, Key: splitComma(*key),
			Columns: splitComma(*columns), Examples: *examples})
		if err != nil {
			return err
		}
	default:
		return usagef("reconcile: give --left T1 --right T2 --key K, --model M, or --source mysql://… --table DB.T [--model M]")
	}
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(env.stdout)
	}
	if !rep.Equal {
		return failedCheck{}
	}
	return nil
}

// reconcileModel compares the model's target with a rebuild computed on the
// fly (in a transaction that is rolled back).
func reconcileModel(ctx context.Context, mg *merge.Merger, m config.Model, examples int) (*reconcile.Report, error) {
	var rep *reconcile.Report
	err := mg.Check(ctx, m, 1_000_000, func(tx *sql.Tx, rebuilt string) error {
		var err error
		rep, err = reconcile.Compare(ctx, tx, reconcile.Spec{Left: m.Target, Right: rebuilt, Key: m.Key, Examples: examples})
		return err
	})
	return rep, err
}

// reconcileSource compares a model's target (in db) with the source table
// it models, read from MySQL/MariaDB in key ranges of batch rows. The
// model is the one named, or the one whose target (or name) is the
// table's; with change capture (changelog not nil: kafka.format debezium,
// canal or maxwell, which has no merge.models), the changelog model
// named, or else the one the table's changes are merged into (the
// registry's), keyed as its merges are; the key is the table's primary
// key, which must be the model's; the columns compared are those given,
// or every column both have.
func reconcileSource(ctx context.Context, cfg *config.Config, db *sql.DB, changelog *merge.ChangelogMerger, modelName, source, table string, columns []string,
	spec reconcile.StreamSpec, batch int, rate float64) (*reconcile.Report, error) {
	src, err := reconcile.OpenMySQL(ctx, source, table)
	if se := (reconcile.SourceError{}); errors.As(err, &se) {
		return nil, usageError{err}
	}
	if err != nil {
		return nil, err
	}
	defer src.DB.Close()
	var m config.Model
	if changelog != nil {
		if m, err = changelog.SourceModel(ctx, modelName, src.Database, src.Table); err != nil {
			return nil, usageError{err}
		}
	} else if m, err = sourceModel(cfg, modelName, src.Table); err != nil {
		return nil, usageError{err}
	}
	if !sameSet(m.Key, src.Key) {
		return nil, usagef("model %s is keyed by (%s), but the primary key of %s.%s is (%s)",
			m.Name, strings.Join(m.Key, ", "), src.Database, src.Table, strings.Join(src.Key, ", "))
	}
	target, err := reconcile.Columns(ctx, db, m.Target)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w (has tracelake merge built it?)", m.Name, err)
	}
	// Names match in any case, as both engines resolve them, and are
	// compared under the source's spelling, which its types (src.Types)
	// are kept by: matched exactly, a source's Total modelled as total was
	// left out, and the model's wrong totals reported EQUAL.
	if len(columns) == 0 {
		for _, c := range src.Columns {
			if reconcile.HasColumn(target, c) {
				columns = append(columns, c)
			}
		}
	}
	for i, c := range columns {
		at := reconcile.ColumnIndex(src.Columns, c)
		if at < 0 || !reconcile.HasColumn(target, c) {
			return nil, usagef("column %s is not in both %s.%s and %s", c, src.Database, src.Table, m.Target)
		}
		columns[i] = src.Columns[at]
	}
	if len(columns) == 0 {
		return nil, usagef("%s.%s and %s have no column in common", src.Database, src.Table, m.Target)
	}
	spec.Left, spec.Right = src.Side(batch, rate), reconcile.DuckDBTable(db, m.Target)
	spec.Key, spec.Columns = src.Key, columns
	return reconcile.CompareStreams(ctx, spec)
}

// sourceModel is the model named, or else the one model whose target or
// name is table.
func sourceModel(cfg *config.Config, name, table string) (config.Model, error) {
	if name != "" {
		return cfg.Model(name)
	}
	var found []config.Model
	for _, m := range cfg.Models() {
		if m.Target == table || m.Name == table {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		return config.Model{}, fmt.Errorf("%d models in merge.models have target or name %s; name one with --model", len(found), table)
	}
	return found[0], nil
}

// sameSet says whether the column names a and b are the same set, each
// name matched in any case as MySQL and DuckDB match them (a primary key
// Order_ID is a model's key order_id).
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !reconcile.HasColumn(b, s) })
}
