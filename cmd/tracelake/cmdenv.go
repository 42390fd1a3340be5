package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// cmdEnv is what a command that reads the DuckDB sink (verify, sql,
// report, dlq list, reconcile) runs with. Standalone it loads its config
// and opens the file itself; inside `tracelake run`, asked on run's
// socket (commandServer), it runs the same code on run's config and open
// sink, which it never closes.
type cmdEnv struct {
	stdout, stderr io.Writer
	// running is run's own config and sink; nil standalone.
	running *runningSink
	// beside are all of run's sinks (otlp.signals loads several tables),
	// running among them.
	beside []*runningSink
}

// runningSink is what `tracelake run` lends the commands it answers.
type runningSink struct {
	cfg *config.Config
	snk *duckdb.Sink
	// reader answers `sql`: one SELECT, read-only, for a scope (the
	// file may be loading while it reads). nil if it could not start.
	reader *query.DuckDB
}

// standalone is the environment of a command run from the shell.
var standalone = &cmdEnv{stdout: os.Stdout, stderr: os.Stderr}

// flagSet is the command's flag set, printing to the command's streams.
func (e *cmdEnv) flagSet(name string) *flag.FlagSet {
	return newFlagSetTo(name, e.stdout, e.stderr)
}

// config is the command's config: the one cf loads standalone, run's own
// inside run (the client checked that its config names run's database;
// the other keys are run's, whatever the client's file says).
func (e *cmdEnv) config(cf *configFlags, needKafka bool) (*config.Config, error) {
	if e.running != nil {
		return e.running.cfg, nil
	}
	return cf.loadFor(needKafka)
}

// duckDBUse says what a command does with the DuckDB file it opens.
type duckDBUse struct {
	// prepare creates the sink's tables missing in the file (Prepare).
	prepare bool
	// existing says the command only reads what was loaded: a path where
	// no file is is refused (openDuckDB) rather than made an empty
	// database. Commands that write (dlq replay, merge) and those run on
	// a fresh path on purpose leave it false.
	existing bool
}

// duckDB is the command's DuckDB sink and its release: standalone, the
// file opened as use says, closed by release; inside run, run's own,
// prepared, which release leaves open.
func (e *cmdEnv) duckDB(ctx context.Context, cfg *config.Config, use duckDBUse) (*duckdb.Sink, func(), error) {
	if e.running != nil {
		return e.running.snk, func() {}, nil
	}
	snk, err := openDuckDB(cfg, use.existing)
	if err != nil {
		return nil, nil, err
	}
	if use.prepare {
		if err := snk.Prepare(ctx); err != nil {
			snk.Close()
			return nil, nil, fmt.Errorf("prepare tables: %w", err)
		}
	}
	return snk, func() { snk.Close() }, nil
}

// duckDBBeside is the DuckDB sink of another signal's tables (cfg, a
// config.ForSignal) in main's database, and its release: inside run,
// run's own sink of them; standalone, one opened beside main.
func (e *cmdEnv) duckDBBeside(main *duckdb.Sink, cfg *config.Config) (*duckdb.Sink, func(), error) {
	if e.running != nil {
		for _, r := range e.beside {
			if strings.EqualFold(r.cfg.Sink.Table, cfg.Sink.Table) { // DuckDB's names ignore case
				return r.snk, func() {}, nil
			}
		}
		return nil, nil, fmt.Errorf("this tracelake run loads no table %s", cfg.Sink.Table)
	}
	snk, err := main.Beside(duckDBOptions(cfg))
	if err != nil {
		return nil, nil, err
	}
	return snk, func() { snk.Close() }, nil
}

// open parses args (after the command registered its own flags on fs),
// takes the config and the DuckDB sink, which the caller releases.
// Commands that only read the sink pass needKafka false.
func (e *cmdEnv) open(ctx context.Context, cf *configFlags, fs *flag.FlagSet, args []string, needKafka bool, use duckDBUse) (*config.Config, *duckdb.Sink, func(), error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, nil, err
	}
	cfg, err := e.config(cf, needKafka)
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg.Sink.Type != config.SinkDuckDB {
		return nil, nil, nil, fmt.Errorf("tracelake %s reads the duckdb sink; sink.type is %s (query it with its own client, e.g. bendsql for Databend)", fs.Name(), cfg.Sink.Type)
	}
	snk, release, err := e.duckDB(ctx, cfg, use)
	if err != nil {
		return nil, nil, nil, err
	}
	return cfg, snk, release, nil
}

// commandLogKey carries the logger of a command run inside `tracelake
// run` (withCommandLog).
type commandLogKey struct{}

// withCommandLog is ctx for a command run inside `tracelake run` whose
// standard error is stderr: what the command logs goes there, to the
// client, as a command run from the shell logs to its own standard error
// (cmdLog), not into run's log, where whoever asked would never see why
// (verify checking without Kafka, say).
func withCommandLog(ctx context.Context, stderr io.Writer) context.Context {
	return context.WithValue(ctx, commandLogKey{}, slog.New(slog.NewTextHandler(stderr, nil)))
}

// cmdLog is the logger of the command ctx runs: the client's standard
// error inside run (withCommandLog), the process's default standalone.
func cmdLog(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(commandLogKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// heldError is a DuckDB file another process holds, met opening it: the
// command may go through that process (whileRunHolds).
type heldError struct {
	path  string // the database file, as the config names it
	table string // the config's sink.table
	err   error  // the open's error (duckdb.ErrLocked)
}

func (e heldError) Error() string { return e.err.Error() }
func (e heldError) Unwrap() error { return e.err }

// openDuckDB opens the DuckDB sink of cfg for a command that only queries
// or merges it; a file another process holds is a heldError. existing
// (a command that only reads what was loaded) refuses a path where no
// file is, naming the setting: opened, an empty database was made there,
// with its stage directory, and a mistyped path answered empty. A file
// there that `tracelake run` holds is still a heldError.
func openDuckDB(cfg *config.Config, existing bool) (*duckdb.Sink, error) {
	opt := duckDBOptions(cfg)
	opt.MustExist = existing
	snk, err := duckdb.Open(opt)
	switch {
	case errors.Is(err, duckdb.ErrLocked):
		return nil, heldError{path: cfg.Sink.DuckDB.Path, table: cfg.Sink.Table, err: err}
	case errors.Is(err, duckdb.ErrNoDatabase):
		return nil, fmt.Errorf("sink.duckdb.path: %w at %s (nothing loaded there yet? check the path)", duckdb.ErrNoDatabase, cfg.Sink.DuckDB.Path)
	}
	return snk, err
}
