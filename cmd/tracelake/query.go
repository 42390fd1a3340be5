package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/flightsql"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	duckdbsink "github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// readTenants decides the tenant of a read as the receivers decide a
// write's: the tokens of otlp.tokens_file (their read grants), the tenant
// the client names, tenancy.default unless tenancy.required.
func readTenants(cfg *config.Config) (tenancy.Resolver, error) {
	r := tenancy.Resolver{Default: cfg.Tenancy.Default, Required: cfg.Tenancy.Required}
	var err error
	r.Tokens, err = otlpTokens(cfg.OTLP)
	return r, err
}

// readAccess is what a query listener checks its callers by: the tenancy
// rules of readTenants and query.tls.
func readAccess(cfg *config.Config) (tenancy.Resolver, *tls.Config, error) {
	tenants, err := readTenants(cfg)
	if err != nil {
		return tenants, nil, err
	}
	tlsConfig, err := receiverTLS("query.tls", cfg.Query.TLS)
	if err != nil {
		return tenants, nil, err
	}
	return tenants, tlsConfig, nil
}

// shutdown stops a listener, letting requests in progress finish for a
// few seconds.
func shutdown(what string, stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		slog.Warn(what+" shutdown", "err", err)
	}
}

// startFlightSQL serves reader over Arrow Flight SQL on query.flight_sql,
// if set; the function it returns stops it, letting streams in progress
// finish for a few seconds.
func startFlightSQL(cfg *config.Config, reader query.Reader) (stop func(), err error) {
	if cfg.Query.FlightSQL == "" {
		return func() {}, nil
	}
	tenants, tlsConfig, err := readAccess(cfg)
	if err != nil {
		return nil, err
	}
	srv, err := flightsql.Start(flightsql.Options{Listen: cfg.Query.FlightSQL, TLS: tlsConfig, Reader: reader, Tenants: tenants,
		Version: version, Log: slog.Default()})
	if err != nil {
		return nil, fmt.Errorf("query.flight_sql: %w", err)
	}
	slog.Info("serving Arrow Flight SQL", "addr", srv.Addr, "tls", tlsConfig != nil)
	return func() { shutdown("Flight SQL", srv.Shutdown) }, nil
}

// serveReads serves reader on the configured read listeners,
// query.flight_sql and query.http; stop stops both.
func serveReads(cfg *config.Config, reader query.Reader) (stop func(), err error) {
	stopFlight, err := startFlightSQL(cfg, reader)
	if err != nil {
		return nil, err
	}
	stopHTTP, err := startGrafanaAPIs(cfg, reader, signalTables(cfg))
	if err != nil {
		stopFlight()
		return nil, err
	}
	return func() { stopHTTP(); stopFlight() }, nil
}

