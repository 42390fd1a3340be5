// Command tracelake moves JSON messages from Kafka into analytical tables,
// exactly once, and proves it. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/tracelake/tracelake/internal/config"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes: 0 ok, 1 failed check or runtime failure, 2 bad usage or config.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// usageError marks errors that exit with code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

const usage = `tracelake moves JSON from Kafka into analytical tables, exactly once.

Usage:
  tracelake run     --config F [--exit-when-idle D]   ingest until stopped (or idle)
  tracelake verify  --config F [--json]               compare Kafka, ledger and tables
  tracelake sql     --config F "SELECT …"             query the DuckDB or Iceberg sink
  tracelake serve   --config F                        Iceberg: serve Flight SQL (query.flight_sql) and the Grafana APIs (query.http), ingesting nothing
  tracelake config  --config F                        print the effective config (secrets redacted), validate it
  tracelake dlq     list|replay --config F [--where SQL] [--dry-run]   inspect or replay dead-letter rows
  tracelake merge   --config F [--model M] [--every D] | --rebuild M | --print-sql [--dialect databend|duckdb]
                                                      merge the raw table into the modelled tables
  tracelake reconcile --config F --left T1 --right T2 --key K [--columns C] | --model M
                                                      compare two tables (exit 1 when they differ)
  tracelake reconcile --config F --source mysql://U:P@HOST:PORT/DB --table DB.T [--model M] [--batch N] [--rate R]
                                                      compare a CDC model with its live MySQL/MariaDB table
  tracelake ready   --config F --table T --hour H [--wait D]   exit 0 once a CDC model's hour is marked done
  tracelake compact --config F [--target-size 128MiB] [--min-age 1h] [--dry-run]   Iceberg: rewrite small files per day
  tracelake expire  --config F [--older-than 24h] [--retain-last 1]  Iceberg: remove old snapshots
  tracelake orphans --config F [--older-than 168h] [--dry-run]      Iceberg: delete unreferenced files
  tracelake maintain --config F [--once]              Iceberg: compact, rewrite manifests, expire every sink.iceberg.maintenance.every
  tracelake prices  list|match MODEL|update --file F  the LLM price table genai_operations is priced from
  tracelake report  --config F [--since 7d] [--tenant T] [-o report.html]   GenAI operations: tokens, cost, latency, errors
  tracelake gen     --brokers B --topic T --messages N [--partitions P]
  tracelake demo    [--otlp [--serve ADDR]]           embedded Kafka → DuckDB, end to end (--otlp: traces, logs, metrics over OTLP)
  tracelake version

While 'tracelake run' holds its DuckDB file, verify, sql, report, dlq list,
reconcile and ready go through it (its socket beside the file).

Run 'tracelake COMMAND -h' for the flags of a command.
`

func main() {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	stop := cpuProfile()
	code := run(os.Args[1:])
	stop()
	os.Exit(code)
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitUsage
	}
	ctx, hard := signalContexts()
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(ctx, hard, args[1:])
	case "verify":
		err = cmdVerify(ctx, standalone, args[1:])
	case "sql":
		err = cmdSQL(ctx, standalone, args[1:])
	case "config":
		err = cmdConfig(args[1:])
	case "dlq":
		err = cmdDLQ(ctx, standalone, args[1:])
	case "merge":
		err = cmdMerge(ctx, args[1:])
	case "reconcile":
		err = cmdReconcile(ctx, standalone, args[1:])
	case "ready":
		err = cmdReady(ctx, standalone, args[1:])
	case "serve":
		err = cmdServe(ctx, args[1:])
	case "compact":
		err = cmdCompact(ctx, args[1:])
	case "expire":
		err = cmdExpire(ctx, args[1:])
	case "orphans":
		err = cmdOrphans(ctx, args[1:])
	case "maintain":
		err = cmdMaintain(ctx, args[1:])
	case "report":
		err = cmdReport(ctx, standalone, args[1:])
	case "prices":
		err = cmdPrices(ctx, args[1:])
	case "gen":
		err = cmdGen(ctx, args[1:])
	case "demo":
		err = cmdDemo(ctx, hard, args[1:])
	case "version", "--version":
		fmt.Println("tracelake", version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "tracelake: %s\n\n%s", unknownCommand(args[0]), usage)
		return exitUsage
	}
	var held heldError
	if errors.As(err, &held) {
		// `tracelake run` (or another process) holds the DuckDB file.
		err = whileRunHolds(ctx, held, args)
	}
	code, msg := exitStatus(err)
	if msg != "" {
		fmt.Fprintln(os.Stderr, "tracelake:", msg)
	}
	return code
}

// usageCommand is a command's name where the usage shows it.
var usageCommand = regexp.MustCompile(`(?m)^  tracelake (\S+)`)

// unknownCommand says name is no command and, when it is a letter or two
// from one (verfy), which: the commands are those the usage lists.
func unknownCommand(name string) string {
	var commands []string
	for _, m := range usageCommand.FindAllStringSubmatch(usage, -1) {
		commands = append(commands, m[1])
	}
	if near, ok := config.Nearest(name, commands); ok {
		return fmt.Sprintf("unknown command %q (did you mean %q?)", name, near)
	}
	return fmt.Sprintf("unknown command %q", name)
}

// exitStatus is the exit code of a command that returned err and what it
// prints after "tracelake: " ("" for nothing).
func exitStatus(err error) (int, string) {
	var ue usageError
	var fe failedCheck
	var re remoteExit
	switch {
	case err == nil:
		return exitOK, ""
	case errors.Is(err, flag.ErrHelp):
		// -h or -help: the flag set printed the command's usage; asking
		// for it is no error, as `tracelake --help` is not.
		return exitOK, ""
	case errors.As(err, &re):
		return re.code, re.msg // as the command said inside tracelake run
	case errors.As(err, &ue):
		return exitUsage, err.Error()
	case errors.As(err, &fe):
		return exitFailed, "" // the report was printed already
	default:
		return exitFailed, err.Error()
	}
}

// failedCheck is returned by commands whose check failed after printing why.
type failedCheck struct{}

func (failedCheck) Error() string { return "check failed" }

// signalContexts returns a context canceled by the first SIGINT or SIGTERM
// (stop reading, load what is pending, commit, exit 0) and one canceled by
// the second, which also exits at once: nothing is committed past what is
// loaded, so an immediate exit loses nothing.
func signalContexts() (ctx, hard context.Context) {
	ctx, stop := context.WithCancel(context.Background())
	hard, abort := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		slog.Info("signal received: stopping intake, loading what is pending (signal again to exit at once)", "signal", s.String())
		stop()
		s = <-ch
		slog.Warn("second signal: exiting at once; pending records will be read again on the next start", "signal", s.String())
		abort()
		os.Exit(exitFailed)
	}()
	return ctx, hard
}
