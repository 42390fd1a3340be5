package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/flightsql"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// readTenants decides the tenant of a read as the receivers decide a
// write's: the tokens of otlp.tokens_file (their read grants), the tenant
// the client names, tenancy.default unless tenancy.required.
func readTenants(cfg *config.Config) (tenancy.Resolver, error) {
	r := tenancy.Resolver{Default: cfg.Tenancy.Default, Required: cfg.Tenancy.Required}
	if cfg.OTLP.TokensFile != "" {
		var err error
		if r.Tokens, err = tenancy.LoadTokens(cfg.OTLP.TokensFile, slog.Default()); err != nil {
			return r, err
		}
	}
	return r, nil
}

// startFlightSQL serves reader over Arrow Flight SQL on query.flight_sql,
// if set; the function it returns stops it, letting streams in progress
// finish for a few seconds.
func startFlightSQL(cfg *config.Config, reader query.Reader) (stop func(), err error) {
	if cfg.Query.FlightSQL == "" {
		return func() {}, nil
	}
	tenants, err := readTenants(cfg)
	if err != nil {
		return nil, err
	}
	tlsConfig, err := receiverTLS(cfg.Query.TLS)
	if err != nil {
		return nil, fmt.Errorf("query.tls: %w", err)
	}
	srv, err := flightsql.Start(flightsql.Options{Listen: cfg.Query.FlightSQL, TLS: tlsConfig, Reader: reader, Tenants: tenants,
		Version: version, Log: slog.Default()})
	if err != nil {
		return nil, fmt.Errorf("query.flight_sql: %w", err)
	}
	slog.Info("serving Arrow Flight SQL", "addr", srv.Addr, "tls", tlsConfig != nil)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			slog.Warn("Flight SQL shutdown", "err", err)
		}
	}, nil
}
