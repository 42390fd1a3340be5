package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
)

// modelMerger merges one model once, in one transaction, from the model's
// watermark on: in DuckDB or in Databend.
type modelMerger interface {
	Merge(ctx context.Context, m config.Model) (merge.Result, error)
}

// openSink opens the configured sink for `tracelake run`, with the merger
// that goes with it; the sink reports what it measures to metrics and the
// status page.
func openSink(ctx context.Context, cfg *config.Config, metrics *obs.Metrics, status *obs.Status) (sink.Sink, modelMerger, error) {
	if cfg.Sink.Type == config.SinkIceberg {
		snk, err := openIcebergReporting(ctx, cfg, commitReporter(metrics, status))
		if err != nil || !cfg.DecodesOTLP() {
			return snk, nil, err // other models are not built for Iceberg (validation says so)
		}
		return snk, dedupMerger(cfg, snk), nil
	}
	if cfg.Sink.Type == config.SinkDatabend {
		snk, err := openDatabend(cfg)
		if err != nil {
			return nil, nil, err
		}
		if cfg.DecodesOTLP() {
			return snk, dedupMerger(cfg, snk), nil
		}
		return snk, merge.NewDatabendMerger(snk, false), nil
	}
	snk, err := openDuckDBBesidePipeline(cfg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.DecodesOTLP() {
		return snk, dedupMerger(cfg, snk), nil
	}
	return snk, merge.NewMerger(snk.DB(), slog.Default()), nil
}

// commitReporter reports an Iceberg sink's commits to metrics and the
// status page.
func commitReporter(metrics *obs.Metrics, status *obs.Status) func(iceberg.CommitStats) {
	return func(st iceberg.CommitStats) {
		status.AddCommit(obs.CommitAttempt{Table: st.Table, Took: st.Took, Conflict: st.Conflict, Failed: st.Failed,
			Snapshots: int64(st.Snapshots), MetadataBytes: st.MetadataBytes})
		metrics.IcebergCommitDuration.WithLabelValues(st.Table).Observe(st.Took.Seconds())
		if st.Conflict {
			metrics.IcebergCommitConflicts.WithLabelValues(st.Table).Inc()
		}
		if st.Snapshots > 0 {
			metrics.IcebergSnapshots.WithLabelValues(st.Table).Set(float64(st.Snapshots))
		}
		if st.MetadataBytes > 0 {
			metrics.IcebergMetadataBytes.WithLabelValues(st.Table).Set(float64(st.MetadataBytes))
		}
	}
}

func openIceberg(ctx context.Context, cfg *config.Config) (*iceberg.Sink, error) {
	return openIcebergReporting(ctx, cfg, nil)
}

// openIcebergReporting opens the Iceberg sink, telling onCommit (if not
// nil) of each load's commit.
func openIcebergReporting(ctx context.Context, cfg *config.Config, onCommit func(iceberg.CommitStats)) (*iceberg.Sink, error) {
	return iceberg.Open(ctx, iceberg.Options{
		OnCommit:  onCommit,
		Catalog:   cfg.Sink.Iceberg.Catalog,
		Warehouse: cfg.Sink.Iceberg.Warehouse,
		Namespace: cfg.Sink.Iceberg.Namespace,
		Table:     cfg.Sink.Table,
		Adopt:     cfg.Sink.Iceberg.Adopt,
		// A SQL catalog stores the name with each table.
		CatalogName:     cfg.Sink.Iceberg.CatalogName,
		TableProperties: cfg.Sink.Iceberg.TableProperties,
		PartitionBy:     cfg.Sink.Iceberg.PartitionBy,
		Typed:           typedTable(cfg),
		Derived:         derivedTable(cfg),
		DerivedTable:    derivedName(cfg),
		DedupTable:      dedupName(cfg),
		// The workers' loads come at the same moments (AlignLoads):
		// one commit takes them all.
		GroupWait:       200 * time.Millisecond,
		TargetFileBytes: int64(cfg.Sink.Iceberg.Maintenance.TargetFileSize),
		S3:              iceberg.S3(cfg.Sink.Iceberg.S3),
		REST:            iceberg.REST(cfg.Sink.Iceberg.REST),
		Log:             slog.Default(),
	})
}

// dedupName is the dedup model's target of an OpenTelemetry table; "" for
// a raw table.
func dedupName(cfg *config.Config) string {
	if !cfg.DecodesOTLP() {
		return ""
	}
	return otelDedupOf(cfg).Target()
}

// databendDedupOf is the dedup model on Databend as the sink's Prepare
// makes it: its tables, the target and its scratch increment, and its
// statements (the watermark's setup, and its reset when the target is
// created anew); none for a raw table.
func databendDedupOf(cfg *config.Config) (tables []string, st merge.DatabendStatements) {
	if !cfg.DecodesOTLP() {
		return nil, st
	}
	d := otelDedupOf(cfg)
	return []string{d.Target(), d.DatabendIncrement()}, d.Databend()
}

func openDatabend(cfg *config.Config) (*databend.Sink, error) {
	d := cfg.Sink.Databend
	dedupTables, dedup := databendDedupOf(cfg)
	return databend.Open(databend.Options{
		DSN:                 d.DSN,
		Table:               cfg.Sink.Table,
		Transform:           cfg.Mode == config.ModeTransform,
		Typed:               typedTable(cfg),
		Derived:             derivedTable(cfg),
		DerivedTable:        derivedName(cfg),
		DedupTables:         dedupTables,
		Setup:               dedup.Setup,
		DedupReset:          dedup.Reset,
		Stage:               d.Stage,
		Prefix:              cfg.DatabendPrefix(),
		Purge:               d.Purge,
		DisableVariantCheck: d.DisableVariantCheck,
		StreamingLoad:       d.StreamingLoad,
		Zstd:                cfg.Zstd(),
		Uploads:             d.Uploads,
		Timeout:             d.Timeout.D(),
		Log:                 slog.Default(),
	})
}
