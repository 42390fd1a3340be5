package prom

import (
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
	"github.com/prometheus/prometheus/promql"
)

// listAt is the values of row i of a list column and where the row's
// are among them.
func listAt(col arrow.Array, i int) (arrow.Array, int, int) {
	l := col.(*array.List)
	start, end := l.ValueOffsets(i)
	return l.ListValues(), int(start), int(end)
}

// rowPoints are one row's points, read in place from seriesSQL's lists
// (valid while the batch is): the field lists, and order, the points'
// indices among them in time order, one per timestamp (the first of
// several loaded: a batch loaded twice by a client's retry, or points
// falling in the same millisecond). Reading the fields where they lie,
// rather than gathering each point into a struct first, keeps a
// 6-hour range query from allocating and sorting a copy of every point
// (BenchmarkRate6h).
type rowPoints struct {
	t       []int64 // ms
	v, c, s numberList
	b, e, q stringList // bucket counts, bounds, quantiles: JSON text
	stale   []int64    // the times of the points that are stale markers, sorted
	order   []int32
}

// readRowPoints reads row i's points from seriesSQL's lists.
func readRowPoints(rec arrow.RecordBatch, i int) rowPoints {
	_, start, end := listAt(rec.Column(colT), i)
	n := end - start
	// field is field k's values of the row, nil for a list not read
	// (null: the families read have no such field).
	field := func(k int) (arrow.Array, int) {
		vals, start, end := listAt(rec.Column(colT+k), i)
		if end-start != n {
			return nil, 0
		}
		return vals, start
	}
	var r rowPoints
	// The times are read where they lie when they can be (integers, none
	// null, as epoch_ms makes them), copied otherwise.
	if times := newNumberList(field(0)); times.ints != nil && !times.nulls {
		r.t = times.ints[:n]
	} else {
		r.t = make([]int64, n)
		for j := range r.t {
			r.t[j] = times.int(j)
		}
	}
	r.v, r.c, r.s = newNumberList(field(1)), newNumberList(field(2)), newNumberList(field(3))
	r.b, r.e, r.q = newStringList(field(4)), newStringList(field(5)), newStringList(field(6))
	// The stale markers' times are a list of their own (of its own
	// length): see seriesSQL.
	if stale, start, end := listAt(rec.Column(colT+7), i); end > start {
		marks := newNumberList(stale, start)
		for j := range end - start {
			r.stale = append(r.stale, marks.int(j))
		}
		slices.Sort(r.stale)
	}
	r.order = timeOrder(r.t)
	return r
}

// numberList is a list of numbers of a row, doubles or integers.
type numberList struct {
	a      arrow.Array // nil: not read
	at     int
	nulls  bool // whether a has nulls: asking each point otherwise costs a call per point
	floats []float64
	ints   []int64
}

func newNumberList(a arrow.Array, at int) numberList {
	l := numberList{a: a, at: at, nulls: a != nil && a.NullN() > 0}
	switch c := a.(type) {
	case *array.Float64:
		l.floats = c.Float64Values()[at:]
	case *array.Int64:
		l.ints = c.Int64Values()[at:]
	default:
		l.a = nil
	}
	return l
}

// float is the j-th number, and whether it is not null.
func (l numberList) float(j int) (float64, bool) {
	switch {
	case l.a == nil || l.nulls && l.a.IsNull(l.at+j):
		return 0, false
	case l.floats != nil:
		return l.floats[j], true
	}
	return float64(l.ints[j]), true
}

// int is the j-th number as an integer, 0 for null.
func (l numberList) int(j int) int64 {
	switch {
	case l.a == nil || l.nulls && l.a.IsNull(l.at+j):
		return 0
	case l.ints != nil:
		return l.ints[j]
	}
	return int64(l.floats[j])
}

// stringList is a list of strings of a row.
type stringList struct {
	a  arrow.Array // nil: not read, or every value null
	at int
}

func newStringList(a arrow.Array, at int) stringList {
	if a == nil || a.NullN() == a.Len() {
		return stringList{}
	}
	return stringList{a, at}
}

// str is the j-th string, "" for null.
func (l stringList) str(j int) string {
	if l.a == nil {
		return ""
	}
	return stringAt(l.a, l.at+j)
}

// timeOrder is the indices of ts in time order, stable, keeping the
// first of equal times. The lists come from DuckDB's parallel
// aggregation as a few sorted runs (one per thread that read the
// series's rows), so runs are found and merged rather than sorted:
// sorting the points was a sixth of a 6-hour range query's CPU
// (BenchmarkRate6h).
func timeOrder(ts []int64) []int32 {
	order := make([]int32, len(ts))
	for j := range order {
		order[j] = int32(j)
	}
	var runs []int // the start of each sorted run but the first
	for j := 1; j < len(ts); j++ {
		if ts[j] < ts[j-1] {
			runs = append(runs, j)
		}
	}
	if len(runs) > 0 {
		order = mergeRuns(ts, order, append(append([]int{0}, runs...), len(ts)))
	}
	return slices.CompactFunc(order, func(a, b int32) bool { return ts[a] == ts[b] })
}

