package logql

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// rangeFunc applies a range aggregation to a window's points, oldest
// first (Loki pkg/logql/range_vector.go); end is the window's upper
// bound in Unix ns (the step's time minus the offset).
func rangeFunc(r *RangeAggr, ps []Point, end int64) float64 {
	secs := r.Range.Seconds()
	switch r.Op {
	case "count_over_time", "absent_over_time":
		return float64(len(ps))
	case "rate":
		if r.Unwrap == nil {
			return float64(len(ps)) / secs
		}
		return sum(ps) / secs
	case "bytes_over_time", "sum_over_time":
		return sum(ps)
	case "bytes_rate":
		return sum(ps) / secs
	case "avg_over_time":
		return sum(ps) / float64(len(ps))
	case "min_over_time":
		// A NaN is taken only while nothing else has been, never over a
		// number (Loki pkg/logql/range_vector.go minOverTime and
		// maxOverTime, its vector min and max alike); math.Min and
		// math.Max would make one NaN the answer.
		m := ps[0].V
		for _, p := range ps {
			if p.V < m || math.IsNaN(m) {
				m = p.V
			}
		}
		return m
	case "max_over_time":
		m := ps[0].V
		for _, p := range ps {
			if p.V > m || math.IsNaN(m) {
				m = p.V
			}
		}
		return m
	case "first_over_time":
		return ps[0].V
	case "last_over_time":
		return ps[len(ps)-1].V
	case "stddev_over_time":
		return math.Sqrt(variance(ps))
	case "stdvar_over_time":
		return variance(ps)
	case "quantile_over_time":
		vs := make([]float64, len(ps))
		for i, p := range ps {
			vs[i] = p.V
		}
		return quantile(r.Param, vs)
	case "rate_counter":
		return counterRate(ps, r.Range, end)
	}
	return math.NaN()
}

func sum(ps []Point) float64 {
	var s float64
	for _, p := range ps {
		s += p.V
	}
	return s
}

func variance(ps []Point) float64 {
	var mean, m2 float64
	for i, p := range ps {
		d := p.V - mean
		mean += d / float64(i+1)
		m2 += d * (p.V - mean)
	}
	return m2 / float64(len(ps))
}

// quantile is Prometheus's quantile: linear interpolation between the
// closest ranks.
func quantile(q float64, vs []float64) float64 {
	if len(vs) == 0 || math.IsNaN(q) {
		return math.NaN()
	}
	if q < 0 {
		return math.Inf(-1)
	}
	if q > 1 {
		return math.Inf(1)
	}
	slices.Sort(vs)
	rank := q * float64(len(vs)-1)
	lo := math.Floor(rank)
	hi := math.Ceil(rank)
	w := rank - lo
	return vs[int(lo)]*(1-w) + vs[int(hi)]*w
}

// counterRate is Prometheus's rate of a counter over the window
// (rng, end]: the increase between the first and last points, resets
// counted, extrapolated towards the window's edges, per second of the
// range. Loki's rate_counter is this (pkg/logql/range_vector.go
// extrapolatedRate with isCounter and isRate), so a counter sampled
// sparsely is not under-reported.
func counterRate(ps []Point, rng time.Duration, end int64) float64 {
	if len(ps) < 2 {
		return 0
	}
	first, last := ps[0], ps[len(ps)-1]
	inc := last.V - first.V
	for i := 1; i < len(ps); i++ {
		if ps[i].V < ps[i-1].V {
			inc += ps[i-1].V
		}
	}
	sampled := float64(last.T-first.T) / 1e9
	toStart := float64(first.T-(end-int64(rng))) / 1e9
	toEnd := float64(end-last.T) / 1e9
	// A point is expected at the edge when the gap to it is within the
	// average spacing (plus 10% for jitter); otherwise extrapolate by
	// half the spacing only.
	avg := sampled / float64(len(ps)-1)
	if toStart >= avg*1.1 {
		toStart = avg / 2
	}
	// A counter is never negative: extrapolate back no further than
	// where the slope would reach zero.
	if inc > 0 && first.V >= 0 {
		toStart = min(toStart, sampled*first.V/inc)
	}
	if toEnd >= avg*1.1 {
		toEnd = avg / 2
	}
	return inc * (sampled + toStart + toEnd) / sampled / rng.Seconds()
}

// group keeps the labels by lists, or drops those without lists.
func group(g *Grouping, ls Labels) Labels {
	out := Labels{}
	for _, l := range ls {
		if slices.Contains(g.Labels, l.Name) != g.Without {
			out = append(out, l)
		}
	}
	return out
}

