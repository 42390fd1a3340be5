package prom

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

// rawPoint is a point of a series as the table holds it.
type rawPoint struct {
	t          int64 // ms
	v, c, s    float64
	hasV, hasS bool
	hasC       bool
	b, e, q    string // bucket counts, bounds, quantiles: JSON text, "" for null
	flags      int64
}

// listAt is the values of row i of a list column and where the row's
// are among them.
func listAt(col arrow.Array, i int) (arrow.Array, int, int) {
	l := col.(*array.List)
	start, end := l.ValueOffsets(i)
	return l.ListValues(), int(start), int(end)
}

// rowPoints gathers row i's points from seriesSQL's lists, sorted by
// time, one per timestamp: one of several loaded (a batch loaded twice by
// a client's retry, the same point) or falling in the same millisecond.
func rowPoints(rec arrow.RecordBatch, i int) []rawPoint {
	_, start, end := listAt(rec.Column(colT), i)
	pts := make([]rawPoint, end-start)
	// values is field k's values of the row, nil for a list not read
	// (null: the families read have no such field).
	values := func(k int) (arrow.Array, int) {
		vals, start, end := listAt(rec.Column(colT+k), i)
		if end-start != len(pts) {
			return nil, 0
		}
		return vals, start
	}
	if a, at := values(0); a != nil {
		for j := range pts {
			pts[j].t = int64At(a, at+j)
		}
	}
	numbers(values(1))(pts, func(p *rawPoint, v float64, ok bool) { p.v, p.hasV = v, ok })
	numbers(values(2))(pts, func(p *rawPoint, v float64, ok bool) { p.c, p.hasC = v, ok })
	numbers(values(3))(pts, func(p *rawPoint, v float64, ok bool) { p.s, p.hasS = v, ok })
	for k, dst := range []func(p *rawPoint) *string{
		func(p *rawPoint) *string { return &p.b }, func(p *rawPoint) *string { return &p.e }, func(p *rawPoint) *string { return &p.q },
	} {
		if a, at := values(4 + k); a != nil && a.NullN() < a.Len() {
			for j := range pts {
				*dst(&pts[j]) = stringAt(a, at+j)
			}
		}
	}
	if a, at := values(7); a != nil {
		for j := range pts {
			pts[j].flags = int64At(a, at+j)
		}
	}
	if !slices.IsSortedFunc(pts, func(a, b rawPoint) int { return cmp.Compare(a.t, b.t) }) {
		pts = sortByTime(pts)
	}
	return slices.CompactFunc(pts, func(a, b rawPoint) bool { return a.t == b.t })
}

// numbers walks the numbers of a list of points (values, from at),
// doubles or integers, handing each to set with whether it is not null.
func numbers(a arrow.Array, at int) func(pts []rawPoint, set func(p *rawPoint, v float64, ok bool)) {
	return func(pts []rawPoint, set func(p *rawPoint, v float64, ok bool)) {
		switch a := a.(type) {
		case *array.Float64:
			vs := a.Float64Values()[at : at+len(pts)]
			for j := range pts {
				set(&pts[j], vs[j], a.IsValid(at+j))
			}
		case *array.Int64:
			vs := a.Int64Values()[at : at+len(pts)]
			for j := range pts {
				set(&pts[j], float64(vs[j]), a.IsValid(at+j))
			}
		}
	}
}

// sortByTime sorts pts by time through their order alone: moving the
// points themselves while sorting made the sort a sixth of a 6-hour
// range query's CPU (BenchmarkRate6h).
func sortByTime(pts []rawPoint) []rawPoint {
	type key struct {
		t int64
		i int
	}
	keys := make([]key, len(pts))
	for i, p := range pts {
		keys[i] = key{p.t, i}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Compare(a.t, b.t) })
	sorted := make([]rawPoint, len(pts))
	for i, k := range keys {
		sorted[i] = pts[k.i]
	}
	return sorted
}

// noRecordedValue is OTLP's FLAG_NO_RECORDED_VALUE: the point marks the
// series gone, served as Prometheus's stale marker, as Prometheus's OTLP
// receiver does (prometheusremotewrite/number_data_points.go).
const noRecordedValue = 1

