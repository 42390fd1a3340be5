package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// cmdDLQ is `tracelake dlq list|replay`. list also runs inside `tracelake
// run` (env), replay never: it writes the tables.
func cmdDLQ(ctx context.Context, env *cmdEnv, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		return usagef("dlq: want list or replay, e.g. tracelake dlq replay --config F --where \"stage = 'load'\" --dry-run")
	}
	fs := env.flagSet("dlq " + args[0])
	var cf configFlags
	cf.register(fs)
	whereSQL := fs.String("where", "", "SQL condition over the dead-letter table's columns (topic, partition, offset, key, value, error, stage, add_time)")
	dryRun := fs.Bool("dry-run", false, "replay: report what would happen, change nothing")
	limit := fs.Int("limit", 50, "list: rows to show")
	cfg, snk, release, err := env.open(ctx, &cf, fs, args[1:], false, true)
	if err != nil {
		return err
	}
	defer release()
	if args[0] == "list" {
		where := ""
		if *whereSQL != "" {
			where = " WHERE " + *whereSQL
		}
		q := fmt.Sprintf(`SELECT topic, "partition", "offset", stage, error, add_time, left(decode("value"), 80) AS value
			FROM %s%s ORDER BY add_time DESC, topic, "partition", "offset" LIMIT %d`, snk.Tables().DLQ, where, *limit)
		return printQuery(ctx, env.stdout, snk.DB(), q)
	}
	if env.running != nil {
		return errors.New("BUG: dlq replay inside tracelake run")
	}
	if cfg.CapturesChanges() {
		// Replay loads raw rows into sink.table, which change capture
		// does not have: its changes would have to go through the
		// changelog decoder to their tables, not built yet.
		return usagef("dlq replay: not built for kafka.format %s: the dead-lettered changes stay in %s (a later change of the same rows brings a model up to date; reconcile --source finds the rows that differ)",
			cfg.Kafka.Format, snk.Tables().DLQ)
	}
	res, err := snk.Replay(ctx, *whereSQL, *dryRun)
	if err != nil {
		return err
	}
	verb := "replayed"
	if *dryRun {
		verb = "dry run: would replay"
	}
	fmt.Fprintf(env.stdout, "%s %d dead-letter rows into %s: %d loaded, %d still failing\n", verb, res.Candidates, cfg.Sink.Table, res.Loaded, res.Candidates-res.Loaded)
	reasons := make([]string, 0, len(res.Failing))
	for r := range res.Failing {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(env.stdout, "  %6d  %s\n", res.Failing[r], r)
	}
	return nil
}
