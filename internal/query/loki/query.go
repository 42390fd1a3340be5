package loki

import (
	"net/http"
	"time"

	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// query answers /loki/api/v1/query: an instant query.
func (a *api) query(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	a.run(w, r, scope, instantParams)
}

// queryRange answers /loki/api/v1/query_range.
func (a *api) queryRange(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	a.run(w, r, scope, rangeParams)
}

// run answers a query whose parameters params reads.
func (a *api) run(w http.ResponseWriter, r *http.Request, scope tenancy.Scope, params func(*http.Request, time.Time) (logql.Params, error)) {
	start := time.Now()
	if !a.form(w, r) {
		return
	}
	p, err := params(r, a.now())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	e, err := logql.Parse(r.Form.Get("query"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if _, isLog := e.(*logql.LogExpr); isLog && p.Instant {
		// As Loki 3 answers it (pkg/querier/http.go InstantQueryHandler).
		a.fail(w, r, badParam("log queries are not supported as an instant query type, please change your query to a range query type"))
		return
	}
	p.Categorize = categorize(r)
	res, err := logql.Eval(r.Context(), &source{reader: a.o.Reader, scope: scope, table: a.o.Table}, e, p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, queryBody(res, p.Categorize, time.Since(start)))
}
