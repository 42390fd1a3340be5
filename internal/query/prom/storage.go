package prom

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tracelake/tracelake/internal/query"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// queryable reads the metrics table for one scope (storage.Queryable):
// each request makes its own, so the scope decided by the tenancy rules
// is the only one its queriers can read.
type queryable struct {
	reader query.Reader
	table  string
	scope  tenancy.Scope
}

// Querier implements storage.Queryable; mint and maxt are milliseconds.
func (q queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{queryable: q, mint: mint, maxt: maxt}, nil
}

// querier answers the engine's and the API's reads over [mint, maxt].
// Safe for concurrent use.
type querier struct {
	queryable
	mint, maxt int64
	described  bool // whether allFamilies reads the families' descriptions

	mu       sync.Mutex
	families []*family // read once per querier, for its range
}

func (q *querier) Close() error { return nil }

// allFamilies are the families with points in the querier's range,
// sorted by name, unit, type and monotonicity; their descriptions are
// read when the querier is described.
func (q *querier) allFamilies(ctx context.Context) ([]*family, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.families != nil {
		return q.families, nil
	}
	from, to := timeRange(q.mint, q.maxt)
	byKey := map[string]*family{}
	err := readRows(ctx, q.reader, q.scope, familiesSQL(q.table, q.described), []any{from, to}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			var desc string
			if q.described {
				desc = stringAt(rec.Column(6), i)
			}
			f, err := newFamily(stringAt(rec.Column(0), i), stringAt(rec.Column(1), i), stringAt(rec.Column(2), i),
				boolAt(rec.Column(3), i), desc)
			if err != nil {
				continue // a name that makes no Prometheus name is not served
			}
			f.noSum, f.noQuantiles = boolAt(rec.Column(4), i), boolAt(rec.Column(5), i)
			// Rows of a null and an empty unit (or monotonicity) are one
			// family, described by the greater description.
			if seen, ok := byKey[f.key()]; ok {
				seen.description = max(seen.description, f.description)
				seen.noSum = seen.noSum && f.noSum
				seen.noQuantiles = seen.noQuantiles && f.noQuantiles
				continue
			}
			byKey[f.key()] = f
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the metrics: %w", err)
	}
	fams := slices.SortedFunc(maps.Values(byKey), func(a, b *family) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.unit, b.unit), cmp.Compare(a.typ, b.typ),
			cmp.Compare(b2i(a.monotonic), b2i(b.monotonic)))
	})
	if fams == nil {
		fams = []*family{}
	}
	q.families = fams
	return fams, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// wanted is a family with the kinds of its series that the matchers on
// __name__ admit.
type wanted struct {
	fam   *family
	kinds []namedKind
}

// match picks the families and series kinds whose names the matchers on
// __name__ admit: the name is pushed down as the OpenTelemetry names of
// those families.
func match(fams []*family, ms []*labels.Matcher) map[string]wanted {
	out := map[string]wanted{}
	for _, f := range fams {
		var kinds []namedKind
		for _, k := range f.kinds() {
			if matchesName(ms, k.name) {
				kinds = append(kinds, k)
			}
		}
		if len(kinds) > 0 {
			out[f.key()] = wanted{f, kinds}
		}
	}
	return out
}

func matchesName(ms []*labels.Matcher, name string) bool {
	for _, m := range ms {
		if m.Name == labels.MetricName && !m.Matches(name) {
			return false
		}
	}
	return true
}

// Select implements storage.Querier: the series matching ms in the hints'
// range (the querier's without hints), sorted by labels whatever
// sortSeries says. The API's series lookups (hints.Func "series") read no
// samples.
func (q *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := q.mint, q.maxt
	points := true
	if hints != nil {
		mint, maxt = hints.Start, hints.End
		points = hints.Func != "series"
	}
	series, err := q.read(ctx, mint, maxt, points, ms)
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	if hints != nil && hints.Limit > 0 && len(series) > hints.Limit {
		series = series[:hints.Limit]
	}
	return newSeriesSet(series)
}

// read finds the series matching ms in [mint, maxt], with their samples
// when points is set, sorted by labels.
func (q *querier) read(ctx context.Context, mint, maxt int64, points bool, ms []*labels.Matcher) ([]*floatSeries, error) {
	fams, err := q.allFamilies(ctx)
	if err != nil {
		return nil, err
	}
	var out []*floatSeries
	if want := match(fams, ms); len(want) > 0 {
		if out, err = q.readFamilies(ctx, want, mint, maxt, points, ms); err != nil {
			return nil, fmt.Errorf("read the series: %w", err)
		}
	}
	if matchesName(ms, targetInfoName) {
		ti, err := q.readTargetInfo(ctx, mint, maxt, points, ms)
		if err != nil {
			return nil, fmt.Errorf("read target_info: %w", err)
		}
		out = append(out, ti...)
	}
	slices.SortFunc(out, func(a, b *floatSeries) int { return labels.Compare(a.lset, b.lset) })
	return mergeSame(out), nil
}

