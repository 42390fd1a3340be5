package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/reconcile"
)

// cmdReconcile is `tracelake reconcile`: compare two tables, or a model's
// target with a rebuild of it computed on the fly. Exit 1 when they differ.
// It also runs inside `tracelake run` (env).
func cmdReconcile(ctx context.Context, env *cmdEnv, args []string) error {
	fs := env.flagSet("reconcile")
	var cf configFlags
	cf.register(fs)
	left := fs.String("left", "", "first table")
	right := fs.String("right", "", "second table")
	key := fs.String("key", "", "key columns, comma-separated")
	columns := fs.String("columns", "", "compared columns, comma-separated (default: every column both tables have)")
	model := fs.String("model", "", "compare this model's target with a full rebuild computed on the fly (nothing is written)")
	examples := fs.Int("examples", 10, "keys that differ to show")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cfg, snk, release, err := env.open(ctx, &cf, fs, args, false, false)
	if err != nil {
		return err
	}
	defer release()

	var rep *reconcile.Report
	switch {
	case *model != "" && *left == "" && *right == "":
		m, err := cfg.Model(*model)
		if err != nil {
			return usageError{err}
		}
		if rep, err = reconcileModel(ctx, merge.NewMerger(snk.DB(), slog.Default()), m, *examples); err != nil {
			return err
		}
	case *model == "" && *left != "" && *right != "" && *key != "":
		rep, err = reconcile.Compare(ctx, snk.DB(), reconcile.Spec{Left: *left, Right: *right, Key: splitComma(*key),
			Columns: splitComma(*columns), Examples: *examples})
		if err != nil {
			return err
		}
	default:
		return usagef("reconcile: give --left T1 --right T2 --key K, or --model M")
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