// aggregate applies a vector aggregation to one step's vector (Loki
// pkg/logql/evaluator.go vectorAggEvaluator, Prometheus's meaning).
func aggregate(a *VectorAggr, v []Sample) []Sample {
	if a.Op == "sort" || a.Op == "sort_desc" {
		out := slices.Clone(v)
		slices.SortStableFunc(out, func(x, y Sample) int {
			c := cmp.Compare(x.V, y.V)
			if a.Op == "sort_desc" {
				c = -c
			}
			return c
		})
		return out
	}
	g := a.Grouping
	if g == nil {
		g = &Grouping{}
	}
	type bucket struct {
		labels  Labels
		samples []Sample
	}
	var buckets ByLabels[bucket]
	for _, s := range v {
		ls := group(g, s.Labels)
		b := buckets.At(ls, func() *bucket { return &bucket{labels: ls} })
		b.samples = append(b.samples, s)
	}
	var out []Sample
	for _, b := range buckets.Sorted() {
		t := b.samples[0].T
		switch a.Op {
		case "topk", "bottomk":
			ss := slices.Clone(b.samples)
			slices.SortStableFunc(ss, func(x, y Sample) int {
				if a.Op == "topk" {
					return cmp.Compare(y.V, x.V)
				}
				return cmp.Compare(x.V, y.V)
			})
			out = append(out, ss[:min(int(a.Param), len(ss))]...)
			continue
		}
		ps := make([]Point, len(b.samples))
		for i, s := range b.samples {
			ps[i] = Point{V: s.V}
		}
		var val float64
		switch a.Op {
		case "sum":
			val = sum(ps)
		case "avg":
			val = sum(ps) / float64(len(ps))
		case "count":
			val = float64(len(ps))
		case "min":
			val = rangeFunc(&RangeAggr{Op: "min_over_time"}, ps, 0)
		case "max":
			val = rangeFunc(&RangeAggr{Op: "max_over_time"}, ps, 0)
		case "stddev":
			val = math.Sqrt(variance(ps))
		case "stdvar":
			val = variance(ps)
		}
		out = append(out, Sample{Labels: b.labels, T: t, V: val})
	}
	return out
}

// binary evaluates a binary operation at every step (Prometheus's
// matching rules, which LogQL keeps: one-to-one on every label unless
// on/ignoring says otherwise; comparisons filter unless bool).
func binary(b *BinaryExpr, l, r value, steps []int64) (value, error) {
	switch {
	case l.scalar && r.scalar:
		if isComparison(b.Op) && !b.ReturnBool {
			return value{}, &QueryError{"comparisons between scalars must use BOOL modifier"}
		}
		out := make([]float64, len(steps))
		for i := range steps {
			out[i], _ = arith(b.Op, l.scalars[i], r.scalars[i])
		}
		return value{scalar: true, scalars: out}, nil
	case l.scalar || r.scalar:
		if isSetOp(b.Op) {
			return value{}, &QueryError{fmt.Sprintf("set operator %s not allowed in binary scalar expression", b.Op)}
		}
		vs := make([][]Sample, len(steps))
		for i := range steps {
			vec, sc, scalarLeft := r.vectors, l.scalars, true
			if r.scalar {
				vec, sc, scalarLeft = l.vectors, r.scalars, false
			}
			for _, s := range vec[i] {
				x, y := s.V, sc[i]
				if scalarLeft {
					x, y = y, x
				}
				v, keep := result(b, x, y, s.V)
				if keep {
					vs[i] = append(vs[i], Sample{Labels: s.Labels, T: s.T, V: v})
				}
			}
		}
		return value{vectors: vs}, nil
	}
	vs := make([][]Sample, len(steps))
	for i := range steps {
		var err error
		if vs[i], err = vectorBinary(b, l.vectors[i], r.vectors[i]); err != nil {
			return value{}, err
		}
	}
	return value{vectors: vs}, nil
}

func isComparison(op string) bool { return slices.Contains(comparisons, op) }
func isSetOp(op string) bool      { return op == "and" || op == "or" || op == "unless" }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// arith applies op; for comparisons it gives 1/0 and whether it holds.
func arith(op string, x, y float64) (float64, bool) {
	switch op {
	case "+":
		return x + y, true
	case "-":
		return x - y, true
	case "*":
		return x * y, true
	case "/":
		return x / y, true
	case "%":
		return math.Mod(x, y), true
	case "^":
		return math.Pow(x, y), true
	case "==":
		return boolValue(x == y), x == y
	case "!=":
		return boolValue(x != y), x != y
	case ">":
		return boolValue(x > y), x > y
	case ">=":
		return boolValue(x >= y), x >= y
	case "<":
		return boolValue(x < y), x < y
	case "<=":
		return boolValue(x <= y), x <= y
	}
	return math.NaN(), false
}