// readFamilies finds the series of the families wanted matching ms in
// [mint, maxt], with their samples when points is set, in no order.
func (q *querier) readFamilies(ctx context.Context, want map[string]wanted, mint, maxt int64, points bool, ms []*labels.Matcher) ([]*floatSeries, error) {
	f := seriesFilter{services: pushedServices(ms)}
	for _, w := range want {
		f.families = append(f.families, w.fam)
		f.distributions = f.distributions || w.fam.typ == "histogram" || w.fam.typ == "summary"
	}
	slices.SortFunc(f.families, func(a, b *family) int { return cmp.Compare(a.key(), b.key()) })
	from, to := timeRange(mint, maxt)
	text, params := seriesSQL(q.table, q.scope.All, points, from, to, f)
	var out []*floatSeries
	err := readRows(ctx, q.reader, q.scope, text, params, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			// The rows are of the one family wanted, or say which.
			w := want[f.families[0].key()]
			if len(f.families) > 1 {
				fam := family{name: stringAt(rec.Column(colName), i), unit: stringAt(rec.Column(colUnit), i),
					typ: stringAt(rec.Column(colType), i), monotonic: boolAt(rec.Column(colMonotonic), i)}
				var ok bool
				if w, ok = want[fam.key()]; !ok {
					return fmt.Errorf("BUG: a row of %s, a family not asked for", fam.name)
				}
			}
			base, err := seriesLabels(orEmptyObject(stringAt(rec.Column(colResource), i)), orEmptyObject(stringAt(rec.Column(colAttributes), i)),
				stringAt(rec.Column(colScopeName), i), stringAt(rec.Column(colScopeVersion), i),
				orEmptyObject(stringAt(rec.Column(colScopeAttributes), i)), stringAt(rec.Column(colTenant), i))
			if err != nil {
				return fmt.Errorf("labels of %s: %w", w.fam.name, err)
			}
			var made []*floatSeries
			if points {
				made, err = expandPoints(w, base, readRowPoints(rec, i))
			} else {
				shapes, start, end := listAt(rec.Column(colShapes), i)
				made, err = expandShapes(w, base, shapes, start, end, boolAt(rec.Column(colNoSum), i))
			}
			if err != nil {
				return fmt.Errorf("points of %s: %w", w.fam.name, err)
			}
			for _, s := range made {
				if matchesAll(ms, s.lset) {
					out = append(out, s)
				}
			}
		}
		return nil
	})
	return out, err
}

// orEmptyObject is attributes read from the table, "{}" for none (null).
func orEmptyObject(attributes string) string {
	if attributes == "" {
		return "{}"
	}
	return attributes
}

// mergeSame merges sorted series of the same labels into one: rows the
// table tells apart may make the same labels (attributes written in
// another order, metric names that escape alike), and a storage holds a
// series once.
func mergeSame(sorted []*floatSeries) []*floatSeries {
	out := sorted[:0]
	for _, s := range sorted {
		if n := len(out); n > 0 && labels.Equal(out[n-1].lset, s.lset) {
			out[n-1].merge(s)
			continue
		}
		out = append(out, s)
	}
	return out
}

// pushedServices are the values a service_name matcher lets through,
// when it names them exactly (a value holding ";" may be two attributes
// joined, which the column does not hold).
func pushedServices(ms []*labels.Matcher) []string {
	for _, m := range ms {
		if m.Name == "service_name" && m.Type == labels.MatchEqual && m.Value != "" && !strings.Contains(m.Value, ";") {
			return []string{m.Value}
		}
	}
	return nil
}

func matchesAll(ms []*labels.Matcher, lset labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(lset.Get(m.Name)) {
			return false
		}
	}
	return true
}

// LabelNames implements storage.LabelQuerier.
func (q *querier) LabelNames(ctx context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	series, err := q.read(ctx, q.mint, q.maxt, false, ms)
	if err != nil {
		return nil, nil, err
	}
	set := map[string]struct{}{}
	for _, s := range series {
		s.lset.Range(func(l labels.Label) { set[l.Name] = struct{}{} })
	}
	return limited(set, hints), nil, nil
}

// LabelValues implements storage.LabelQuerier. Metric names without
// other matchers come from the families alone, and target_info when a
// resource has it.
func (q *querier) LabelValues(ctx context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	set := map[string]struct{}{}
	if name == labels.MetricName && !slices.ContainsFunc(ms, func(m *labels.Matcher) bool { return m.Name != labels.MetricName }) {
		fams, err := q.allFamilies(ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, w := range match(fams, ms) {
			for _, k := range w.kinds {
				set[k.name] = struct{}{}
			}
		}
		// Not only with families served: Prometheus writes target_info
		// for a resource with points it refuses too (metrics_to_prw.go
		// FromMetrics: the timestamps are found before the temporality
		// check).
		if matchesName(ms, targetInfoName) {
			if has, err := q.hasTargetInfo(ctx); err != nil {
				return nil, nil, fmt.Errorf("read target_info: %w", err)
			} else if has {
				set[targetInfoName] = struct{}{}
			}
		}
		return limited(set, hints), nil, nil
	}
	series, err := q.read(ctx, q.mint, q.maxt, false, ms)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range series {
		if v := s.lset.Get(name); v != "" {
			set[v] = struct{}{}
		}
	}
	return limited(set, hints), nil, nil
}

// limited is set sorted, cut to the hints' limit.
func limited(set map[string]struct{}, hints *storage.LabelHints) []string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	if hints != nil && hints.Limit > 0 && len(out) > hints.Limit {
		out = out[:hints.Limit]
	}
	return out
}
