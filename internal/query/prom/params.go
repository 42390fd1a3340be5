package prom

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Parameters are read as Prometheus reads them (web/api/v1/api.go
// parseTime, parseTimeParam, parseDuration, parseMatchersParam,
// parseLimitParam), from the URL or a form-encoded POST body alike
// (r.FormValue), since promtool and Grafana send either.

// minTime and maxTime are Prometheus's bounds of an unbounded range, and
// the text its clients send for them (api.go MinTime, MaxTime).
var (
	minTime          = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	maxTime          = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()
	minTimeFormatted = minTime.Format(time.RFC3339Nano)
	maxTimeFormatted = maxTime.Format(time.RFC3339Nano)
)

// parseTime reads a Unix time in seconds (fractions rounded to the
// millisecond) or an RFC 3339 time.
func parseTime(s string) (time.Time, error) {
	if t, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(t)
		frac = math.Round(frac*1000) / 1000
		return time.Unix(int64(sec), int64(frac*float64(time.Second))).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	switch s {
	case minTimeFormatted:
		return minTime, nil
	case maxTimeFormatted:
		return maxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp", s)
}

// timeParam is the time in parameter name, or def when absent.
func timeParam(r *http.Request, name string, def time.Time) (time.Time, error) {
	v := r.FormValue(name)
	if v == "" {
		return def, nil
	}
	t, err := parseTime(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time value for '%s': %w", name, err)
	}
	return t, nil
}

// parseDuration reads seconds (a float) or a Prometheus duration (5m).
func parseDuration(s string) (time.Duration, error) {
	if d, err := strconv.ParseFloat(s, 64); err == nil {
		ts := d * float64(time.Second)
		if math.IsNaN(ts) || ts >= float64(math.MaxInt64) || ts < float64(math.MinInt64) {
			return 0, fmt.Errorf("cannot parse %q to a valid duration. It overflows int64", s)
		}
		return time.Duration(ts), nil
	}
	if d, err := model.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration", s)
}

// parseMatchers reads match[] selectors; each must hold a matcher that
// does not match the empty string, as Prometheus demands.
func parseMatchers(p parser.Parser, ss []string) ([][]*labels.Matcher, error) {
	sets, err := p.ParseMetricSelectors(ss)
	if err != nil {
		return nil, err
	}
outer:
	for _, ms := range sets {
		for _, m := range ms {
			if m != nil && !m.Matches("") {
				continue outer
			}
		}
		return nil, errors.New("match[] must contain at least one non-empty matcher")
	}
	return sets, nil
}

// parseLimit reads limit: 0 (none) when absent.
func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, errors.New("limit must be non-negative")
	}
	return n, nil
}

// invalidParam is Prometheus's answer to a parameter it cannot read.
func invalidParam(err error, name string) *apiError {
	return badData(fmt.Errorf("invalid parameter %q: %w", name, err))
}