// result is a sample's value after op on x and y, or keep false when a
// comparison without bool drops it (one that holds keeps the vector's
// own value, orig).
func result(b *BinaryExpr, x, y, orig float64) (float64, bool) {
	v, holds := arith(b.Op, x, y)
	switch {
	case !isComparison(b.Op):
		return v, true
	case b.ReturnBool:
		return boolValue(holds), true
	}
	return orig, holds
}

// matchKey is the labels two samples are matched on.
func matchKey(m *VectorMatching, ls Labels) string {
	if m == nil {
		return ls.String()
	}
	if m.On {
		return group(&Grouping{Labels: m.Labels}, ls).String()
	}
	return group(&Grouping{Without: true, Labels: m.Labels}, ls).String()
}

// vectorBinary matches lhs with rhs. As in Loki (pkg/logql/evaluator.go
// vectorBinop), a match that is not one-to-one and not declared by
// group_left/group_right is an error, not an answer made of whichever
// pair came last.
func vectorBinary(b *BinaryExpr, lhs, rhs []Sample) ([]Sample, error) {
	m := b.Matching
	switch b.Op {
	case "and", "unless":
		in := map[string]bool{}
		for _, s := range rhs {
			in[matchKey(m, s.Labels)] = true
		}
		var out []Sample
		for _, s := range lhs {
			if in[matchKey(m, s.Labels)] == (b.Op == "and") {
				out = append(out, s)
			}
		}
		return out, nil
	case "or":
		out := slices.Clone(lhs)
		in := map[string]bool{}
		for _, s := range lhs {
			in[matchKey(m, s.Labels)] = true
		}
		for _, s := range rhs {
			if !in[matchKey(m, s.Labels)] {
				out = append(out, s)
			}
		}
		return out, nil
	}
	one, many, manyLeft := rhs, lhs, true
	if m != nil && m.Card == "group_right" {
		one, many, manyLeft = lhs, rhs, false
	}
	byKey := map[string]Sample{}
	for _, s := range one {
		k := matchKey(m, s.Labels)
		if _, dup := byKey[k]; dup {
			side := "right"
			if !manyLeft {
				side = "left"
			}
			return nil, &EvalError{"found duplicate series on the " + side + " hand-side;many-to-many matching not allowed: matching labels must be unique on one side"}
		}
		byKey[k] = s
	}
	oneToOne := m == nil || m.Card == ""
	matched := map[string]map[string]bool{} // key → result labels made of it
	var out []Sample
	for _, s := range many {
		k := matchKey(m, s.Labels)
		o, ok := byKey[k]
		if !ok {
			continue
		}
		ls := resultLabels(b, s.Labels, o.Labels)
		key := ls.String()
		// A match counts whether or not a comparison then drops it.
		results, seen := matched[k]
		switch {
		case oneToOne && seen:
			return nil, &EvalError{"multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"}
		case !oneToOne && results[key]:
			return nil, &EvalError{"multiple matches for labels: grouping labels must ensure unique matches"}
		case !seen:
			results = map[string]bool{}
			matched[k] = results
		}
		results[key] = true
		x, y := s.V, o.V
		if !manyLeft {
			x, y = y, x
		}
		if v, keep := result(b, x, y, x); keep {
			out = append(out, Sample{Labels: ls, T: s.T, V: v})
		}
	}
	return out, nil
}

// resultLabels are the labels of a matched pair's result: the "many"
// side's, kept to the on labels or without the ignoring ones for
// one-to-one matching, a filtering comparison too (Loki
// pkg/logql/evaluator.go resultMetric does not look at the operator),
// with group_left/right's included labels from the "one" side.
func resultLabels(b *BinaryExpr, many, one Labels) Labels {
	m := b.Matching
	if m == nil {
		return many
	}
	if m.Card == "" {
		if m.On {
			return group(&Grouping{Labels: m.Labels}, many)
		}
		return group(&Grouping{Without: true, Labels: m.Labels}, many)
	}
	out := slices.Clone(many)
	for _, name := range m.Include {
		v, ok := one.Get(name)
		out = slices.DeleteFunc(out, func(l Label) bool { return l.Name == name })
		if ok && v != "" {
			out = append(out, Label{Name: name, Value: v})
		}
	}
	return out.Sort()
}

// labelReplace is Prometheus's label_replace on one sample's labels.
func labelReplace(x *LabelReplace, ls Labels) Labels {
	src, _ := ls.Get(x.Src)
	m := x.re.FindStringSubmatchIndex(src)
	if m == nil {
		return ls
	}
	v := string(x.re.ExpandString(nil, x.Replacement, src, m))
	out := slices.DeleteFunc(slices.Clone(ls), func(l Label) bool { return l.Name == x.Dst })
	if v != "" {
		out = append(out, Label{Name: x.Dst, Value: v})
	}
	return out.Sort()
}
