package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// cmdReady is `tracelake ready`: exit 0 once a changelog model's hour is
// marked done (tracelake_ready), for schedulers; 1 if it is not, after
// waiting up to --wait.
func cmdReady(ctx context.Context, env *cmdEnv, args []string) error {
	fs := env.flagSet("ready")
	var cf configFlags
	cf.register(fs)
	// --table is sink.table (a config flag) for the other commands; here
	// it names the model table, and sink.table stays as configured.
	fs.Lookup("table").Usage = "the model table (cdc.model_table's name of a source table, e.g. cdc_shop_orders)"
	hourFlag := fs.String("hour", "", "the hour of source time, UTC: 2026-12-04T10 or RFC 3339 (truncated to the hour in its offset; an hour of a half-hour offset needs both UTC hours it overlaps)")
	wait := fs.Duration("wait", 0, "wait this long for the mark, looking every second")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *wait < 0 {
		// Negative, it was taken for 0 (look once) without a word.
		return usagef("--wait %s: want 0 or more", *wait)
	}
	table := cf.table
	cf.leaveKey("table")
	cfg, snk, release, err := env.open(ctx, &cf, fs, nil, false, duckDBUse{})
	if err != nil {
		return err
	}
	defer release()
	if table == "" || *hourFlag == "" {
		return usagef("ready: give --table T --hour H [--wait D]")
	}
	hours, err := parseHour(*hourFlag)
	if err != nil {
		return usagef("--hour: %v", err)
	}
	if !cfg.CapturesChanges() {
		return usagef("ready: done marks are written for the models of kafka.format debezium, canal or maxwell; kafka.format is %q", cfg.Kafka.Format)
	}
	model := modelName(cfg.Sink.Table, table)
	var names []string
	for _, h := range hours {
		names = append(names, h.Format("2006-01-02T15"))
	}
	hourNames := strings.Join(names, " and ")
	deadline := time.Now().Add(*wait)
	for {
		ok := true
		for _, h := range hours {
			marked, err := merge.Ready(ctx, snk.DB(), model, h)
			if err != nil && !duckdb.IsMissing(err) {
				return err
			}
			ok = ok && marked
		}
		if ok {
			fmt.Fprintf(env.stdout, "%s %s: ready\n", table, hourNames)
			return nil
		}
		if !time.Now().Before(deadline) {
			why := ""
			if cols, err := duckdb.TableColumns(ctx, snk.DB(), modelsSchema(cfg.Sink.Table)+"."+model); err == nil && len(cols) == 0 {
				// A misspelt name waits as long as a real one: say so.
				why = " (no table of that name in this database yet: a model is created by its source table's first change)"
			}
			fmt.Fprintf(env.stdout, "%s %s: not ready%s\n", table, hourNames, why)
			return failedCheck{}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Second, time.Until(deadline))):
		}
	}
}

// parseHour reads an hour as 2026-12-04T10, 2026-12-04 10 or RFC 3339,
// in UTC unless it says otherwise, truncated to the hour in its own
// offset (not in the machine's time zone, which may use it too), and answers the UTC hours (those marks are written for) that
// the hour overlaps: one, or two for an offset of a half or quarter hour
// (10:00+05:30 is 04:30 to 05:30 UTC, done once 04 and 05 are).
func parseHour(s string) ([]time.Time, error) {
	for _, layout := range []string{"2006-01-02T15", "2006-01-02 15", time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			// In the offset it was given with: time.Parse gives an offset
			// the local zone uses the local zone, in which an hour of the
			// day its clocks fall back is two (time.Date takes either).
			_, offset := t.Zone()
			in := t.In(time.FixedZone("", offset))
			start := time.Date(in.Year(), in.Month(), in.Day(), in.Hour(), 0, 0, 0, in.Location()).UTC()
			first := start.Truncate(time.Hour)
			if first.Equal(start) {
				return []time.Time{first}, nil
			}
			return []time.Time{first, first.Add(time.Hour)}, nil
		}
	}
	return nil, fmt.Errorf("%q: want 2026-12-04T10 or RFC 3339", s)
}

// modelName is table, a model named as DuckDB takes it, as its marks name
// it: without the schema the models are in (sink.table's, main without
// one), which a query may name; the case is DuckDB's to ignore
// (merge.Ready).
func modelName(sinkTable, table string) string {
	if in, name, ok := strings.Cut(table, "."); ok && strings.EqualFold(in, modelsSchema(sinkTable)) {
		return name
	}
	return table
}

// modelsSchema is the schema the models are in: sink.table's, main
// without one.
func modelsSchema(sinkTable string) string {
	if schema, _, ok := strings.Cut(sinkTable, "."); ok {
		return schema
	}
	return "main"
}
