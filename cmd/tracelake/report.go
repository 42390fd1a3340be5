package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/report"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
)

// defaultReportWindow is what the report covers unless asked otherwise.
const defaultReportWindow = 7 * 24 * time.Hour

// cmdReport is `tracelake report`: genai_operations as one HTML page. On
// the DuckDB sink it also runs inside `tracelake run` (env), which writes
// the page to its standard output: the file is the client's to write.
func cmdReport(ctx context.Context, env *cmdEnv, args []string) error {
	fs := env.flagSet("report")
	var cf configFlags
	cf.register(fs)
	sinceFlag := fs.String("since", "7d", "the window before now: a number of days (7d) or a Go duration (12h); all for everything")
	tenant := fs.String("tenant", "", "report on this tenant's operations alone (default: every tenant's)")
	out := fs.String("o", "report.html", "the page to write; - for standard output")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	since, err := parseSince(*sinceFlag)
	if err != nil {
		return usageError{err}
	}
	if err := checkTenantArg(*tenant, flagGiven(fs, "tenant")); err != nil {
		return usagef("--tenant: %v", err)
	}
	cfg, err := env.config(&cf, false)
	if err != nil {
		return err
	}
	// The operations are those of the spans' table, which is another
	// signal's than cfg's when kafka.signal is not traces (GenAIConfig).
	if cfg, err = reportable(cfg); err != nil {
		return err
	}
	var page bytes.Buffer
	err = operationsPage(ctx, env, &page, cfg, since, *tenant)
	var held heldError
	if errors.As(err, &held) {
		// `tracelake run` holds the file: it makes the page, written here.
		err = throughRun(ctx, held, append([]string{"report"}, args...), &page)
	}
	if err != nil {
		return err
	}
	if *out == "-" || env.running != nil {
		_, err = env.stdout.Write(page.Bytes())
		return err
	}
	if err := os.WriteFile(*out, page.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "wrote %s\n", *out)
	return nil
}

// operationsPage writes the report of cfg's operations in the window for
// tenant ("" for every tenant) to page.
func operationsPage(ctx context.Context, env *cmdEnv, page io.Writer, cfg *config.Config, since time.Duration, tenant string) error {
	db, closeDB, err := operationsDB(ctx, env, cfg, since)
	if err != nil {
		return err
	}
	defer closeDB()
	return writeReport(ctx, page, db, cfg, since, tenant)
}

// reportable is the configuration of the table cfg's operations are
// derived from (cfg's own, or the traces signal's among otlp.signals), or
// says why cfg has no operations to report on.
func reportable(cfg *config.Config) (*config.Config, error) {
	g := cfg.GenAIConfig()
	if g == nil {
		return nil, usagef("tracelake report reads genai_operations, which this configuration does not load (genai.operations: want auto or on, with kafka.format otlp_proto or otlp_json and kafka.signal traces, or otlp.mode load with traces among otlp.signals)")
	}
	return g, nil
}

// operationsDB is a DuckDB database holding genai_operations: the DuckDB
// sink's file, or the window's operations read into memory from Iceberg
// (the filter prunes the table's days) or Databend.
func operationsDB(ctx context.Context, env *cmdEnv, cfg *config.Config, since time.Duration) (*sql.DB, func(), error) {
	if cfg.Sink.Type != config.SinkDuckDB {
		lake, err := openLake(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		defer lake.Close()
		db, err := memoryDuckDB()
		if err != nil {
			return nil, nil, err
		}
		var from time.Time
		if since > 0 {
			from = time.Now().Add(-since)
		}
		if err := lake.copyInto(ctx, db, cfg.GenAI.Table, duckdbsink.TypedColumns(derivedTable(cfg)), from); err != nil {
			db.Close()
			return nil, nil, err
		}
		return db, func() { db.Close() }, nil
	}
	snk, release, err := env.duckDB(ctx, cfg, duckDBUse{prepare: true, existing: true})
	if err != nil {
		return nil, nil, err
	}
	return snk.DB(), release, nil
}

// writeReport writes the page of the operations in db since the window's
// start, of tenant alone unless "".
func writeReport(ctx context.Context, w io.Writer, db *sql.DB, cfg *config.Config, since time.Duration, tenant string) error {
	r, err := report.Build(ctx, db, report.Options{Table: cfg.GenAI.Table, Since: since, Tenant: tenant, Now: time.Now()})
	if err != nil {
		return err
	}
	return r.WriteHTML(w)
}

// parseSince reads 7d, 12h, 90m or all (0).
func parseSince(s string) (time.Duration, error) {
	if s == "all" || s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		// Past a duration's range (292 years) the product wraps around
		// to a short or negative window: refused, as ParseDuration
		// refuses an hour count past it.
		const maxDays = math.MaxInt64 / int64(24*time.Hour)
		if n, err := strconv.ParseInt(days, 10, 64); err == nil && n > 0 {
			if n > maxDays {
				return 0, fmt.Errorf("--since %q: at most %dd (or all)", s, maxDays)
			}
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--since %q: want days (7d), a duration (12h) or all", s)
	}
	return d, nil
}

// reportHandler serves the report from the running process's database,
// for the status page (the file is locked while tracelake runs):
// /report?tenant=T&since=7d, both optional (every tenant, the last 7 days;
// since as the report command's --since); each at most once, since a
// second value would be a second question.
func reportHandler(db *sql.DB, cfg *config.Config) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// URL.Query drops what does not parse (tenant=%zz), which
		// would answer for the tenants that do.
		query, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			http.Error(w, "query string: "+err.Error(), http.StatusBadRequest)
			return
		}
		for _, name := range []string{"tenant", "since"} {
			if len(query[name]) > 1 {
				http.Error(w, name+": given twice: give it once", http.StatusBadRequest)
				return
			}
		}
		since := defaultReportWindow
		if s := query.Get("since"); s != "" {
			if since, err = parseSince(s); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		tenant := query.Get("tenant")
		if err := checkTenantArg(tenant, query.Has("tenant")); err != nil {
			http.Error(w, "tenant: "+err.Error(), http.StatusBadRequest)
			return
		}
		var page bytes.Buffer
		if err := writeReport(r.Context(), &page, db, cfg, since, tenant); err != nil {
			slog.Warn("report", "err", err)
			http.Error(w, "report: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page.Bytes())
	})
}
