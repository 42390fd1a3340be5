package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/merge"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/verify"
)

func cmdVerify(ctx context.Context, args []string) error {
	fs := newFlagSet("verify")
	var cf configFlags
	cf.register(fs)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return usageError{err}
	}
	cfg, err := cf.loadFor(true)
	if err != nil {
		return err
	}
	var rep *verify.Report
	if cfg.Sink.Type == config.SinkDatabend {
		snk, err := openDatabend(cfg)
		if err != nil {
			return err
		}
		main, dlq, ledger := snk.Tables()
		if rep, err = runVerify(ctx, cfg, snk, verify.Tables{Main: main, DLQ: dlq, Ledger: ledger, Topic: databend.TopicExpr}); err != nil {
			return err
		}
	} else {
		snk, err := openDuckDB(cfg)
		if err != nil {
			return err
		}
		defer snk.Close()
		if rep, err = verifyDuckDB(ctx, cfg, snk); err != nil {
			return err
		}
		mg := merge.NewMerger(snk.DB(), slog.Default())
		for _, m := range cfg.Models() {
			n, err := mg.Pending(ctx, m)
			if err != nil {
				return err
			}
			rep.Models = append(rep.Models, verify.ModelProgress{Model: m.Name, Pending: n})
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		rep.WriteText(os.Stdout)
	}
	if !rep.OK {
		return failedCheck{}
	}
	return nil
}

// verifyDuckDB verifies the DuckDB sink snk.
func verifyDuckDB(ctx context.Context, cfg *config.Config, snk *duckdb.Sink) (*verify.Report, error) {
	t := snk.Tables()
	return runVerify(ctx, cfg, verify.SQLQuerier{DB: snk.DB()}, verify.Tables{Main: t.Main, DLQ: t.DLQ, Ledger: t.Ledger, Topic: duckdb.TopicExpr})
}

// runVerify asks Kafka for watermarks (going on without them if it cannot
// answer) and checks the ledger and tables.
func runVerify(ctx context.Context, cfg *config.Config, db verify.Querier, t verify.Tables) (*verify.Report, error) {
	var marks map[sink.TopicPartition]kafka.Watermarks
	if admin, err := kafka.NewAdmin(cfg.Kafka); err == nil {
		qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		marks, err = admin.ConsumedWatermarks(qctx, cfg.Kafka)
		cancel()
		admin.Close()
		if err != nil {
			slog.Warn("Kafka watermarks unavailable; checking ledger and tables only", "err", err)
		}
	}
	t.Raw = cfg.Mode == config.ModeRaw
	rep, err := verify.Run(ctx, db, t, marks, cfg.Kafka.StartOffset == "earliest")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	return rep, nil
}
