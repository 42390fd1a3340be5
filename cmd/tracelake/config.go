package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/schema"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// configFlags are the flags for the common keys, applied over the file and
// the environment.
type configFlags struct {
	path    string
	brokers string
	topics  string
	group   string
	workers int
	table   string
	duckdb  string
	mode    string
	// fs is the flag set registered on, to tell a flag given as 0 or ""
	// from one not given; nil for a configFlags built in code, whose
	// zero values mean "not given".
	fs *flag.FlagSet
	// unset are flags a command read for a meaning of its own (ready's
	// --table names a model): they leave their keys as configured.
	unset map[string]bool
}

// leaveKey makes the flag name count as not given, its key as configured.
func (f *configFlags) leaveKey(name string) {
	if f.unset == nil {
		f.unset = map[string]bool{}
	}
	f.unset[name] = true
}

func (f *configFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.path, "config", "", "config file (YAML, or the reference tool's JSON)")
	fs.StringVar(&f.brokers, "brokers", "", "kafka.brokers, comma-separated host:port")
	fs.StringVar(&f.topics, "topics", "", "kafka.topics, comma-separated")
	fs.StringVar(&f.group, "group", "", "kafka.group")
	fs.IntVar(&f.workers, "workers", 0, "workers")
	fs.StringVar(&f.table, "table", "", "sink.table")
	fs.StringVar(&f.duckdb, "duckdb", "", "sink.duckdb.path")
	fs.StringVar(&f.mode, "mode", "", "mode: raw or transform")
}

// loadFor reads the file and the environment, applies the flags and
// validates. Any problem is a usage error (exit 2) listing every bad key.
// With needKafka false (commands that only read the sink) a config without
// topics is accepted; with it (verify, which asks Kafka where each
// partition ends) the kafka.tls files are read and parsed too: without
// them its client cannot be made, and verify checks the tables only.
func (f *configFlags) loadFor(needKafka bool) (*config.Config, error) {
	if needKafka {
		return f.load(true, (*config.Config).CheckKafkaFiles)
	}
	return f.load(false, nil)
}

// loadMerge is loadFor for tracelake merge, which asks Kafka (its files
// read and parsed up front, as verify's) only with change capture: where
// the changelog topics end holds the marks back.
func (f *configFlags) loadMerge() (*config.Config, error) {
	return f.load(false, func(c *config.Config) error {
		if !c.CapturesChanges() {
			return nil
		}
		return c.CheckKafkaFiles()
	})
}

// loadService is loadFor for tracelake run: the files the service reads
// at start (TLS, tokens) are read and parsed too, a bad one reported with
// the bad keys. The other commands use none or some of them, and an
// operator running those may not be able to read the others.
func (f *configFlags) loadService(needKafka bool) (*config.Config, error) {
	return f.load(needKafka, (*config.Config).CheckFiles)
}

// loadServe is loadFor for tracelake serve, whose query listeners read
// query.tls and the tokens, and nothing of the receivers or Kafka.
func (f *configFlags) loadServe() (*config.Config, error) {
	return f.load(false, (*config.Config).CheckQueryFiles)
}

// load is loadFor with checkFiles (nil: none), the check of the files the
// command reads.
func (f *configFlags) load(needKafka bool, checkFiles func(*config.Config) error) (*config.Config, error) {
	cfg, loadErr := f.effective()
	if cfg == nil {
		return nil, usageError{loadErr}
	}
	validate := cfg.Validate
	if !needKafka {
		validate = cfg.ValidateOffline
	}
	var filesErr error
	if checkFiles != nil {
		filesErr = checkFiles(cfg)
	}
	if err := errors.Join(loadErr, validate(), filesErr); err != nil {
		return nil, usageError{fmt.Errorf("bad config:\n%s", indent(err))}
	}
	return cfg, nil
}

// effective is the config after file, environment and flags, with the
// problems found reading it (cfg is nil only if the file cannot be read
// or parsed).
func (f *configFlags) effective() (*config.Config, error) {
	if f.path == "" && f.given("config", false) {
		// --config "$CFG" with CFG unset: read as no file, the command
		// ran on the defaults (sql created ./tracelake.duckdb).
		return nil, errors.New("--config is empty (an unset variable?): give a file, or leave --config out for the defaults and the TRACELAKE_* environment")
	}
	return config.FromFile(f.path, f.apply)
}

