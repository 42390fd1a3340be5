// Package tempo serves Grafana Tempo's HTTP query API over the spans
// table (otel_spans) through the read path: trace by id (v1 and v2,
// protobuf and JSON), TraceQL search, tags and tag values (v1 and v2),
// TraceQL metrics (query_range), echo and build information. Every data
// and metadata route is scoped by the read path's tenancy; answers follow
// Tempo's own (grafana/tempo pkg/api, modules/frontend, modules/querier)
// and are decoded as Grafana's Tempo datasource decodes them.
package tempo

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tracelake/tracelake/internal/query/httpapi"
)

// Options configure the Tempo API.
type Options = httpapi.Options

// maxTraceSpans is the most spans a trace by id answers: past it v1
// answers 422 and v2 the first spans with status PARTIAL, as Tempo does
// past its max trace size (modules/frontend/combiner/trace_by_id.go,
// trace_by_id_v2.go), which it counts in bytes; spans are what a SQL
// LIMIT bounds without reading the rest.
const maxTraceSpans = 100_000

// server answers the API's routes.
type server struct {
	Options
	routes httpapi.Routes
	// maxSpans is maxTraceSpans, smaller in tests.
	maxSpans int
}

// Register registers every Tempo route on mux (not /ready, which the
// caller registers once for every API).
func Register(mux *http.ServeMux, o Options) error {
	_, err := register(mux, o, maxTraceSpans)
	return err
}

func register(mux *http.ServeMux, o Options, maxSpans int) (*server, error) {
	o, err := o.Defaulted("tempo", "otel_spans")
	if err != nil {
		return nil, err
	}
	s := &server{Options: o, maxSpans: maxSpans,
		routes: httpapi.Routes{Mux: mux, Tenants: o.Tenants}}
	rt := s.routes
	// Routes as Tempo registers them (cmd/tempo/app/modules.go, pkg/api
	// http.go's Path constants).
	rt.Scoped("GET /api/traces/{traceID}", s.traceV1)
	rt.Scoped("GET /api/v2/traces/{traceID}", s.traceV2)
	rt.Scoped("GET /api/search", s.search)
	rt.Scoped("GET /api/search/tags", s.tagsV1)
	rt.Scoped("GET /api/v2/search/tags", s.tagsV2)
	rt.Scoped("GET /api/search/tag/{tag}/values", s.tagValuesV1)
	rt.Scoped("GET /api/v2/search/tag/{tag}/values", s.tagValuesV2)
	rt.Scoped("GET /api/metrics/query_range", s.queryRange)
	rt.Scoped("GET /api/metrics/query", s.queryInstant)
	rt.Public("GET /api/echo", s.echo)
	rt.Public("GET /api/status/buildinfo", s.buildInfo)
	return s, nil
}

// fail answers a failure: a caller's error (a refused query, a bad
// parameter: see badRequest) with its status, a server's logged.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var bad *badRequest
	if errors.As(err, &bad) {
		s.routes.Fail(w, http.StatusBadRequest, bad.msg)
		return
	}
	if st := httpapi.Status(err); st >= 500 {
		s.Log.Error("tempo: request failed", "path", r.URL.Path, "err", err)
	}
	s.routes.Error(w, err)
}

// badRequest is a request Tempo answers 400.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func bad(format string, args ...any) error {
	return &badRequest{msg: fmt.Sprintf(format, args...)}
}
