package prom

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tracelake/tracelake/internal/query"
)

// The answers' envelope and errors are Prometheus's
// (prometheus/prometheus web/api/v1/api.go: Response, respond,
// respondError, getDefaultErrorCode, returnAPIError).

// response is every answer: status "success" with data (and warnings),
// or "error" with errorType and error.
type response struct {
	Status    string   `json:"status"`
	Data      any      `json:"data,omitempty"`
	ErrorType string   `json:"errorType,omitempty"`
	Error     string   `json:"error,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
	Infos     []string `json:"infos,omitempty"`
}

// errorType is Prometheus's kind of failure and its HTTP status.
type errorType struct {
	name   string
	status int
}

var (
	errBadData  = errorType{"bad_data", http.StatusBadRequest}
	errExec     = errorType{"execution", http.StatusUnprocessableEntity}
	errCanceled = errorType{"canceled", 499}
	errTimeout  = errorType{"timeout", http.StatusServiceUnavailable}
	errInternal = errorType{"internal", http.StatusInternalServerError}
)

// apiError is a failure to answer with its kind.
type apiError struct {
	typ errorType
	err error
}

func (e *apiError) Error() string { return e.typ.name + ": " + e.err.Error() }

// badData is the client's mistake (400).
func badData(err error) *apiError { return &apiError{errBadData, err} }

// execError classifies a failure running a query or a lookup, as
// returnAPIError does: cancelled, timed out, storage (internal), else
// execution.
func execError(err error) *apiError {
	var (
		eqc promql.ErrQueryCanceled
		eqt promql.ErrQueryTimeout
		es  promql.ErrStorage
	)
	switch {
	case errors.As(err, &eqc), errors.Is(err, context.Canceled):
		return &apiError{errCanceled, err}
	case errors.As(err, &eqt), errors.Is(err, context.DeadlineExceeded):
		return &apiError{errTimeout, err}
	case errors.As(err, &es):
		return &apiError{errInternal, err}
	}
	return &apiError{errExec, err}
}

// writer writes answers, logging what it cannot write.
type writer struct{ log *slog.Logger }

// ok answers data with the warnings and infos of the query's annotations
// (api.go respond: AsStrings(query, 10, 10)).
func (wr writer) ok(w http.ResponseWriter, data any, annos annotations.Annotations, query string) {
	warns, infos := annos.AsStrings(query, 10, 10)
	d, isQuery := data.(queryData)
	if !isQuery {
		wr.write(w, http.StatusOK, response{Status: "success", Data: data, Warnings: warns, Infos: infos})
		return
	}
	// A query's result, megabytes of it for a range query, is written
	// in the envelope: encoding/json would check and copy it again.
	const envelope = `{"status":"success","data":`
	b, err := d.appendJSON(append(make([]byte, 0, len(envelope)+d.sizeHint()), envelope...))
	if err != nil {
		wr.fail(w, &apiError{errInternal, err})
		return
	}
	for _, list := range []struct {
		key string
		vs  []string
	}{{"warnings", warns}, {"infos", infos}} {
		if len(list.vs) > 0 {
			js, _ := json.Marshal(list.vs) // strings always encode
			b = append(append(b, `,"`+list.key+`":`...), js...)
		}
	}
	wr.send(w, http.StatusOK, append(b, '}'))
}

// fail answers e in Prometheus's shape with its status. The read path's
// failures name the files it reads: their paths are taken out
// (query.StripPaths), as the other APIs and Flight SQL do. The request's
// own failures keep their text whole: bad_data, and the execution errors
// of PromQL's evaluation, which quote the query and its series' labels
// (a regular expression over routes, http_route="/api/v1/users"), where
// the read path's errors come as execution errors too (readError).
func (wr writer) fail(w http.ResponseWriter, e *apiError) {
	msg := e.err.Error()
	var re *readError
	if e.typ.status != http.StatusBadRequest && (e.typ != errExec || errors.As(e.err, &re)) {
		msg = query.StripPaths(msg)
	}
	wr.write(w, e.typ.status, response{Status: "error", ErrorType: e.typ.name, Error: msg})
}

// refuse answers a refusal of the tenancy rules (httpapi.Routes.Refuse):
// Prometheus itself has no tenants, so a 400 (malformed tenant) is its
// bad_data, and 401 and 403 name themselves.
func (wr writer) refuse(w http.ResponseWriter, status int, msg string) {
	typ := errorType{"bad_data", status}
	switch status {
	case http.StatusUnauthorized:
		typ.name = "unauthorized"
	case http.StatusForbidden:
		typ.name = "forbidden"
	case http.StatusBadRequest:
	default:
		typ.name = "internal"
	}
	wr.fail(w, &apiError{typ, errors.New(msg)})
}

func (wr writer) write(w http.ResponseWriter, status int, r response) {
	b, err := json.Marshal(r)
	if err != nil {
		wr.log.Error("prometheus api: encode the answer", "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	wr.send(w, status, b)
}

func (wr writer) send(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		wr.log.Debug("prometheus api: write the answer", "err", err)
	}
}