// apply sets the keys given as flags. A flag on the command line is
// applied whatever its value, so that --workers 0 or --mode "" is
// refused by validation like the same value in the file, rather than
// leaving the file's value in force without a word.
func (f *configFlags) apply(cfg *config.Config) {
	if f.given("brokers", f.brokers != "") {
		// Given empty, an empty list (refused where topics are read),
		// not nil, which would take the default broker.
		cfg.Kafka.Brokers = append([]string{}, splitComma(f.brokers)...)
	}
	if f.given("topics", f.topics != "") {
		cfg.Kafka.Topics = splitComma(f.topics)
	}
	if f.given("group", f.group != "") {
		cfg.Kafka.Group = f.group
	}
	if f.given("workers", f.workers != 0) {
		cfg.Workers = f.workers
	}
	if f.given("table", f.table != "") {
		cfg.Sink.Table = f.table
	}
	if f.given("duckdb", f.duckdb != "") {
		cfg.Sink.DuckDB.Path = f.duckdb
	}
	if f.given("mode", f.mode != "") {
		cfg.Mode = f.mode
	}
}

// given reports whether the flag name was on the command line; set says
// so for a configFlags not parsed from one.
func (f *configFlags) given(name string, set bool) bool {
	if f.unset[name] {
		return false
	}
	if f.fs == nil || !f.fs.Parsed() {
		return set
	}
	found := false
	f.fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

func indent(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// openDuckDBBesidePipeline opens the DuckDB sink of cfg for a pipeline
// loading it from this process (see duckdb.Options.BesidePipeline).
func openDuckDBBesidePipeline(cfg *config.Config) (*duckdb.Sink, error) {
	opt := duckDBOptions(cfg)
	opt.BesidePipeline = true
	return duckdb.Open(opt)
}

func duckDBOptions(cfg *config.Config) duckdb.Options {
	return duckdb.Options{
		Path:            cfg.Sink.DuckDB.Path,
		StageDir:        cfg.StageDir(),
		Table:           cfg.Sink.Table,
		Transform:       cfg.Mode == config.ModeTransform,
		Typed:           typedTable(cfg),
		Derived:         derivedTable(cfg),
		DerivedTable:    derivedName(cfg),
		Routed:          cfg.CapturesChanges(),
		DistributeEvery: cfg.CDC.DistributeEvery.D(),
		Zstd:            cfg.Zstd(),
		MemoryLimit:     int64(cfg.DuckDBMemoryLimit()),
		Threads:         cfg.Sink.DuckDB.Threads,
		JSONCompression: duckdb.JSONCompression(cfg.Sink.DuckDB.JSONCompression),
		Log:             slog.Default(),
	}
}

// typedTable is the declared table the configuration loads, nil for the
// raw table or the user's.
func typedTable(cfg *config.Config) *schema.Table {
	if cfg.DecodesOTLP() {
		return otel.TableOf(cfg.Kafka.Signal)
	}
	return nil
}

// derivedTable is the table derived from the typed table's rows in the
// same load (genai_operations), nil for none; derivedName is its name.
func derivedTable(cfg *config.Config) *schema.Table {
	if cfg.GenAIOperations() {
		return &genai.Table
	}
	return nil
}

func derivedName(cfg *config.Config) string {
	if cfg.GenAIOperations() {
		return cfg.GenAI.Table
	}
	return ""
}

// parseFlags parses a command's flags and refuses any argument left after
// them. Go's flag package stops at the first argument that is not a flag
// and leaves the rest unread: `tracelake merge config.yaml --every 1m`
// ran on the defaults (creating ./tracelake.duckdb) with neither the
// file nor --every, and `tracelake run --config F x --workers 4` without
// --workers, all without a word.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseOnly(fs, args); err != nil {
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q: the command takes flags only (a config file is --config FILE), and flags after an argument are not read", fs.Name(), fs.Arg(0))
	}
	return nil
}

// parseOnly is fs.Parse, then what it printed goes where it belongs:
// the usage asked for with -h is the answer, to stdout as `tracelake
// --help` prints it; an error and the usage explaining it go to stderr.
// Parsing alone cannot tell them apart while it prints.
func parseOnly(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if out, ok := fs.Output().(*flagOutput); ok {
		out.flush(errors.Is(err, flag.ErrHelp))
	}
	return err
}

func newFlagSet(name string) *flag.FlagSet {
	return newFlagSetTo(name, os.Stdout, os.Stderr)
}

// newFlagSetTo is a command's flag set whose usage goes to stdout when
// asked for, to stderr after a bad flag (see parseOnly).
func newFlagSetTo(name string, stdout, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{help: stdout, errs: stderr})
	return fs
}

// flagOutput holds what a flag set prints while it parses, until
// parseOnly knows whether it answers -h (help) or explains an error
// (errs).
type flagOutput struct {
	help, errs io.Writer
	held       bytes.Buffer
}

func (o *flagOutput) Write(p []byte) (int, error) { return o.held.Write(p) }

func (o *flagOutput) flush(asked bool) {
	to := o.errs
	if asked {
		to = o.help
	}
	to.Write(o.held.Bytes()) // nowhere to report a failed write of the usage
	o.held.Reset()
}
