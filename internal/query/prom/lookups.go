package prom

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/otlptranslator"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/timestamp"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tracelake/tracelake/internal/tenancy"
)

// The metadata endpoints (labels, label values, series, metadata) answer
// as their namesakes in prometheus/prometheus web/api/v1/api.go do
// (labelNames, labelValues, series, metricMetadata).

// lookup reads the start, end, limit and match[] of the metadata
// endpoints (labels, label values, series) and hands a querier over the
// range to f, or answers why it cannot.
func (a *api) lookup(w http.ResponseWriter, r *http.Request, s tenancy.Scope, f func(q *querier, sets [][]*labels.Matcher, limit int)) {
	if err := r.ParseForm(); err != nil {
		a.fail(w, badData(fmt.Errorf("error parsing form values: %w", err)))
		return
	}
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		a.fail(w, invalidParam(err, "limit"))
		return
	}
	start, end, aerr := optionalRange(r)
	if aerr != nil {
		a.fail(w, aerr)
		return
	}
	sets, err := parseMatchers(a.parser, r.Form["match[]"])
	if err != nil {
		a.fail(w, invalidParam(err, "match[]"))
		return
	}
	q := &querier{queryable: a.queryable(s), mint: timestamp.FromTime(start), maxt: timestamp.FromTime(end)}
	defer q.Close()
	f(q, sets, limit)
}

// optionalRange reads start and end, Prometheus's bounds when absent.
func optionalRange(r *http.Request) (start, end time.Time, _ *apiError) {
	start, err := timeParam(r, "start", minTime)
	if err != nil {
		return start, end, invalidParam(err, "start")
	}
	end, err = timeParam(r, "end", maxTime)
	if err != nil {
		return start, end, invalidParam(err, "end")
	}
	return start, end, nil
}

// labelHints asks for one more than limit, so that a cut is seen
// (api.go toHintLimit).
func labelHints(limit int) *storage.LabelHints {
	if limit > 0 {
		return &storage.LabelHints{Limit: limit + 1}
	}
	return &storage.LabelHints{}
}

// union gathers what each matcher set finds (one call without any),
// sorted and cut to limit with a warning.
func (a *api) union(w http.ResponseWriter, sets [][]*labels.Matcher, limit int,
	find func(ms ...*labels.Matcher) ([]string, annotations.Annotations, error)) {
	if len(sets) == 0 {
		sets = [][]*labels.Matcher{nil}
	}
	var all []string
	var warnings annotations.Annotations
	for _, ms := range sets {
		vals, ws, err := find(ms...)
		if err != nil {
			a.fail(w, execError(err))
			return
		}
		warnings.Merge(ws)
		all = append(all, vals...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if all == nil {
		all = []string{}
	}
	if limit > 0 && len(all) > limit {
		all = all[:limit]
		warnings = warnings.Add(errors.New("results truncated due to limit"))
	}
	a.ok(w, all, warnings, "")
}

func (a *api) labelNames(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
	a.lookup(w, r, s, func(q *querier, sets [][]*labels.Matcher, limit int) {
		a.union(w, sets, limit, func(ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
			return q.LabelNames(r.Context(), labelHints(limit), ms...)
		})
	})
}

func (a *api) labelValues(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = model.UnescapeName(name, model.ValueEncodingEscaping)
	}
	if !model.UTF8Validation.IsValidLabelName(name) {
		a.fail(w, badData(fmt.Errorf("invalid label name: %q", name)))
		return
	}
	a.lookup(w, r, s, func(q *querier, sets [][]*labels.Matcher, limit int) {
		a.union(w, sets, limit, func(ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
			return q.LabelValues(r.Context(), name, labelHints(limit), ms...)
		})
	})
}

func (a *api) series(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
	if err := r.ParseForm(); err != nil {
		a.fail(w, badData(fmt.Errorf("error parsing form values: %w", err)))
		return
	}
	if len(r.Form["match[]"]) == 0 {
		a.fail(w, badData(errors.New("no match[] parameter provided")))
		return
	}
	a.lookup(w, r, s, func(q *querier, sets [][]*labels.Matcher, limit int) {
		hints := &storage.SelectHints{Start: q.mint, End: q.maxt, Func: "series"}
		seen := map[string]bool{}
		metrics := []labels.Labels{}
		for _, ms := range sets {
			set := q.Select(r.Context(), true, hints, ms...)
			for set.Next() {
				l := set.At().Labels()
				if k := l.String(); !seen[k] {
					seen[k] = true
					metrics = append(metrics, l)
				}
			}
			if err := set.Err(); err != nil {
				a.fail(w, execError(err))
				return
			}
		}
		slices.SortFunc(metrics, labels.Compare)
		var warnings annotations.Annotations
		if limit > 0 && len(metrics) > limit {
			metrics = metrics[:limit]
			warnings = warnings.Add(errors.New("results truncated due to limit"))
		}
		a.ok(w, metrics, warnings, "")
	})
}

// metadataEntry is one metadata of a metric family (Prometheus's
// metadata.Metadata).
type metadataEntry struct {
	Type string `json:"type"`
	Help string `json:"help"`
	Unit string `json:"unit"`
}

// metadata answers the families with points at any time, keyed by their
// Prometheus name: type, description as help, and the unit as
// Prometheus's OTLP receiver names it
// (prometheusremotewrite/metrics_to_prw.go: UnitNamer); and target_info
// when a resource has it (a gauge, "Target metadata": helper.go
// addResourceTargetInfo).
func (a *api) metadata(w http.ResponseWriter, r *http.Request, s tenancy.Scope) {
	limit, aerr := numberParam(r, "limit")
	if aerr != nil {
		a.fail(w, aerr)
		return
	}
	perMetric, aerr := numberParam(r, "limit_per_metric")
	if aerr != nil {
		a.fail(w, aerr)
		return
	}
	metric := r.FormValue("metric")
	q := &querier{queryable: a.queryable(s), mint: timestamp.FromTime(minTime), maxt: timestamp.FromTime(maxTime), described: true}
	fams, err := q.allFamilies(r.Context())
	if err != nil {
		a.fail(w, execError(err))
		return
	}
	units := otlptranslator.UnitNamer{}
	out := map[string][]metadataEntry{}
	if (metric == "" || metric == targetInfoName) && limit != 0 && perMetric != 0 { // as LabelValues: families or not
		has, err := q.hasTargetInfo(r.Context())
		if err != nil {
			a.fail(w, execError(err))
			return
		}
		if has {
			out[targetInfoName] = []metadataEntry{{Type: "gauge", Help: targetInfoHelp}}
		}
	}
	for _, f := range fams {
		if metric != "" && f.prom != metric {
			continue
		}
		ms, known := out[f.prom]
		if !known && limit >= 0 && len(out) >= limit {
			continue
		}
		if perMetric > 0 && len(ms) >= perMetric {
			continue
		}
		m := metadataEntry{Type: f.promType(), Help: f.description, Unit: units.Build(f.unit)}
		if !slices.Contains(ms, m) {
			out[f.prom] = append(ms, m)
		}
	}
	a.ok(w, out, nil, "")
}

// numberParam reads a metadata limit: -1 (none) when absent.
func numberParam(r *http.Request, name string) (int, *apiError) {
	v := r.FormValue(name)
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badData(errors.New(name + " must be a number"))
	}
	return n, nil
}
