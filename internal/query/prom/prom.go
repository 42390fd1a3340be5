// Package prom serves Prometheus's HTTP query API over the OpenTelemetry
// metrics table (otel_metrics), per tenant: PromQL is run by Prometheus's
// own engine (github.com/prometheus/prometheus/promql) over a
// storage.Queryable that reads the table through the read path, which
// scopes every read to the caller's tenant. Metric and label names are
// translated as Prometheus's OTLP receiver and the Collector's Prometheus
// exporter translate them (see names.go).
//
// Served: gauges, sums (monotonic ones as counters, _total), histograms
// (_bucket{le}, _sum, _count) and summaries ({quantile}, _sum, _count),
// of cumulative temporality. Not served: exponential histograms (which
// would be native histograms), delta temporalities (PromQL reads a
// counter's samples as cumulative), exemplars (query_exemplars answers
// none). A scope reading every tenant sees each series's tenant as the
// label __tenant_id__.
package prom

import (
	"net/http"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tracelake/tracelake/internal/query/httpapi"
)

// Options configure the API.
type Options struct {
	httpapi.Options
	// Timeout bounds each PromQL query (Prometheus's --query.timeout);
	// default 2m, its default. The read path's own timeout bounds each
	// read below it.
	Timeout time.Duration
}

// Defaults of the engine, Prometheus's own (cmd/prometheus/main.go
// --query.max-samples, --query.lookback-delta, --query.timeout).
const (
	defaultMaxSamples = 50_000_000
	defaultLookback   = 5 * time.Minute
	defaultTimeout    = 2 * time.Minute
)

// api holds the engine and what the handlers share.
type api struct {
	writer
	opt    Options
	engine *promql.Engine
	parser parser.Parser
}

// Register registers Prometheus's query API on mux under /api/v1/ (GET,
// and form-encoded POST where Prometheus takes it): query, query_range,
// query_exemplars, labels, label/{name}/values, series and metadata behind
// the tenancy check; status/buildinfo, which tells nothing of any tenant,
// without. It does not register /ready. closeFn releases the engine.
func Register(mux *http.ServeMux, o Options) (closeFn func(), err error) {
	if o.Options, err = o.Defaulted("prometheus api", "otel_metrics"); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	p := parser.NewParser(parser.Options{})
	engine := promql.NewEngine(promql.EngineOpts{
		Logger:        o.Log,
		MaxSamples:    defaultMaxSamples,
		Timeout:       o.Timeout,
		LookbackDelta: defaultLookback,
		// On in Prometheus since 2.33; off only for the engine's other users.
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
		Parser:               p,
	})
	a := &api{writer: writer{log: o.Log}, opt: o, engine: engine, parser: p}
	rt := httpapi.Routes{Mux: mux, Tenants: o.Tenants, Refuse: a.refuse}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		rt.Scoped(method+" /api/v1/query", a.query)
		rt.Scoped(method+" /api/v1/query_range", a.queryRange)
		rt.Scoped(method+" /api/v1/query_exemplars", a.queryExemplars)
		rt.Scoped(method+" /api/v1/labels", a.labelNames)
		rt.Scoped(method+" /api/v1/series", a.series)
	}
	rt.Scoped("GET /api/v1/label/{name}/values", a.labelValues)
	rt.Scoped("GET /api/v1/metadata", a.metadata)
	rt.Public("GET /api/v1/status/buildinfo", a.buildInfo)
	return func() { _ = engine.Close() }, nil
}
