package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tracelake/tracelake/internal/prices"
)

const pricesUsage = `tracelake prices list [--config F] [--provider P]        the price table: each model's prices now
tracelake prices match MODEL [--provider P] [--at T] [--config F]   the price an operation of MODEL gets
tracelake prices update --file F --config C             check F (scripts/export-genai-prices.sh) and use it
                                                        from now on (genai.prices_file)`

// cmdPrices is `tracelake prices`: inspect the LLM price table, or install
// a newer export of it without a rebuild.
func cmdPrices(_ context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("tracelake prices: want list, match or update:\n%s", pricesUsage)
	}
	fs := newFlagSet("prices " + args[0])
	cfgPath := fs.String("config", "", "config file: its genai.prices_file (default: the table built in)")
	provider := fs.String("provider", "", "provider (a gen_ai.provider.name value such as openai, anthropic, aws.bedrock)")
	switch args[0] {
	case "list":
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		table, err := pricesOf(fs, *cfgPath)
		if err != nil {
			return err
		}
		return listPrices(os.Stdout, table, *provider, time.Now())
	case "match":
		at := fs.String("at", "", "the operation's time, RFC 3339 (default now): prices change over time")
		model, rest := "", args[1:]
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			model, rest = rest[0], rest[1:]
		}
		if err := parseOnly(fs, rest); err != nil {
			return usageError{err}
		}
		if model == "" && fs.NArg() > 0 {
			// The model after the flags: the flags after it are read
			// too (parsing stopped at it).
			model = fs.Arg(0)
			rest = fs.Args()[1:]
		} else {
			rest = fs.Args()
		}
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		if model == "" {
			return usagef("tracelake prices match MODEL: name a model")
		}
		when := time.Now()
		if *at != "" {
			var err error
			if when, err = time.Parse(time.RFC3339, *at); err != nil {
				return usagef("--at %q: want RFC 3339, such as 2026-11-30T12:00:00Z", *at)
			}
		}
		table, err := pricesOf(fs, *cfgPath)
		if err != nil {
			return err
		}
		return matchPrice(os.Stdout, table, *provider, model, when)
	case "update":
		file := fs.String("file", "", "a price table exported by scripts/export-genai-prices.sh")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		if *file == "" || *cfgPath == "" {
			return usagef("tracelake prices update: want --file F and --config C")
		}
		return updatePrices(os.Stdout, *cfgPath, *file)
	case "-h", "--help", "help":
		fmt.Println(pricesUsage)
		return nil
	}
	return usagef("tracelake prices %s: want list, match or update:\n%s", args[0], pricesUsage)
}

// pricesOf is the price table a config uses: its genai.prices_file, or the
// one built in (also without a config). fs is the flag set --config was
// read with: given empty, it is refused as every command refuses it.
func pricesOf(fs *flag.FlagSet, cfgPath string) (*prices.Table, error) {
	cf := configFlags{path: cfgPath, fs: fs}
	if cfgPath == "" && !cf.given("config", false) {
		return prices.Embedded(), nil
	}
	cfg, err := cf.loadFor(false)
	if err != nil {
		return nil, err
	}
	t, err := prices.Load(cfg.GenAI.PricesFile)
	if err != nil {
		return nil, fmt.Errorf("genai.prices_file %s: %w", cfg.GenAI.PricesFile, err)
	}
	return t, nil
}

func listPrices(w io.Writer, t *prices.Table, provider string, now time.Time) error {
	fmt.Fprintf(w, "%s, exported %s; %s\n", t.Source, t.Exported, t.License)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "PRICE ID\tINPUT $/M\tCACHE READ $/M\tCACHE WRITE $/M\tOUTPUT $/M")
	shown := 0
	for i := range t.Providers {
		p := &t.Providers[i]
		if provider != "" && p.ID != provider {
			continue
		}
		for j := range p.Models {
			m := &p.Models[j]
			pr := m.PricesAt(now)
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\n", p.ID, m.ID, perMillion(pr.Input), perMillion(pr.CacheRead), perMillion(pr.CacheWrite), perMillion(pr.Output))
			shown++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shown == 0 {
		return fmt.Errorf("no models of provider %q (provider ids are the table's: %s)", provider, providerIDs(t))
	}
	return nil
}

func providerIDs(t *prices.Table) string {
	ids := make([]string, len(t.Providers))
	for i, p := range t.Providers {
		ids[i] = p.ID
	}
	return strings.Join(ids, ", ")
}

// perMillion shows a price in dollars per million tokens ("-" when the
// model has none; "3 (6 over 200000)" with tiers).
func perMillion(p prices.Price) string {
	if !p.Set {
		return "-"
	}
	s := dollars(p.Base)
	for _, t := range p.Tiers {
		s += fmt.Sprintf(" (%s over %d)", dollars(t.Price), t.Start)
	}
	return s
}

// dollars formats micro-dollars.
func dollars(micros int64) string {
	s := fmt.Sprintf("%d.%06d", micros/1e6, micros%1e6)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

func matchPrice(w io.Writer, t *prices.Table, provider, model string, at time.Time) error {
	f, ok := t.Find(provider, model, at)
	if !ok {
		return fmt.Errorf("no price for model %q (provider %q): its operations keep a null cost", model, provider)
	}
	pr := f.Prices
	fmt.Fprintf(w, "price_id     %s\nprice_match  %s\ninput        %s $/M tokens\ncache read   %s $/M tokens\ncache write  %s $/M tokens\noutput       %s $/M tokens\n",
		f.ID(), f.How, perMillion(pr.Input), perMillion(pr.CacheRead), perMillion(pr.CacheWrite), perMillion(pr.Output))
	if pr.Requests.Set {
		fmt.Fprintf(w, "requests     %s $ per thousand\n", perMillion(pr.Requests))
	}
	return nil
}

// updatePrices checks file and installs it as the config's
// genai.prices_file, atomically: a running tracelake keeps the table it
// read at start; the next start, and merge --rebuild genai_operations,
// price with this one.
func updatePrices(w io.Writer, cfgPath, file string) error {
	cf := configFlags{path: cfgPath}
	cfg, err := cf.loadFor(false)
	if err != nil {
		return err
	}
	if cfg.GenAI.PricesFile == "" {
		return usagef("genai.prices_file is not set in %s: set it to where tracelake should keep the price table (for example %s)",
			cfgPath, filepath.Join(filepath.Dir(cfg.Sink.DuckDB.Path), "genai-prices.json"))
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	t, err := prices.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	models := 0
	for _, p := range t.Providers {
		models += len(p.Models)
	}
	tmp := cfg.GenAI.PricesFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, cfg.GenAI.PricesFile); err != nil {
		return err
	}
	fmt.Fprintf(w, "installed %s (%s, exported %s: %d providers, %d models", cfg.GenAI.PricesFile, t.Source, t.Exported, len(t.Providers), models)
	if t.Skipped > 0 {
		fmt.Fprintf(w, "; %d with a match Go cannot read, never matched", t.Skipped)
	}
	fmt.Fprintf(w, ").\nNew operations are priced with it once tracelake restarts; recompute the stored costs with\n  tracelake merge --config %s --rebuild %s\n", cfgPath, cfg.GenAI.Table)
	return nil
}
