package loki

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/tracelake/tracelake/internal/query/logql"
)

// Request parameters as Loki reads them (pkg/loghttp/params.go,
// pkg/loghttp/query.go): the same names, defaults and refusals.
const (
	defaultLimit = 100
	defaultSince = time.Hour
	// maxPoints bounds a range query's steps per series (Loki
	// pkg/loghttp/query.go).
	maxPoints = 11000
	// maxEntries bounds a log query's limit: Loki's default
	// max_entries_limit_per_query (pkg/validation/limits.go), which its
	// frontend enforces (pkg/querier/queryrange/limits.go
	// validateMaxEntriesLimits), so that one request cannot pull a
	// tenant's whole table through memory.
	maxEntries = 5000
)

// paramError is a parameter Loki would refuse: 400.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

func badParam(format string, args ...any) error { return &paramError{fmt.Sprintf(format, args...)} }

// parseTimestamp reads a time: float seconds, integer seconds (up to 10
// digits) or nanoseconds, or RFC 3339.
func parseTimestamp(v string, def time.Time) (time.Time, error) {
	if v == "" {
		return def, nil
	}
	if strings.Contains(v, ".") {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			s, frac := math.Modf(f)
			frac = math.Round(frac*1000) / 1000
			return time.Unix(int64(s), int64(frac*float64(time.Second))), nil
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t, nil
		}
		return time.Time{}, err
	}
	if len(v) <= 10 {
		return time.Unix(n, 0), nil
	}
	return time.Unix(0, n), nil
}

// bounds are start and end: end defaults to now, start to an hour
// before end (or since before it), end capped at now for the default.
func bounds(r *http.Request, now time.Time) (time.Time, time.Time, error) {
	since := defaultSince
	if s := r.Form.Get("since"); s != "" {
		// A Prometheus duration, as Loki reads since
		// (pkg/loghttp/params.go determineBounds: model.ParseDuration):
		// no fractions, no sign, no µs, where Go's would take them.
		d, err := model.ParseDuration(s)
		if err != nil {
			return time.Time{}, time.Time{}, badParam("could not parse 'since' parameter: %v", err)
		}
		since = time.Duration(d)
	}
	end, err := parseTimestamp(r.Form.Get("end"), now)
	if err != nil {
		return time.Time{}, time.Time{}, badParam("could not parse 'end' parameter: %v", err)
	}
	endOrNow := end
	if end.After(now) {
		endOrNow = now
	}
	start, err := parseTimestamp(r.Form.Get("start"), endOrNow.Add(-since))
	if err != nil {
		return time.Time{}, time.Time{}, badParam("could not parse 'start' parameter: %v", err)
	}
	return start, end, nil
}

func parseLimit(r *http.Request) (int, error) {
	v := r.Form.Get("limit")
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badParam("%v", err)
	}
	if n <= 0 {
		return 0, badParam("limit must be a positive value")
	}
	if n > maxEntries {
		return 0, badParam("max entries limit per query exceeded, limit > max_entries_limit_per_query (%d > %d)", n, maxEntries)
	}
	return n, nil
}

// parseForward reads direction: backward (the default) or forward.
func parseForward(r *http.Request) (bool, error) {
	switch strings.ToUpper(r.Form.Get("direction")) {
	case "", "BACKWARD":
		return false, nil
	case "FORWARD":
		return true, nil
	}
	return false, badParam("invalid direction '%s'", r.Form.Get("direction"))
}

// parseSecondsOrDuration reads a step: float seconds or a duration.
func parseSecondsOrDuration(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		ns := f * float64(time.Second)
		if ns > math.MaxInt64 || ns < math.MinInt64 {
			return 0, badParam("cannot parse %q to a valid duration. It overflows int64", v)
		}
		return time.Duration(ns), nil
	}
	if d, err := logql.ParseDuration(v); err == nil {
		return d, nil
	}
	return 0, badParam("cannot parse %q to a valid duration", v)
}

// rangeParams reads query_range's parameters.
func rangeParams(r *http.Request, now time.Time) (logql.Params, error) {
	start, end, err := bounds(r, now)
	if err != nil {
		return logql.Params{}, err
	}
	if end.Before(start) {
		return logql.Params{}, badParam("end timestamp must not be before or equal to start time")
	}
	p := logql.Params{Start: start.UnixNano(), End: end.UnixNano()}
	if p.Limit, err = parseLimit(r); err != nil {
		return p, err
	}
	if p.Forward, err = parseForward(r); err != nil {
		return p, err
	}
	if v := r.Form.Get("step"); v != "" {
		if p.Step, err = parseSecondsOrDuration(v); err != nil {
			return p, err
		}
	} else {
		p.Step = time.Duration(max(math.Floor(end.Sub(start).Seconds()/250), 1)) * time.Second
	}
	if p.Step <= 0 {
		return p, badParam("zero or negative query resolution step widths are not accepted. Try a positive integer")
	}
	if end.Sub(start)/p.Step > maxPoints {
		return p, badParam("exceeded maximum resolution of 11,000 points per timeseries. Try increasing the value of the step parameter")
	}
	return p, nil
}

// instantParams reads query's parameters.
func instantParams(r *http.Request, now time.Time) (logql.Params, error) {
	t, err := parseTimestamp(r.Form.Get("time"), now)
	if err != nil {
		return logql.Params{}, badParam("could not parse 'time' parameter: %v", err)
	}
	p := logql.Params{Start: t.UnixNano(), End: t.UnixNano(), Instant: true}
	if p.Limit, err = parseLimit(r); err != nil {
		return p, err
	}
	p.Forward, err = parseForward(r)
	return p, err
}

// categorize says whether the client asked for labels by category
// (Loki pkg/util/httpreq/encoding_flags.go: the
// X-Loki-Response-Encoding-Flags header, comma-separated).
func categorize(r *http.Request) bool {
	for _, f := range strings.Split(r.Header.Get("X-Loki-Response-Encoding-Flags"), ",") {
		if strings.TrimSpace(f) == "categorize-labels" {
			return true
		}
	}
	return false
}

// isParamError says whether err is the caller's: a parameter or a query
// Loki would refuse with 400.
func isParamError(err error) bool {
	var pe *paramError
	var le *logql.ParseError
	var qe *logql.QueryError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &qe)
}
