package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/tracelake/tracelake/internal/config"
	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/kafka"
	"github.com/tracelake/tracelake/internal/obs"
	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/otlp"
	"github.com/tracelake/tracelake/internal/pipeline"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/databend"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
	"github.com/tracelake/tracelake/internal/sink/iceberg"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// startForwarding starts the configured OTLP receivers forwarding to
// Kafka (otlp.mode forward); stop shuts them down (waiting for requests in
// progress) and closes the producer.
func startForwarding(ctx context.Context, cfg *config.Config, metrics *obs.Metrics) (stop func(), err error) {
	opts, err := kafka.ClientOptions(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	fwd, err := otlp.NewKafkaForwarder(ctx, opts, cfg.OTLP.Forward.ForwardTopics(), cfg.Tenancy.KafkaHeader, int64(cfg.OTLP.MaxBodyBytes), int64(cfg.MaxInflightBytes), slog.Default())
	if err != nil {
		return nil, err
	}
	rcv, err := startReceivers(cfg, metrics, fwd, nil)
	if err != nil {
		fwd.Close()
		return nil, err
	}
	return func() { shutdownReceivers(cfg, rcv); fwd.Close() }, nil
}

// loadTarget is where a load-mode run puts one signal's rows: the
// signal's configuration (cfg.ForSignal) and its sink, prepared.
type loadTarget struct {
	cfg *config.Config
	snk sink.Sink
}

// startLoading starts the configured OTLP receivers loading the requests
// of each target's signal into its sink (otlp.mode load); stop shuts
// them down, waiting for the loads of requests in progress, and returns
// what they loaded. fatal receives the first load error that no retry in
// this process can fix (sink.ErrFatal): the run must stop on it.
func startLoading(ctx context.Context, cfg *config.Config, metrics *obs.Metrics, status *obs.Status, targets []loadTarget, m *genai.Mapper) (stop func() directload.Totals, fatal <-chan error, err error) {
	maxLoad := int64(cfg.LoadBytes())
	if maxLoad == 0 { // no bound for the Kafka loads (Iceberg): requests wait in memory here
		maxLoad = int64(cfg.MaxInflightBytes) / 4
	}
	loaders := signalLoaders{}
	failed := make(chan error, 1)
	onFatal := func(err error) {
		select {
		case failed <- err:
		default: // the run stops on the first
		}
	}
	closeAll := func() directload.Totals {
		var sum directload.Totals
		for _, ld := range loaders {
			ld.Close()
			t := ld.Totals()
			sum.Requests, sum.Rows, sum.DLQ, sum.Loads = sum.Requests+t.Requests, sum.Rows+t.Rows, sum.DLQ+t.DLQ, sum.Loads+t.Loads
		}
		return sum
	}
	for _, t := range targets {
		// The receivers hand requests over in protobuf, with the tenant
		// they checked in directload's header (tenancy.kafka_header may
		// be "").
		dec, err := pipeline.OTLPDecoder(t.cfg, otel.EncodingProto, directload.TenantHeader, m)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ld, err := directload.Start(ctx, directload.Options{Sink: t.snk, Decoder: dec, Signal: t.cfg.Kafka.Signal,
			Partition: cfg.OTLP.Instance, MaxLoadBytes: maxLoad, Fatal: onFatal,
			Log: slog.Default(), Metrics: metrics})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		loaders[t.cfg.Kafka.Signal] = ld
		status.AddSource(ld.Snapshot)
	}
	rcv, err := startReceivers(cfg, metrics, loaders, slices.Sorted(maps.Keys(loaders)))
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return func() directload.Totals { shutdownReceivers(cfg, rcv); return closeAll() }, failed, nil
}

// signalLoaders hand each signal's requests to its loader.
type signalLoaders map[string]*directload.Loader

// Forward implements otlp.Forwarder; the receivers take only the
// signals it holds.
func (s signalLoaders) Forward(ctx context.Context, signal, tenant string, body []byte) (otlp.Stored, error) {
	ld, ok := s[signal]
	if !ok {
		return otlp.Stored{}, fmt.Errorf("BUG: a %s request where no loader takes it", signal)
	}
	return ld.Forward(ctx, signal, tenant, body)
}

// openLoadTargets opens, beside main (the run's sink, of kafka.signal),
// the sinks of the other signals of otlp.signals, each of its own table
// in main's database or catalog, and prepares them; main is the first
// target. closeAll closes the others.
func openLoadTargets(ctx context.Context, cfg *config.Config, main sink.Sink, metrics *obs.Metrics, status *obs.Status) (targets []loadTarget, closeAll func(), err error) {
	targets = []loadTarget{{cfg, main}}
	closeAll = func() {
		for _, t := range targets[1:] {
			t.snk.Close()
		}
	}
	for _, sig := range cfg.LoadedSignals() {
		if sig == cfg.Kafka.Signal {
			continue
		}
		sc := cfg.ForSignal(sig)
		var snk sink.Sink
		switch m := main.(type) {
		case *duckdb.Sink:
			opt := duckDBOptions(sc)
			opt.BesidePipeline = true
			snk, err = m.Beside(opt)
		case *iceberg.Sink:
			snk, err = openIcebergReporting(ctx, sc, commitReporter(metrics, status))
		case *databend.Sink:
			snk, err = openDatabend(sc)
		default:
			err = fmt.Errorf("BUG: otlp.signals on a %T", main)
		}
		if err == nil {
			targets = append(targets, loadTarget{sc, snk})
			err = snk.Prepare(ctx)
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("the %s table %s: %w", sig, sc.Sink.Table, err)
		}
	}
	return targets, closeAll, nil
}

// startReceivers starts the configured OTLP receivers storing requests of
// signals (nil: all) with fwd.
func startReceivers(cfg *config.Config, metrics *obs.Metrics, fwd otlp.Forwarder, signals []string) (*otlp.Receivers, error) {
	o := cfg.OTLP
	ropt := otlp.Options{
		HTTP: o.HTTP, GRPC: o.GRPC,
		MaxBodyBytes:     int64(o.MaxBodyBytes),
		MaxInflightBytes: int64(cfg.MaxInflightBytes),
		MaxConcurrent:    o.MaxConcurrentRequests,
		ReadTimeout:      o.ReadTimeout.D(),
		TenantRequired:   cfg.Tenancy.Required,
		DefaultTenant:    cfg.Tenancy.Default,
		Forward:          fwd,
		Signals:          signals,
		Log:              slog.Default(),
		Answered: func(protocol, signal, outcome string, items int) {
			metrics.OTLPRequests.WithLabelValues(protocol, signal, outcome).Inc()
			if items > 0 {
				metrics.OTLPItems.WithLabelValues(signal).Add(float64(items))
			}
		},
	}
	var err error
	if ropt.TLS, err = receiverTLS("otlp.tls", o.TLS); err != nil {
		return nil, err
	}
	if ropt.Tokens, err = otlpTokens(o); err != nil {
		return nil, err
	}
	return otlp.Start(ropt)
}

// otlpTokens reads otlp.tokens_file (nil when it is not set), for the
// receivers' write grants or the read side's read grants; an error names
// the key, as the other files' do.
func otlpTokens(o config.OTLP) (*tenancy.Tokens, error) {
	if o.TokensFile == "" {
		return nil, nil
	}
	t, err := tenancy.LoadTokens(o.TokensFile, slog.Default())
	if err != nil {
		return nil, fmt.Errorf("otlp.tokens_file: %w", err)
	}
	return t, nil
}

// shutdownReceivers stops taking requests and waits for those in progress
// up to shutdown_timeout.
func shutdownReceivers(cfg *config.Config, rcv *otlp.Receivers) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.D())
	defer cancel()
	rcv.Shutdown(ctx)
}

// receiverTLS is the server TLS of key's settings (otlp.tls, query.tls);
// nil without a certificate. Its errors name key. CheckFiles checked the
// files already; they are read again here as they are now.
func receiverTLS(key string, t config.ReceiverTLS) (*tls.Config, error) {
	return t.ServerTLS(key)
}

// serveReceiversOnly runs the receivers of a process that consumes
// nothing, with its metrics endpoint, until ctx ends.
func serveReceiversOnly(ctx context.Context, cfg *config.Config, metrics *obs.Metrics, status *obs.Status, stop func()) error {
	if cfg.Metrics.Listen != "" {
		// Ready as soon as the receivers listen: there is no sink or group.
		srv, err := obs.Listen(cfg.Metrics.Listen, metrics, status, func() string { return "" }, slog.Default())
		if err != nil {
			stop()
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
	}
	slog.Info("tracelake running OTLP receivers only (no kafka.topics)")
	start := time.Now()
	<-ctx.Done()
	stop()
	slog.Info("tracelake stopped", "elapsed", elapsed(time.Since(start)))
	return nil
}
