package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// Scheduled Iceberg maintenance (sink.iceberg.maintenance): in `tracelake
// run` beside the loads, or in `tracelake maintain`, a process of its own.
// Either way one process of those sharing the catalog runs a round at a
// time (internal/sink/iceberg/maintainer.go).

// maintenanceLeaseRounds is how many rounds a maintenance lease lasts: a
// holder that stopped is replaced within that many intervals, and one
// slow round does not let another process in.
const maintenanceLeaseRounds = 3

func maintainer(cfg *config.Config, ice *iceberg.Sink) *iceberg.Maintainer {
	m := cfg.Sink.Iceberg.Maintenance
	return ice.NewMaintainer(iceberg.MaintenanceOptions{
		TargetFileBytes: int64(m.TargetFileSize), SmallFiles: m.SmallFiles,
		ExpireOlderThan: m.ExpireAfter.D(), RetainLast: m.RetainLast,
		Lease:   maintenanceLeaseRounds * max(m.Every.D(), time.Minute),
		OnRound: logRound,
	})
}

// startMaintenance runs the maintenance rounds beside the loads if
// sink.iceberg.maintenance.every is set; stop waits for a round in
// progress to end (its commits are each whole).
func startMaintenance(ctx context.Context, cfg *config.Config, ice *iceberg.Sink) (stop func()) {
	every := cfg.Sink.Iceberg.Maintenance.Every.D()
	if every == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { maintainer(cfg, ice).Run(ctx, every) })
	slog.Info("iceberg maintenance scheduled", "every", every, "small_files", cfg.Sink.Iceberg.Maintenance.SmallFiles,
		"target_file_size", cfg.Sink.Iceberg.Maintenance.TargetFileSize)
	return func() { cancel(); wg.Wait() }
}

// logRound logs what a scheduled round changed (a failed one Run logs).
func logRound(r iceberg.MaintenanceRound, _ error) {
	var compacted, into, manifests, expired int
	for _, c := range r.Compacted {
		compacted, into = compacted+c.FilesBefore, into+c.FilesAfter
	}
	for _, m := range r.Manifests {
		manifests += m.Before - m.After
	}
	for _, e := range r.Expired {
		expired += e.Expired
	}
	if compacted+manifests+expired > 0 {
		slog.Info("iceberg maintenance round", "compacted_files", compacted, "into", into,
			"manifests_merged", manifests, "snapshots_expired", expired)
	}
}

func cmdMaintain(ctx context.Context, args []string) error {
	fs := newFlagSet("maintain")
	once := fs.Bool("once", false, "run one round and print it, instead of one every sink.iceberg.maintenance.every")
	sinks, err := openIcebergSinksFor(ctx, fs, args)
	if err != nil {
		return err
	}
	defer closeIcebergSinks(sinks)
	every := sinks[0].cfg.Sink.Iceberg.Maintenance.Every.D()
	if !*once {
		if every == 0 {
			return usagef("maintain: sink.iceberg.maintenance.every is 0 (off): set it, or run with --once")
		}
		// Each signal's tables have a maintainer (and a lease) of their own.
		var wg sync.WaitGroup
		for _, is := range sinks {
			wg.Go(func() { maintainer(is.cfg, is.snk).Run(ctx, every) })
		}
		wg.Wait()
		return nil
	}
	for _, is := range sinks {
		r, err := maintainer(is.cfg, is.snk).Round(ctx)
		if r.HeldBy != "" {
			fmt.Printf("%s: skipped: %s holds the maintenance lease\n", is.cfg.Sink.Table, r.HeldBy)
		}
		for _, c := range r.Compacted {
			fmt.Printf("%s: compacted %d files (%s) into %d (%s)\n", c.Table, c.FilesBefore, mib(c.BytesBefore), c.FilesAfter, mib(c.BytesAfter))
		}
		for _, m := range r.Manifests {
			fmt.Printf("%s: %d manifests, %d after the rewrite\n", m.Table, m.Before, m.After)
		}
		for _, e := range r.Expired {
			fmt.Printf("%s: expired %d snapshots, %d remain\n", e.Table, e.Expired, e.Remain)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
