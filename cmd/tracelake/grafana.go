package main

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/query/httpapi"
	"github.com/tracelake/tracelake/internal/query/loki"
	"github.com/tracelake/tracelake/internal/query/prom"
	"github.com/tracelake/tracelake/internal/query/tempo"
)

// grafanaAPI is one of the HTTP APIs Grafana's datasources speak, over
// the OpenTelemetry table it reads.
type grafanaAPI struct {
	name   string // as Grafana names the datasource
	signal string // the OpenTelemetry signal whose table it reads
	// register adds the API's routes to mux; close (nil for none) frees
	// what it holds once the listener stopped.
	// (timeout bounds a query where the API runs one of many reads).
	register func(mux *http.ServeMux, o httpapi.Options, timeout time.Duration) (close func(), err error)
}

// grafanaAPIs are the APIs query.http serves, each where its table is read.
var grafanaAPIs = []grafanaAPI{
	{name: "Tempo", signal: config.SignalTraces, register: func(mux *http.ServeMux, o httpapi.Options, _ time.Duration) (func(), error) {
		return nil, tempo.Register(mux, o)
	}},
	{name: "Loki", signal: config.SignalLogs, register: func(mux *http.ServeMux, o httpapi.Options, _ time.Duration) (func(), error) {
		return nil, loki.Register(mux, o)
	}},
	{name: "Prometheus", signal: config.SignalMetrics, register: func(mux *http.ServeMux, o httpapi.Options, timeout time.Duration) (func(), error) {
		return prom.Register(mux, prom.Options{Options: o, Timeout: timeout})
	}},
}

// signalTables are the tables of each signal that a process of cfg
// reads: on DuckDB those it loads (kafka.signal's, and otlp.signals'
// in load mode: one file, one process); on Iceberg every signal's (the
// other signals' configurations load them into the same namespace).
func signalTables(cfg *config.Config) map[string]string {
	if !cfg.DecodesOTLP() {
		return nil
	}
	signals := cfg.LoadedSignals()
	if cfg.Sink.Type == config.SinkIceberg {
		signals = []string{config.SignalTraces, config.SignalLogs, config.SignalMetrics}
	}
	tables := map[string]string{cfg.Kafka.Signal: cfg.Sink.Table}
	for _, sig := range signals {
		tables[sig] = cfg.ForSignal(sig).Sink.Table
	}
	return tables
}

// startGrafanaAPIs serves, on query.http if set, the APIs of grafanaAPIs
// whose signal has a table in tables (signal → the table reader reads),
// and /ready; a request for an API whose table this process does not
// read is answered 404 saying so. stop shuts the listener down, letting
// requests in progress finish for a few seconds.
func startGrafanaAPIs(cfg *config.Config, reader query.Reader, tables map[string]string) (stop func(), err error) {
	if cfg.Query.HTTP == "" {
		return func() {}, nil
	}
	tenants, tlsConfig, err := readAccess(cfg)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// Tempo's and Loki's /ready answer 200 "ready" once the process
	// serves (grafana/tempo cmd/tempo/app/app.go readyHandler, grafana/loki
	// pkg/loki/loki.go readyHandler); the read path is ready when this
	// listener starts.
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ready\n")) })
	var served, closers = []string{}, []func(){}
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, api := range grafanaAPIs {
		table, ok := tables[api.signal]
		if !ok {
			continue
		}
		c, err := api.register(mux, httpapi.Options{Reader: reader, Tenants: tenants, Table: table, Version: version},
			cfg.Query.Timeout.D())
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("query.http: %s API: %w", api.name, err)
		}
		if c != nil {
			closers = append(closers, c)
		}
		served = append(served, api.name)
	}
	mux.HandleFunc("/", notServed(served, slices.Sorted(maps.Values(tables))))
	ln, err := net.Listen("tcp", cfg.Query.HTTP)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("query.http: %w", err)
	}
	srv := &http.Server{Handler: mux, TLSConfig: tlsConfig, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn)}
	go func() {
		var err error
		if tlsConfig != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			slog.Error("query.http stopped serving", "err", err)
		}
	}()
	slog.Info("serving the Grafana APIs", "addr", ln.Addr().String(), "apis", served, "tls", tlsConfig != nil)
	return func() {
		shutdown("query.http", srv.Shutdown)
		closeAll()
	}, nil
}

// notServed answers a request no API took: 404, saying which APIs this
// process serves and where the others are (a process of another signal's
// table), so that a datasource pointed at the wrong process says why.
func notServed(served, tables []string) http.HandlerFunc {
	var missing []string
	for _, api := range grafanaAPIs {
		if !slices.Contains(served, api.name) {
			missing = append(missing, fmt.Sprintf("%s (reads %s)", api.name, otel.TableOf(api.signal).Name))
		}
	}
	msg := fmt.Sprintf("404 page not found: this process serves %s over %s", orNone(served), orNone(tables))
	if len(missing) > 0 {
		msg += "; not here: " + strings.Join(missing, ", ") + ", served by the process that reads that table"
	}
	return func(w http.ResponseWriter, _ *http.Request) { http.Error(w, msg, http.StatusNotFound) }
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
