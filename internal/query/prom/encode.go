package prom

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// A query's result is written as Prometheus writes it (web/api/v1/
// json_codec.go with util/jsonutil/marshal.go): timestamps in seconds
// with the milliseconds as written digits, values as strings ('f'
// notation, 'e' below 1e-6 and from 1e21, NaN, +Inf, -Inf). It is
// appended by hand: encoding/json's way through promql's MarshalJSON
// took half the CPU of a 6-hour range query (BenchmarkRate6hHTTP).

// MarshalJSON implements json.Marshaler.
func (d queryData) MarshalJSON() ([]byte, error) {
	return d.appendJSON(make([]byte, 0, d.sizeHint()))
}

// appendJSON appends d as JSON to b.
func (d queryData) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"resultType":`...)
	b = strconv.AppendQuote(b, string(d.ResultType))
	b = append(b, `,"result":`...)
	var err error
	if b, err = appendResult(b, d.Result); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// sizeHint is about the size of d's JSON: a range query's answer runs
// to megabytes, and growing it from a small buffer copied it over and
// over (a third of its encoding, BenchmarkRate6hHTTP). A float sample
// takes up to ~40 bytes ([1772323200.123,"0.06666666666666667"],).
func (d queryData) sizeHint() int {
	n := 1024
	if m, ok := d.Result.(promql.Matrix); ok {
		for _, s := range m {
			n += 512 + 40*len(s.Floats)
		}
	}
	return n
}

func appendResult(b []byte, v parser.Value) ([]byte, error) {
	switch v := v.(type) {
	case promql.Matrix:
		return appendList(b, len(v), func(b []byte, i int) ([]byte, error) {
			s := v[i]
			if len(s.Histograms) > 0 { // native histograms: not read from the table
				return appendJSON(b, s)
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, s.Metric)
			b = append(b, `,"values":[`...)
			for j, p := range s.Floats {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendPoint(b, p.T, p.F)
			}
			return append(b, "]}"...), nil
		})
	case promql.Vector:
		return appendList(b, len(v), func(b []byte, i int) ([]byte, error) {
			s := v[i]
			if s.H != nil {
				return appendJSON(b, s)
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, s.Metric)
			b = append(b, `,"value":`...)
			b = appendPoint(b, s.T, s.F)
			return append(b, '}'), nil
		})
	case promql.Scalar:
		return appendPoint(b, v.T, v.V), nil
	case promql.String:
		b = append(b, '[')
		b = appendTimestamp(b, v.T)
		b = appendString(append(b, ','), v.V)
		return append(b, ']'), nil
	}
	return appendJSON(b, v)
}

// appendList writes a JSON list of n elements, each by elem.
func appendList(b []byte, n int, elem func(b []byte, i int) ([]byte, error)) ([]byte, error) {
	b = append(b, '[')
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = elem(b, i); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendJSON writes v as encoding/json does.
func appendJSON(b []byte, v any) ([]byte, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, js...), nil
}

// appendLabels writes labels as a JSON object.
func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, l.Name)
		b = append(b, ':')
		b = appendString(b, l.Value)
	})
	return append(b, '}')
}

// appendString writes s as a JSON string.
func appendString(b []byte, s string) []byte {
	js, _ := json.Marshal(s) // a string always encodes
	return append(b, js...)
}

// appendPoint writes [t, "v"].
func appendPoint(b []byte, t int64, v float64) []byte {
	b = append(b, '[')
	b = appendTimestamp(b, t)
	b = append(b, `,"`...)
	b = appendFloat(b, v)
	return append(b, `"]`...)
}

// appendTimestamp writes t (ms) in seconds, the milliseconds as digits
// (jsonutil.MarshalTimestamp).
func appendTimestamp(b []byte, t int64) []byte {
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/1000, 10)
	if frac := t % 1000; frac != 0 {
		b = append(b, '.')
		if frac < 100 {
			b = append(b, '0')
		}
		if frac < 10 {
			b = append(b, '0')
		}
		b = strconv.AppendInt(b, frac, 10)
	}
	return b
}

// appendFloat writes v as jsonutil.MarshalFloat does.
func appendFloat(b []byte, v float64) []byte {
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	return strconv.AppendFloat(b, v, format, -1, 64)
}
