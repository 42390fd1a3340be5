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
)

// The fields of each point seriesSQL reads, in order.
const (
	fieldT = iota
	fieldV
	fieldC
	fieldS
	fieldB
	fieldE
	fieldQ
	fieldF
)

// noRecordedValue is OTLP's FLAG_NO_RECORDED_VALUE: the point marks the
// series gone, served as Prometheus's stale marker, as Prometheus's OTLP
// receiver does (prometheusremotewrite/number_data_points.go).
const noRecordedValue = 1

// expandPoints makes the series of one row's points (rows start to end of
// pts) for each kind w wants: a histogram's cumulative buckets le by le
// (the last, +Inf, is the count: prometheusremotewrite/helper.go
// addHistogramDataPoints), a summary's quantiles.
func expandPoints(w wanted, base labels.Labels, pts *array.Struct, start, end int) ([]*floatSeries, error) {
	ts, vs, cs, ss := pts.Field(fieldT), pts.Field(fieldV), pts.Field(fieldC), pts.Field(fieldS)
	flags := pts.Field(fieldF)
	var out []*floatSeries
	for _, k := range w.kinds {
		switch k.kind {
		case kindValue, kindSum, kindCount:
			s := &floatSeries{lset: withName(base, k.name, "", "")}
			for j := start; j < end; j++ {
				var v float64
				var ok bool
				switch k.kind {
				case kindValue:
					v, ok = float64At(vs, j)
				case kindSum:
					v, ok = float64At(ss, j)
				default:
					v, ok = float64At(cs, j)
				}
				if ok {
					s.add(int64At(ts, j), stale(v, flags, j))
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
			for j := start; j < end; j++ {
				t := int64At(ts, j)
				if k.kind == kindQuantile {
					var qs []quantile
					if err := unmarshalOrEmpty(stringAt(pts.Field(fieldQ), j), &qs); err != nil {
						return nil, err
					}
					for _, q := range qs {
						at("quantile", formatBound(float64(q.Quantile))).add(t, stale(float64(q.Value), flags, j))
					}
					continue
				}
				var bounds, counts []jsonFloat
				if err := unmarshalOrEmpty(stringAt(pts.Field(fieldE), j), &bounds); err != nil {
					return nil, err
				}
				if err := unmarshalOrEmpty(stringAt(pts.Field(fieldB), j), &counts); err != nil {
					return nil, err
				}
				var cum float64
				for i := 0; i < len(bounds) && i < len(counts); i++ {
					cum += float64(counts[i])
					if math.IsInf(float64(bounds[i]), 1) {
						continue // +Inf is the count, below
					}
					at("le", formatBound(float64(bounds[i]))).add(t, stale(cum, flags, j))
				}
				if c, ok := float64At(cs, j); ok {
					at("le", "+Inf").add(t, stale(c, flags, j))
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

func stale(v float64, flags arrow.Array, j int) float64 {
	if int64At(flags, j)&noRecordedValue != 0 {
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
