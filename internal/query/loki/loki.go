// Package loki answers Loki's HTTP API (/loki/api/v1/...) over the logs
// table on the read path: LogQL queries (package logql), labels, label
// values, series, index stats and volume, each for the caller's tenant
// alone, or for an operator's read of every tenant with each stream
// labelled by its tenant (tenantLabel). Answers take the shapes of Loki's own (grafana/loki
// pkg/loghttp, pkg/util/marshal), which Grafana's Loki datasource
// decodes.
package loki

import (
	"errors"
	"net/http"
	"runtime"
	"time"

	"github.com/tracelake/tracelake/internal/query/httpapi"
	"github.com/tracelake/tracelake/internal/query/logql"
)

// Options configure the Loki API.
type Options = httpapi.Options

// api serves the routes.
type api struct {
	o   Options
	rt  httpapi.Routes
	now func() time.Time
}

// Register registers every Loki route on mux: the data and metadata
// routes behind the tenancy check, buildinfo without it. Loki takes GET
// and POST (a form) on its query and metadata routes
// (pkg/loki/modules.go), so both are registered. /ready is not
// registered here: the listener's owner registers it once for every API.
func Register(mux *http.ServeMux, o Options) error {
	o, err := o.Defaulted("loki", "otel_logs")
	if err != nil {
		return err
	}
	a := &api{o: o, rt: httpapi.Routes{Mux: mux, Tenants: o.Tenants}, now: time.Now}
	for _, m := range []string{"GET", "POST"} {
		a.rt.Scoped(m+" /loki/api/v1/query", a.query)
		a.rt.Scoped(m+" /loki/api/v1/query_range", a.queryRange)
		a.rt.Scoped(m+" /loki/api/v1/labels", a.labels)
		a.rt.Scoped(m+" /loki/api/v1/label", a.labels)
		a.rt.Scoped(m+" /loki/api/v1/label/{name}/values", a.labelValues)
		a.rt.Scoped(m+" /loki/api/v1/series", a.series)
		a.rt.Scoped(m+" /loki/api/v1/index/stats", a.indexStats)
		a.rt.Scoped(m+" /loki/api/v1/index/volume", a.indexVolume)
		a.rt.Scoped(m+" /loki/api/v1/index/volume_range", a.indexVolumeRange)
		a.rt.Scoped(m+" /loki/api/v1/detected_labels", a.detectedLabels)
		a.rt.Scoped(m+" /loki/api/v1/detected_fields", a.detectedFields)
		a.rt.Scoped(m+" /loki/api/v1/detected_field/{name}/values", a.detectedFieldValues)
	}
	a.rt.Public("GET /loki/api/v1/status/buildinfo", a.buildinfo)
	return nil
}

// fail answers err: a refused parameter or query 400, a query failing
// in evaluation 500 as Loki answers it (not logged: the query's fault),
// the read path's failures by their kind (httpapi.Status), logged when
// they are the server's.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	if isParamError(err) {
		a.rt.Fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var ee *logql.EvalError
	if errors.As(err, &ee) {
		a.rt.Fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	if status := httpapi.Status(err); status >= 500 {
		a.o.Log.Error("loki request failed", "path", r.URL.Path, "err", err)
	}
	a.rt.Error(w, err)
}

// form parses the query string and a POSTed form.
func (a *api) form(w http.ResponseWriter, r *http.Request) bool {
	if err := r.ParseForm(); err != nil {
		a.rt.Fail(w, http.StatusBadRequest, err.Error())
		return false
	}
	return true
}

// buildinfo answers Loki's build information (pkg/util/build), which
// Grafana reads to learn the features of the server.
func (a *api) buildinfo(w http.ResponseWriter, _ *http.Request) {
	body := []byte(`{"version":`)
	body = appendString(body, a.o.Version)
	body = append(body, `,"revision":"","branch":"","buildUser":"","buildDate":"","goVersion":`...)
	body = appendString(body, runtime.Version())
	writeJSON(w, append(body, '}'))
}
