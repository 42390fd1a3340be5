package prom

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// Each handler answers as its namesake in prometheus/prometheus
// web/api/v1/api.go does (query, queryRange, serveBuildInfo,
// queryExemplars; the metadata endpoints are in lookups.go): the same
// parameters, checks, messages and error kinds.

// maxPoints is how many points a range query may answer per series
// (api.go queryRange).
const maxPoints = 11000

// queryData is a query's answer.
type queryData struct {
	ResultType parser.ValueType `json:"resultType"`
	Result     parser.Value     `json:"result"`
}

func (a *api) queryable(s tenancy.Scope) queryable {
	return queryable{reader: a.opt.Reader, table: a.opt.Table, scope: s}
}

// withTimeout bounds ctx by the request's timeout parameter, if any.
func withTimeout(ctx context.Context, r *http.Request) (context.Context, context.CancelFunc, *apiError) {
	v := r.FormValue("timeout")
	if v == "" {
		return ctx, func() {}, nil
	}
	d, err := parseDuration(v)
	if err != nil {
		return nil, nil, invalidParam(err, "timeout")
	}
	if d <= 0 {
		return nil, nil, invalidParam(fmt.Errorf("timeout must be positive, got %s", d), "timeout")
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, cancel, nil
}

// queryOpts reads lookback_delta.
func queryOpts(r *http.Request) (promql.QueryOpts, *apiError) {
	var lookback time.Duration
	if v := r.FormValue("lookback_delta"); v != "" {
		d, err := parseDuration(v)
		if err != nil {
			return nil, badData(fmt.Errorf("error parsing lookback delta duration: %w", err))
		}
		lookback = d
	}
	return promql.NewPrometheusQueryOpts(false, lookback, nil), nil
}

func (a *api) query(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		a.fail(w, invalidParam(err, "limit"))
		return
	}
	ts, err := timeParam(r, "time", time.Now())
	if err != nil {
		a.fail(w, invalidParam(err, "time"))
		return
	}
	a.run(w, r, limit, func(ctx context.Context, opts promql.QueryOpts) (promql.Query, error) {
		return a.engine.NewInstantQuery(ctx, a.queryable(s), opts, r.FormValue("query"), ts)
	})
}

func (a *api) queryRange(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		a.fail(w, invalidParam(err, "limit"))
		return
	}
	start, err := parseTime(r.FormValue("start"))
	if err != nil {
		a.fail(w, invalidParam(err, "start"))
		return
	}
	end, err := parseTime(r.FormValue("end"))
	if err != nil {
		a.fail(w, invalidParam(err, "end"))
		return
	}
	if end.Before(start) {
		a.fail(w, invalidParam(errors.New("end timestamp must not be before start time"), "end"))
		return
	}
	step, err := parseDuration(r.FormValue("step"))
	if err != nil {
		a.fail(w, invalidParam(err, "step"))
		return
	}
	if step <= 0 {
		a.fail(w, invalidParam(errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer"), "step"))
		return
	}
	if end.Sub(start)/step > maxPoints {
		a.fail(w, badData(errors.New("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")))
		return
	}
	a.run(w, r, limit, func(ctx context.Context, opts promql.QueryOpts) (promql.Query, error) {
		return a.engine.NewRangeQuery(ctx, a.queryable(s), opts, r.FormValue("query"), start, end, step)
	})
}

// run makes a query with newQuery, runs it and answers its result, cut
// to limit series (0: all) with a warning.
func (a *api) run(w http.ResponseWriter, r *http.Request, limit int, newQuery func(context.Context, promql.QueryOpts) (promql.Query, error)) {
	ctx, cancel, aerr := withTimeout(r.Context(), r)
	if aerr != nil {
		a.fail(w, aerr)
		return
	}
	defer cancel()
	opts, aerr := queryOpts(r)
	if aerr != nil {
		a.fail(w, aerr)
		return
	}
	qry, err := newQuery(ctx, opts)
	if err != nil {
		a.fail(w, invalidParam(err, "query"))
		return
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		a.fail(w, execError(res.Err))
		return
	}
	warnings := res.Warnings
	val := res.Value
	switch v := val.(type) {
	case promql.Matrix:
		if v == nil {
			v = promql.Matrix{} // answered [], never null
		}
		if limit > 0 && len(v) > limit {
			v = v[:limit]
			warnings = warnings.Add(errors.New("results truncated due to limit"))
		}
		val = v
	case promql.Vector:
		if v == nil {
			v = promql.Vector{}
		}
		if limit > 0 && len(v) > limit {
			v = v[:limit]
			warnings = warnings.Add(errors.New("results truncated due to limit"))
		}
		val = v
	}
	a.ok(w, queryData{ResultType: val.Type(), Result: val}, warnings, r.FormValue("query"))
}

// buildInfo is Prometheus's PrometheusVersion: tracelake's version, and
// the Go it was built with.
type buildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	Branch    string `json:"branch"`
	BuildUser string `json:"buildUser"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

func (a *api) buildInfo(w http.ResponseWriter, _ *http.Request) {
	a.ok(w, buildInfo{Version: a.opt.Version, GoVersion: runtime.Version()}, nil, "")
}

// queryExemplars checks its parameters as Prometheus does and answers
// none: the table's exemplars are not served yet, and Grafana asks for
// them beside its range queries.
func (a *api) queryExemplars(w http.ResponseWriter, r *http.Request, _ tenancy.Scope) {
	start, end, aerr := optionalRange(r)
	if aerr != nil {
		a.fail(w, aerr)
		return
	}
	if end.Before(start) {
		a.fail(w, invalidParam(errors.New("end timestamp must not be before start timestamp"), "end"))
		return
	}
	if _, err := a.parser.ParseExpr(r.FormValue("query")); err != nil {
		a.fail(w, badData(err))
		return
	}
	a.ok(w, []struct{}{}, nil, "")
}