// mergeRuns merges, pair by pair, the sorted runs of order that bounds
// delimit (bounds[k] to bounds[k+1]), by ts, stably.
func mergeRuns(ts []int64, order []int32, bounds []int) []int32 {
	tmp := make([]int32, len(order))
	for len(bounds) > 2 {
		merged := []int{0}
		for k := 0; k+1 < len(bounds); k += 2 {
			lo, mid, hi := bounds[k], bounds[k+1], bounds[len(bounds)-1]
			if k+2 < len(bounds) {
				hi = bounds[k+2]
			}
			a, b, out := lo, mid, lo
			for a < mid && b < hi {
				if ts[order[b]] < ts[order[a]] {
					tmp[out] = order[b]
					b++
				} else {
					tmp[out] = order[a]
					a++
				}
				out++
			}
			out += copy(tmp[out:], order[a:mid])
			copy(tmp[out:], order[b:hi])
			merged = append(merged, hi)
		}
		order, tmp, bounds = tmp, order, merged
	}
	return order
}

// noRecordedValue is OTLP's FLAG_NO_RECORDED_VALUE: the point marks the
// series gone, served as Prometheus's stale marker, as Prometheus's OTLP
// receiver does (prometheusremotewrite/number_data_points.go).
const noRecordedValue = 1

// expandPoints makes the series of one row's points for each kind w
// wants: a histogram's cumulative buckets le by le (the last, +Inf, is
// the count: prometheusremotewrite/helper.go addHistogramDataPoints), a
// summary's quantiles.
func expandPoints(w wanted, base labels.Labels, r rowPoints) ([]*floatSeries, error) {
	var out []*floatSeries
	for _, k := range w.kinds {
		switch k.kind {
		case kindValue, kindSum, kindCount:
			field := r.v
			switch k.kind {
			case kindSum:
				field = r.s
			case kindCount:
				field = r.c
			}
			s := &floatSeries{lset: withName(base, k.name, "", ""), pts: make(points, 0, len(r.order))}
			if field.floats != nil && !field.nulls && len(r.stale) == 0 {
				// Most series: every point a double, none a stale marker;
				// the order holds one point per time, increasing.
				for _, j := range r.order {
					s.pts = append(s.pts, promql.FPoint{T: r.t[j], F: field.floats[j]})
				}
			} else {
				for _, j := range r.order {
					if v, ok := field.float(int(j)); ok {
						s.add(r.t[j], r.staleOr(v, j))
					}
				}
			}
			if len(s.pts) == 0 {
				continue // no point has the field: a histogram without a sum
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
			for _, j := range r.order {
				t := r.t[j]
				if k.kind == kindQuantile {
					var qs []quantile
					if err := unmarshalOrEmpty(r.q.str(int(j)), &qs); err != nil {
						return nil, err
					}
					for _, q := range qs {
						at("quantile", formatBound(float64(q.Quantile))).add(t, r.staleOr(float64(q.Value), j))
					}
					continue
				}
				var bounds, counts []jsonFloat
				if err := unmarshalOrEmpty(r.e.str(int(j)), &bounds); err != nil {
					return nil, err
				}
				if err := unmarshalOrEmpty(r.b.str(int(j)), &counts); err != nil {
					return nil, err
				}
				var cum float64
				for i := 0; i < len(bounds) && i < len(counts); i++ {
					cum += float64(counts[i])
					if math.IsInf(float64(bounds[i]), 1) {
						continue // +Inf is the count, below
					}
					at("le", formatBound(float64(bounds[i]))).add(t, r.staleOr(cum, j))
				}
				if c, ok := r.c.float(int(j)); ok {
					at("le", "+Inf").add(t, r.staleOr(c, j))
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
// shapes; noSum says the row has no sum, so no _sum series.
func expandShapes(w wanted, base labels.Labels, shapes arrow.Array, start, end int, noSum bool) ([]*floatSeries, error) {
	var out []*floatSeries
	for _, k := range w.kinds {
		label := ""
		switch k.kind {
		case kindSum:
			if noSum {
				continue
			}
			out = append(out, &floatSeries{lset: withName(base, k.name, "", "")})
			continue
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

// staleOr is v, or the stale marker when point j has no recorded value
// (points of the same millisecond are one, stale when any is).
func (r rowPoints) staleOr(v float64, j int32) float64 {
	if _, found := slices.BinarySearch(r.stale, r.t[j]); found {
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