// expandPoints makes the series of one row's points for each kind w
// wants: a histogram's cumulative buckets le by le (the last, +Inf, is
// the count: prometheusremotewrite/helper.go addHistogramDataPoints), a
// summary's quantiles.
func expandPoints(w wanted, base labels.Labels, pts []rawPoint) ([]*floatSeries, error) {
	var out []*floatSeries
	for _, k := range w.kinds {
		switch k.kind {
		case kindValue, kindSum, kindCount:
			s := &floatSeries{lset: withName(base, k.name, "", ""), pts: make(points, 0, len(pts))}
			for _, p := range pts {
				switch {
				case k.kind == kindValue && p.hasV:
					s.add(p.t, stale(p.v, p))
				case k.kind == kindSum && p.hasS:
					s.add(p.t, stale(p.s, p))
				case k.kind == kindCount && p.hasC:
					s.add(p.t, stale(p.c, p))
				}
			}
			out = append(out, s)
		case kindBucket, kindQuantile:
			bySuffix := map[string]*floatSeries{}
			at := func(label, v string) *floatSeries {
				s, ok := bySuffix[v]
				if !ok {
					s = &floatSeries{lset: withName(base, k.name, label, v)}
					bySuffix[v] = s
				}
				return s
			}
			for _, p := range pts {
				if k.kind == kindQuantile {
					var qs []quantile
					if err := unmarshalOrEmpty(p.q, &qs); err != nil {
						return nil, err
					}
					for _, q := range qs {
						at("quantile", formatBound(float64(q.Quantile))).add(p.t, stale(float64(q.Value), p))
					}
					continue
				}
				var bounds, counts []jsonFloat
				if err := unmarshalOrEmpty(p.e, &bounds); err != nil {
					return nil, err
				}
				if err := unmarshalOrEmpty(p.b, &counts); err != nil {
					return nil, err
				}
				var cum float64
				for i := 0; i < len(bounds) && i < len(counts); i++ {
					cum += float64(counts[i])
					if math.IsInf(float64(bounds[i]), 1) {
						continue // +Inf is the count, below
					}
					at("le", formatBound(float64(bounds[i]))).add(p.t, stale(cum, p))
				}
				if p.hasC {
					at("le", "+Inf").add(p.t, stale(p.c, p))
				}
			}
			for _, v := range slices.Sorted(maps.Keys(bySuffix)) {
				out = append(out, bySuffix[v])
			}
		}
	}
	return out, nil
}

// expandShapes makes the series, without samples, of one row whose
// distinct bounds or quantiles (JSON lists) are rows start to end of
// shapes.
func expandShapes(w wanted, base labels.Labels, shapes arrow.Array, start, end int) ([]*floatSeries, error) {
	var out []*floatSeries
	for _, k := range w.kinds {
		label := ""
		switch k.kind {
		case kindBucket:
			label = "le"
		case kindQuantile:
			label = "quantile"
		default:
			out = append(out, &floatSeries{lset: withName(base, k.name, "", "")})
			continue
		}
		values := map[string]bool{}
		if k.kind == kindBucket {
			values["+Inf"] = true
		}
		for j := start; j < end; j++ {
			var fs []jsonFloat
			if err := unmarshalOrEmpty(stringAt(shapes, j), &fs); err != nil {
				return nil, err
			}
			for _, f := range fs {
				values[formatBound(float64(f))] = true
			}
		}
		for _, v := range slices.Sorted(maps.Keys(values)) {
			out = append(out, &floatSeries{lset: withName(base, k.name, label, v)})
		}
	}
	return out, nil
}

// stale is v, or the stale marker for a point that has none.
func stale(v float64, p rawPoint) float64 {
	if p.flags&noRecordedValue != 0 {
		return math.Float64frombits(value.StaleNaN)
	}
	return v
}

// quantile is one of a summary point's quantiles, as the table holds them.
type quantile struct {
	Quantile jsonFloat `json:"quantile"`
	Value    jsonFloat `json:"value"`
}

// jsonFloat is a number of the table's JSON columns: a number, or one of
// the strings NaN, Infinity and -Infinity that JSON lacks.
type jsonFloat float64

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case `"NaN"`:
		*f = jsonFloat(math.NaN())
	case `"Infinity"`:
		*f = jsonFloat(math.Inf(1))
	case `"-Infinity"`:
		*f = jsonFloat(math.Inf(-1))
	default:
		v, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return fmt.Errorf("not a number: %s", b)
		}
		*f = jsonFloat(v)
	}
	return nil
}

// unmarshalOrEmpty decodes s, leaving v as it is when s is "" (null).
func unmarshalOrEmpty(s string, v any) error {
	if s == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		return fmt.Errorf("read %q: %w", s, err)
	}
	return nil
}