// icebergReader is the read path over cfg's Iceberg tables: the main
// table (raw or OpenTelemetry), its dead-letter table, genai_operations
// and the OpenTelemetry table's dedup model, with the other signals'
// tables (signalTables) and theirs, by their tracelake names; the tables
// the catalog does not hold yet are read once they appear.
func icebergReader(ctx context.Context, cfg *config.Config, snk *iceberg.Sink) (*query.Iceberg, error) {
	raw, dlq := snk.Identifiers()
	mainCols := duckdbsink.SinkColumns(append(duckdbsink.RawColumns(), icebergRawColumns...))
	if t := typedTable(cfg); t != nil {
		mainCols = duckdbsink.SinkColumns(duckdbsink.TypedColumns(t))
	}
	dlqCols := duckdbsink.SinkColumns(duckdbsink.DLQColumns())
	tables := []query.IcebergTable{
		{Name: cfg.Sink.Table, ID: raw, Columns: mainCols},
		{Name: cfg.DLQTable(), ID: dlq, Columns: dlqCols},
	}
	// genai_operations is the spans' derived table, cfg's own or, with
	// traces among otlp.signals, the traces configuration's (GenAIConfig)
	// in the same namespace: looking at cfg alone left it unread with
	// kafka.signal logs.
	if g := cfg.GenAIConfig(); g != nil {
		tables = append(tables, query.IcebergTable{Name: g.GenAI.Table, ID: sibling(raw, g.GenAI.Table), Columns: duckdbsink.SinkColumns(duckdbsink.TypedColumns(derivedTable(g)))})
	}
	if cfg.DecodesOTLP() {
		dedup := otelDedupOf(cfg).Target()
		tables = append(tables, query.IcebergTable{Name: dedup, ID: sibling(raw, dedup), Columns: mainCols})
		// The other signals' tables, loaded by the configurations of
		// those signals into the same namespace, so that one process
		// answers Tempo, Loki and Prometheus (query.http); with their
		// dead letters and dedup models, which a load-mode run taking
		// several signals (otlp.signals) writes beside each, as it does
		// beside cfg's table: without them `sql` and Flight SQL refused
		// otel_logs_dedup where DuckDB reads it.
		for sig, name := range signalTables(cfg) {
			if name == cfg.Sink.Table {
				continue
			}
			sc := cfg.ForSignal(sig)
			cols := duckdbsink.SinkColumns(duckdbsink.TypedColumns(otel.TableOf(sig)))
			dedup := otelDedupOf(sc).Target()
			tables = append(tables,
				query.IcebergTable{Name: name, ID: sibling(raw, name), Columns: cols},
				query.IcebergTable{Name: sc.DLQTable(), ID: sibling(raw, sc.DLQTable()), Columns: dlqCols},
				query.IcebergTable{Name: dedup, ID: sibling(raw, dedup), Columns: cols})
		}
	}
	return query.NewIceberg(ctx, snk.Catalog(), tables, query.IcebergOptions{Shared: cfg.Query.SharedTables,
		Refresh: cfg.Query.Refresh.D(), MaxConcurrent: cfg.Query.MaxConcurrent, Timeout: cfg.Query.Timeout.D(), Log: slog.Default()})
}

// sibling is the identifier of table name in the namespace of id.
func sibling(id []string, name string) []string {
	return append(slices.Clone(id[:len(id)-1]), name)
}

// openIcebergReader opens cfg's Iceberg sink for its read path alone;
// closeReader closes both.
func openIcebergReader(ctx context.Context, cfg *config.Config) (reader *query.Iceberg, closeReader func(), err error) {
	snk, err := openIceberg(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if reader, err = icebergReader(ctx, cfg, snk); err != nil {
		snk.Close()
		return nil, nil, err
	}
	return reader, func() { reader.Close(); snk.Close() }, nil
}

// cmdServe is `tracelake serve --config F`: the read side of an Iceberg
// lake, a process that ingests nothing. It serves query.flight_sql and
// query.http over the catalog's current snapshots, looked for every query.refresh;
// replicas scale reads.
func cmdServe(ctx context.Context, args []string) error {
	fs := newFlagSet("serve")
	var cf configFlags
	cf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := cf.loadServe()
	if err != nil {
		return err
	}
	switch {
	case cfg.Sink.Type == config.SinkDuckDB:
		return usagef("serve reads the iceberg sink: with duckdb, tracelake run serves query.flight_sql itself (one process holds the file)")
	case cfg.Sink.Type != config.SinkIceberg:
		return usagef("serve reads the iceberg sink; sink.type is %s (Databend answers SQL itself)", cfg.Sink.Type)
	case cfg.Query.FlightSQL == "" && cfg.Query.HTTP == "":
		return usagef("serve needs query.flight_sql (Arrow Flight SQL) or query.http (the Grafana APIs), the address to serve on")
	}
	reader, closeReader, err := openIcebergReader(ctx, cfg)
	if err != nil {
		return err
	}
	defer closeReader()
	stop, err := serveReads(cfg, reader)
	if err != nil {
		return err
	}
	defer stop()
	slog.Info("tracelake serving the iceberg tables", "refresh", cfg.Query.Refresh.D())
	<-ctx.Done()
	return nil
}
