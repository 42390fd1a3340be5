// Package httpapi is what the read side's HTTP APIs (Tempo, Loki,
// Prometheus) share on their one listener: the caller's scope, decided
// by the read path's tenancy rules before a handler runs, and the HTTP
// status of each kind of failure. Each API writes its own error bodies
// (Tempo and Loki plain text, Prometheus JSON), so it passes its writer.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// Refuse writes an error answer of an API's own shape.
type Refuse func(w http.ResponseWriter, status int, msg string)

// Routes registers an API's handlers on a mux.
type Routes struct {
	Mux *http.ServeMux
	// Tenants decides each scoped request's scope.
	Tenants tenancy.Resolver
	// Refuse writes the API's error answers; nil writes plain text.
	Refuse Refuse
}

// ScopedHandler serves a request for scope.
type ScopedHandler func(w http.ResponseWriter, r *http.Request, scope tenancy.Scope)

// Scoped registers h on pattern (a net/http ServeMux pattern, methods
// included) behind the tenancy check: a request the Resolver refuses is
// answered 401, 403 or 400 by its kind and never reaches h.
func (rt Routes) Scoped(pattern string, h ScopedHandler) {
	rt.Mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		sent, err := tenancy.NamedInHTTP(r.Header)
		if err != nil {
			rt.Error(w, err)
			return
		}
		scope, err := rt.Tenants.Read(sent, Token(r))
		if err != nil {
			rt.Error(w, err)
			return
		}
		h(w, r, scope)
	})
}

// Public registers h on pattern with no tenancy check: for what says
// nothing of any tenant's data (readiness, build information, echo).
func (rt Routes) Public(pattern string, h http.HandlerFunc) {
	rt.Mux.HandleFunc(pattern, h)
}

// Error answers err with Status(err) in the API's shape. The message of
// a server-side failure (5xx) is the error's text with its file paths
// taken out (query.StripPaths), as Flight SQL answers it: the read path's
// errors name the files it reads, the Iceberg warehouse's among them.
func (rt Routes) Error(w http.ResponseWriter, err error) {
	status, msg := Status(err), err.Error()
	if status >= 500 {
		msg = query.StripPaths(msg)
	}
	rt.refuse(w, status, msg)
}

// Fail answers status with msg in the API's shape.
func (rt Routes) Fail(w http.ResponseWriter, status int, msg string) {
	rt.refuse(w, status, msg)
}

func (rt Routes) refuse(w http.ResponseWriter, status int, msg string) {
	if rt.Refuse != nil {
		rt.Refuse(w, status, msg)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// Token is the bearer token of r: Authorization: Bearer <token>, or the
// password of Basic authentication (what Grafana's datasources and
// promtool's http config send when set to basic auth); "" for none.
func Token(r *http.Request) string {
	if t := tenancy.Bearer(r.Header.Get("Authorization")); t != "" {
		return t
	}
	if _, pw, ok := r.BasicAuth(); ok {
		return pw
	}
	return ""
}

// Status is the HTTP status of err: a tenancy refusal by its kind (401,
// 403, 400), a refused query 400, a cancelled request 499 (the client
// went away, as nginx and Loki log it), a passed deadline 504, else 500.
func Status(err error) int {
	var te *tenancy.Error
	var re *query.RefusedError
	switch {
	case errors.As(err, &te):
		switch te.Kind {
		case tenancy.Forbidden:
			return http.StatusForbidden
		case tenancy.Invalid:
			return http.StatusBadRequest
		default:
			return http.StatusUnauthorized
		}
	case errors.As(err, &re):
		return http.StatusBadRequest
	case errors.Is(err, context.Canceled):
		return 499
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// Options are what each API is built from.
type Options struct {
	// Reader reads the API's table for a request's scope.
	Reader query.Reader
	// Tenants decides each request's scope.
	Tenants tenancy.Resolver
	// Table is the table the API reads; default the API's own.
	Table string
	// Version is what the API's build-info endpoint answers.
	Version string
	// Log receives the failures that are the server's; default
	// slog.Default().
	Log *slog.Logger
}

// Defaulted returns o with Table (table by default) and Log set; an error
// naming api without a Reader.
func (o Options) Defaulted(api, table string) (Options, error) {
	if o.Reader == nil {
		return o, fmt.Errorf("%s: no reader", api)
	}
	if o.Table == "" {
		o.Table = table
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return o, nil
}
