package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// Iceberg maintenance commands: compact, expire, orphans. Each runs beside
// live `tracelake run` processes; see internal/sink/iceberg/maintain.go.

func cmdCompact(ctx context.Context, args []string) error {
	fs := newFlagSet("compact")
	var target config.ByteSize // 0: not given
	// Checked as it is parsed, before anything is opened: a size given
	// as 0 must not fall back to the configured one without a word.
	fs.Func("target-size", "size of the rewritten files, at least 1MiB (default: sink.iceberg.maintenance.target_file_size, 128MiB unless configured)", func(s string) error {
		var b config.ByteSize
		if err := b.UnmarshalText([]byte(s)); err != nil {
			return err
		}
		if b < 1<<20 {
			return fmt.Errorf("want at least 1MiB, got %s", b)
		}
		target = b
		return nil
	})
	dryRun := fs.Bool("dry-run", false, "only show what would be rewritten")
	minAge := fs.Duration("min-age", time.Hour, "compact a day partition once its day ended this long ago (loads add to the current day all day); -24h compacts the current day too")
	sinks, err := openIcebergSinksFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer closeIcebergSinks(sinks)
	if target == 0 {
		// The size scheduled maintenance compacts to: one size of file
		// whoever compacts (at least 1MiB: config validation).
		target = sinks[0].cfg.Sink.Iceberg.Maintenance.TargetFileSize
	}
	fmt.Printf("compacting to files of %s\n", target)
	for _, is := range sinks {
		res, err := is.snk.Compact(ctx, int64(target), time.Now().Add(-*minAge), *dryRun)
		for _, c := range res {
			verb := "rewrote"
			if *dryRun {
				verb = "would rewrite"
			}
			fmt.Printf("%s: %s %d files (%s) in %d day groups into %d files (%s)\n",
				c.Table, verb, c.FilesBefore, mib(c.BytesBefore), c.Groups, c.FilesAfter, mib(c.BytesAfter))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func cmdExpire(ctx context.Context, args []string) error {
	fs := newFlagSet("expire")
	olderThan := fs.Duration("older-than", 24*time.Hour, "expire snapshots older than this: 24h keeps a day of time travel, and a metadata file of a day of commits (about 1.2 MiB per process at the default commit interval)")
	retain := fs.Int("retain-last", 1, "always keep this many newest snapshots")
	sinks, err := openIcebergSinksFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer closeIcebergSinks(sinks)
	if *retain < 1 {
		return usagef("expire: --retain-last must be at least 1, got %d", *retain)
	}
	for _, is := range sinks {
		res, err := is.snk.Expire(ctx, *olderThan, *retain)
		for _, e := range res {
			fmt.Printf("%s: expired %d snapshots, %d remain\n", e.Table, e.Expired, e.Remain)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func cmdOrphans(ctx context.Context, args []string) error {
	fs := newFlagSet("orphans")
	grace := fs.Duration("older-than", 7*24*time.Hour, fmt.Sprintf("only files older than this (at least %s): younger ones may belong to a commit in flight", iceberg.MinOrphanAge))
	dryRun := fs.Bool("dry-run", false, "only list the files")
	sinks, err := openIcebergSinksFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer closeIcebergSinks(sinks)
	if *grace < iceberg.MinOrphanAge {
		return usagef("orphans: --older-than %s is below %s: a younger file may belong to a load committing right now", *grace, iceberg.MinOrphanAge)
	}
	for _, is := range sinks {
		res, err := is.snk.RemoveOrphans(ctx, *grace, *dryRun)
		for _, o := range res {
			for _, f := range o.Files {
				fmt.Println(f)
			}
			done := fmt.Sprintf("deleted %d", o.Deleted)
			if *dryRun {
				done = "dry run, none deleted"
			}
			if len(o.Staged) > 0 {
				done += fmt.Sprintf("; kept %d staged by a running tracelake (its lease lists them)", len(o.Staged))
			}
			fmt.Fprintf(os.Stderr, "%s: %d orphan files (%s), %s\n", o.Table, len(o.Files), mib(o.Bytes), done)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// icebergSink is the Iceberg sink of one signal's tables, with the
// signal's configuration (cfg.ForSignal).
type icebergSink struct {
	cfg *config.Config
	snk *iceberg.Sink
}

// openIcebergSinksFor parses args (after the command registered its own
// flags on fs), loads the config and opens the Iceberg sinks of every
// table tracelake writes with it, which must be an Iceberg one: the
// configured sink's first, then the sink of each other signal a
// load-mode run takes (otlp.signals: otel_logs, otel_metrics, …, with
// their dead-letter, derived and dedup tables). Those tables are written
// like the first's, a commit per request: maintained only beside it, they
// would gather small files and snapshots without end.
func openIcebergSinksFor(ctx context.Context, fs *flag.FlagSet, args []string) ([]icebergSink, error) {
	var cf configFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	cfg, err := cf.loadFor(false)
	if err != nil {
		return nil, err
	}
	if cfg.Sink.Type != config.SinkIceberg {
		return nil, usagef("tracelake %s maintains Iceberg tables; sink.type is %s", fs.Name(), cfg.Sink.Type)
	}
	var sinks []icebergSink
	for _, sc := range cfg.SignalConfigs() {
		snk, err := openIceberg(ctx, sc)
		if err != nil {
			closeIcebergSinks(sinks)
			return nil, fmt.Errorf("open the iceberg tables of %s: %w", sc.Sink.Table, err)
		}
		sinks = append(sinks, icebergSink{sc, snk})
	}
	return sinks, nil
}

func closeIcebergSinks(sinks []icebergSink) {
	for _, is := range sinks {
		is.snk.Close()
	}
}
