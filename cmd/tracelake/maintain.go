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
	snk, cfg, err := openIcebergConfigFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer snk.Close()
	if target == 0 {
		// The size scheduled maintenance compacts to: one size of file
		// whoever compacts (at least 1MiB: config validation).
		target = cfg.Sink.Iceberg.Maintenance.TargetFileSize
	}
	fmt.Printf("compacting to files of %s\n", target)
	res, err := snk.Compact(ctx, int64(target), time.Now().Add(-*minAge), *dryRun)
	for _, c := range res {
		verb := "rewrote"
		if *dryRun {
			verb = "would rewrite"
		}
		fmt.Printf("%s: %s %d files (%s) in %d day groups into %d files (%s)\n",
			c.Table, verb, c.FilesBefore, mib(c.BytesBefore), c.Groups, c.FilesAfter, mib(c.BytesAfter))
	}
	return err
}

func cmdExpire(ctx context.Context, args []string) error {
	fs := newFlagSet("expire")
	olderThan := fs.Duration("older-than", 24*time.Hour, "expire snapshots older than this: 24h keeps a day of time travel, and a metadata file of a day of commits (about 1.2 MiB per process at the default commit interval)")
	retain := fs.Int("retain-last", 1, "always keep this many newest snapshots")
	snk, err := openIcebergFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer snk.Close()
	if *retain < 1 {
		return usagef("expire: --retain-last must be at least 1, got %d", *retain)
	}
	res, err := snk.Expire(ctx, *olderThan, *retain)
	for _, e := range res {
		fmt.Printf("%s: expired %d snapshots, %d remain\n", e.Table, e.Expired, e.Remain)
	}
	return err
}

func cmdOrphans(ctx context.Context, args []string) error {
	fs := newFlagSet("orphans")
	grace := fs.Duration("older-than", 7*24*time.Hour, fmt.Sprintf("only files older than this (at least %s): younger ones may belong to a commit in flight", iceberg.MinOrphanAge))
	dryRun := fs.Bool("dry-run", false, "only list the files")
	snk, err := openIcebergFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer snk.Close()
	if *grace < iceberg.MinOrphanAge {
		return usagef("orphans: --older-than %s is below %s: a younger file may belong to a load committing right now", *grace, iceberg.MinOrphanAge)
	}
	res, err := snk.RemoveOrphans(ctx, *grace, *dryRun)
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
	return err
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// openIcebergFor parses args (after the command registered its own flags
// on fs), loads the config and opens the Iceberg sink, which must be the
// configured one.
func openIcebergFor(ctx context.Context, fs *flag.FlagSet, args []string) (*iceberg.Sink, error) {
	snk, _, err := openIcebergConfigFor(ctx, fs, args)
	return snk, err
}

// openIcebergConfigFor is openIcebergFor, returning the config too.
func openIcebergConfigFor(ctx context.Context, fs *flag.FlagSet, args []string) (*iceberg.Sink, *config.Config, error) {
	var cf configFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, usageError{err}
	}
	cfg, err := cf.loadFor(false)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Sink.Type != config.SinkIceberg {
		return nil, nil, usagef("tracelake %s maintains Iceberg tables; sink.type is %s", fs.Name(), cfg.Sink.Type)
	}
	snk, err := openIceberg(ctx, cfg)
	return snk, cfg, err
}
