package main

import (
	"context"
	"fmt"
	"os"
	"sort"
)

// cmdDLQ is `tracelake dlq list|replay`.
func cmdDLQ(ctx context.Context, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		return usagef("dlq: want list or replay, e.g. tracelake dlq replay --config F --where \"stage = 'load'\" --dry-run")
	}
	fs := newFlagSet("dlq " + args[0])
	var cf configFlags
	cf.register(fs)
	whereSQL := fs.String("where", "", "SQL condition over the dead-letter table's columns (topic, partition, offset, key, value, error, stage, add_time)")
	dryRun := fs.Bool("dry-run", false, "replay: report what would happen, change nothing")
	limit := fs.Int("limit", 50, "list: rows to show")
	cfg, snk, err := cf.open(fs, args[1:], false)
	if err != nil {
		return err
	}
	defer snk.Close()
	if err := snk.Prepare(ctx); err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	if args[0] == "list" {
		where := ""
		if *whereSQL != "" {
			where = " WHERE " + *whereSQL
		}
		q := fmt.Sprintf(`SELECT topic, "partition", "offset", stage, error, add_time, left(decode("value"), 80) AS value
			FROM %s%s ORDER BY add_time DESC, topic, "partition", "offset" LIMIT %d`, snk.Tables().DLQ, where, *limit)
		return printQuery(ctx, os.Stdout, snk.DB(), q)
	}
	res, err := snk.Replay(ctx, *whereSQL, *dryRun)
	if err != nil {
		return err
	}
	verb := "replayed"
	if *dryRun {
		verb = "dry run: would replay"
	}
	fmt.Printf("%s %d dead-letter rows into %s: %d loaded, %d still failing\n", verb, res.Candidates, cfg.Sink.Table, res.Loaded, res.Candidates-res.Loaded)
	reasons := make([]string, 0, len(res.Failing))
	for r := range res.Failing {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Printf("  %6d  %s\n", res.Failing[r], r)
	}
	return nil
}
