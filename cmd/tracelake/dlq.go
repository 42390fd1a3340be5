package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// cmdDLQ is `tracelake dlq list|replay`. list also runs inside `tracelake
// run` (env), replay never: it writes the tables.
func cmdDLQ(ctx context.Context, env *cmdEnv, args []string) error {
	const usage = "want list or replay, e.g. tracelake dlq replay --config F --where \"stage = 'load'\" --dry-run (tracelake dlq list -h: the flags)"
	if len(args) > 0 && slices.Contains([]string{"-h", "-help", "--help", "help"}, args[0]) {
		fmt.Fprintln(env.stdout, "tracelake dlq:", usage)
		return nil
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		return usagef("dlq: %s", usage)
	}
	fs := env.flagSet("dlq " + args[0])
	var cf configFlags
	cf.register(fs)
	whereSQL := fs.String("where", "", "SQL condition over the dead-letter table's columns (topic, partition, offset, key, value, error, stage, add_time, headers, create_time)")
	dryRun := fs.Bool("dry-run", false, "replay: report what would happen, change nothing")
	limit := fs.Int("limit", 50, "list: rows to show")
	cfg, snk, release, err := env.open(ctx, &cf, fs, args[1:], false, duckDBUse{prepare: true, existing: args[0] == "list"})
	if err != nil {
		return err
	}
	defer release()
	if err := whereOnly(ctx, snk.DB(), snk.Tables().DLQ, *whereSQL); err != nil {
		return err
	}
	if args[0] == "list" {
		return listDLQ(ctx, env, cfg, snk, *whereSQL, *limit)
	}
	if env.running != nil {
		return errors.New("BUG: dlq replay inside tracelake run")
	}
	opt := duckdb.ReplayOptions{Where: *whereSQL, DryRun: *dryRun}
	if models := cfg.Models(); len(models) > 0 {
		// The replayed rows land below what the models merged.
		opt.Replayed = merge.LowerWatermarks(models)
	}
	into := cfg.Sink.Table
	if cfg.CapturesChanges() {
		// Each change goes through the changelog decoder, checked against
		// the tables as they are now, to its changelog table, and its
		// model merges it at the next round.
		dec, err := pipeline.NewChangelogDecoder(cfg.CDCOptions(), snk)
		if err != nil {
			return err
		}
		names, err := cdc.NewDecoder(cfg.CDCOptions())
		if err != nil {
			return err
		}
		cm := merge.NewChangelogMerger(merge.NewMerger(snk.DB(), slog.Default()), snk, names)
		opt.Decode, opt.Replayed, into = dec.AppendRows, cm.LowerWatermarks, "the changelog tables"
	}
	res, err := snk.Replay(ctx, opt)
	if err != nil {
		return err
	}
	verb := "replayed"
	if *dryRun {
		verb = "dry run: would replay"
	}
	fmt.Fprintf(env.stdout, "%s %d dead-letter rows into %s: %d loaded, %d still failing\n", verb, res.Candidates, into, res.Loaded, res.Candidates-res.Loaded)
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

// listDLQ lists the dead-letter rows of each table a run of cfg loads
// (snk's, then, in a load-mode run taking several otlp.signals, each
// other signal's, each under its table's name): kafka.signal's alone left
// the other signals' dead letters unseen. where is a checked condition
// (whereOnly), limit the rows shown of each table.
func listDLQ(ctx context.Context, env *cmdEnv, cfg *config.Config, snk *duckdb.Sink, where string, limit int) error {
	if where != "" {
		where = " WHERE " + where
	}
	list := func(s *duckdb.Sink) error {
		// decode() with 'replace': a value that is not UTF-8 (a common
		// dead letter) shows with '?' for its bad bytes; plain decode()
		// fails on it, and with it the whole listing.
		q := fmt.Sprintf(`SELECT topic, "partition", "offset", stage, error, add_time, left(decode("value", 'replace'), 80) AS value
			FROM %s%s ORDER BY add_time DESC, topic, "partition", "offset" LIMIT %d`, s.Tables().DLQ, where, limit)
		return printQuery(ctx, env.stdout, s.DB(), q)
	}
	signals := cfg.SignalConfigs()
	if len(signals) == 1 {
		return list(snk)
	}
	for i, sc := range signals {
		s := snk
		if i > 0 {
			fmt.Fprintln(env.stdout)
			var release func()
			var err error
			if s, release, err = env.duckDBBeside(snk, sc); err != nil {
				return fmt.Errorf("the %s table %s: %w", sc.Kafka.Signal, sc.Sink.Table, err)
			}
			defer release()
			if env.running == nil {
				// Standalone, its tables may not exist yet (run's are).
				if err := s.Prepare(ctx); err != nil {
					return fmt.Errorf("prepare the tables of %s: %w", sc.Sink.Table, err)
				}
			}
		}
		fmt.Fprintf(env.stdout, "%s (%s):\n", sc.DLQTable(), sc.Kafka.Signal)
		if err := list(s); err != nil {
			return fmt.Errorf("%s: %w", sc.DLQTable(), err)
		}
	}
	return nil
}

// whereOnly refuses a --where that is not a condition over table: it is
// pasted into the commands' statements, and one that ends a statement and
// starts another ("false; DELETE FROM …") would run that too — through a
// running process, a write beside its loads —, and one that goes on with
// a set operation would select rows twice. DuckDB's parser says whether
// the query it makes is one plain SELECT (json_serialize_sql takes
// SELECTs only).
func whereOnly(ctx context.Context, db *sql.DB, table, where string) error {
	if where == "" {
		return nil
	}
	var tree string
	if err := db.QueryRowContext(ctx, `SELECT json_serialize_sql(?::VARCHAR)::VARCHAR`, "SELECT * FROM "+table+" WHERE "+where).Scan(&tree); err != nil {
		return fmt.Errorf("--where: %w", err)
	}
	var parsed struct {
		Error      bool   `json:"error"`
		Message    string `json:"error_message"`
		Statements []struct {
			Node selectNode `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(tree), &parsed); err != nil {
		return fmt.Errorf("--where: DuckDB's parse of it: %w", err)
	}
	switch {
	case parsed.Error:
		return usagef("--where %q: want a condition over the dead-letter table's columns: %s", where, parsed.Message)
	case len(parsed.Statements) != 1:
		return usagef("--where %q: want one condition over the dead-letter table's columns, not statements", where)
	case parsed.Statements[0].Node.Type != "SELECT_NODE":
		// A set operation (… UNION ALL SELECT … FROM the table again)
		// selects a dead letter twice, and a replay loaded it twice.
		return usagef("--where %q: want a condition over the dead-letter table's columns, not a set operation (UNION, EXCEPT, INTERSECT)", where)
	case !parsed.Statements[0].Node.conditionOnly():
		// GROUP BY GROUPING SETS naming a set twice selects a dead
		// letter twice too; the others are no part of a condition.
		return usagef("--where %q: want a condition over the dead-letter table's columns, not a GROUP BY, HAVING, QUALIFY, ORDER BY, LIMIT or sample after it", where)
	}
	return nil
}

// selectNode is what whereOnly reads of DuckDB's parse of one SELECT.
type selectNode struct {
	Type              string            `json:"type"`
	Modifiers         []json.RawMessage `json:"modifiers"`
	GroupExpressions  []json.RawMessage `json:"group_expressions"`
	GroupSets         []json.RawMessage `json:"group_sets"`
	AggregateHandling string            `json:"aggregate_handling"`
	Having            json.RawMessage   `json:"having"`
	Qualify           json.RawMessage   `json:"qualify"`
	Sample            json.RawMessage   `json:"sample"`
}

// conditionOnly reports whether the SELECT has nothing after its WHERE:
// no grouping (GROUP BY GROUPING SETS can repeat a row), HAVING,
// QUALIFY, ORDER BY, LIMIT or sample.
func (n selectNode) conditionOnly() bool {
	null := func(m json.RawMessage) bool { return len(m) == 0 || string(m) == "null" }
	return len(n.Modifiers) == 0 && len(n.GroupExpressions) == 0 && len(n.GroupSets) == 0 &&
		(n.AggregateHandling == "" || n.AggregateHandling == "STANDARD_HANDLING") &&
		null(n.Having) && null(n.Qualify) && null(n.Sample)
}
