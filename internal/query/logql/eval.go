package logql

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Source reads log entries: those of the streams whose labels all
// Matchers match, with a time in [Start, End) (Unix ns), whose line
// passes every one of Filters, each entry once (a Source drops the
// duplicates its storage holds), in time order (Forward) or reverse, at
// most Limit of them when Limit > 0. fn is called for each; an error it
// returns stops the read and is returned.
type Source interface {
	Select(ctx context.Context, sel Selection, fn func(*Entry) error) error
}

// Selection is what a Source reads.
type Selection struct {
	Matchers   []*Matcher
	Filters    []*LineFilter
	Start, End int64
	Forward    bool
	Limit      int
}

// Params are a query's times and limits, as Loki's query and
// query_range take them.
type Params struct {
	// Start and End bound a range query (Unix ns, both included for
	// metric steps; a log query reads [Start, End)). An instant query
	// has Start == End == its time.
	Start, End int64
	Step       time.Duration
	Instant    bool
	Limit      int  // entries of a log query; 0 for none
	Forward    bool // direction of a log query
	// Categorize answers labels by category (Loki's categorize-labels
	// encoding flag): streams hold their stream labels, each entry its
	// structured metadata and parsed labels.
	Categorize bool
}

// Result is a query's answer: streams for a log query, a matrix for a
// range metric query, a vector or scalar for an instant one.
type Result struct {
	Type    string // "streams", "matrix", "vector" or "scalar"
	Streams []Stream
	Matrix  []Series
	Vector  []Sample
	Scalar  Point
	// Entries and Bytes are what the query read: entries the Source
	// gave, and their lines' bytes.
	Entries, Bytes int64
}

// Stream is a log query's stream.
type Stream struct {
	Labels  Labels
	Entries []StreamEntry
}

// StreamEntry is an entry of a stream; Metadata and Parsed are set when
// labels are categorized.
type StreamEntry struct {
	TS               int64
	Line             string
	Metadata, Parsed Labels
}

// Series is a matrix's series.
type Series struct {
	Labels Labels
	Points []Point
}

// Point is a value at a time in Unix ns.
type Point struct {
	T int64
	V float64
}

// Sample is a vector's element.
type Sample struct {
	Labels Labels
	T      int64
	V      float64
}

// Eval evaluates e over src. A log query reads [Start, End): Loki
// answers none as an instant query, and the caller refuses those.
func Eval(ctx context.Context, src Source, e Expr, p Params) (*Result, error) {
	ev := &evaluator{src: src, p: p}
	if log, ok := e.(*LogExpr); ok {
		return ev.logs(ctx, log)
	}
	if !p.Instant && p.Step <= 0 {
		return nil, &QueryError{"a range metric query needs a step greater than 0"}
	}
	// The next step is compared as End-t, not t+Step: a huge step would
	// carry t past int64, negative, below End.
	for t := p.Start; t <= p.End; t += int64(p.Step) {
		ev.steps = append(ev.steps, t)
		if p.Instant || p.End-t < int64(p.Step) {
			break
		}
	}
	v, err := ev.eval(ctx, e)
	if err != nil {
		return nil, err
	}
	res := &Result{Entries: ev.entries, Bytes: ev.bytes}
	if v.scalar {
		if p.Instant {
			res.Type, res.Scalar = "scalar", Point{T: ev.steps[0], V: v.scalars[0]}
			return res, nil
		}
		res.Type = "matrix"
		s := Series{Labels: Labels{}}
		for i, t := range ev.steps {
			s.Points = append(s.Points, Point{T: t, V: v.scalars[i]})
		}
		res.Matrix = []Series{s}
		return res, nil
	}
	if p.Instant {
		res.Type, res.Vector = "vector", v.vectors[0]
		if res.Vector == nil {
			res.Vector = []Sample{}
		}
		return res, nil
	}
	res.Type, res.Matrix = "matrix", toMatrix(v.vectors)
	return res, nil
}

// QueryError is a query that cannot be answered for the caller's
// reasons (a pipeline error, a bad parameter): 400, as Loki answers it.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return e.Msg }

// EvalError is a query that fails while it is evaluated, such as a
// vector match that is not one-to-one without group_left/group_right.
// Loki returns these as plain errors, which its API answers with 500
// and the message (pkg/util/server/error.go ClientHTTPStatusAndError),
// though they are the query's fault, not the server's.
type EvalError struct{ Msg string }

func (e *EvalError) Error() string { return e.Msg }

type evaluator struct {
	src            Source
	p              Params
	steps          []int64
	entries, bytes int64
}

// errLimit stops a read at a log query's limit.
var errLimit = errors.New("limit reached")

func (ev *evaluator) logs(ctx context.Context, log *LogExpr) (*Result, error) {
	filters, rest := pushable(log.Stages)
	sel := Selection{Matchers: log.Matchers, Filters: filters, Start: ev.p.Start, End: ev.p.End, Forward: ev.p.Forward}
	if !dropsEntries(rest) {
		sel.Limit = ev.p.Limit
	}
	pl := &pipeline{stages: rest}
	var streams ByLabels[Stream]
	n := 0
	err := ev.src.Select(ctx, sel, func(e *Entry) error {
		ev.entries++
		ev.bytes += int64(len(e.Line))
		line, ok := pl.process(e)
		if !ok {
			return nil
		}
		ls := pl.b.labels()
		key := ls
		se := StreamEntry{TS: e.TS, Line: line}
		if ev.p.Categorize {
			key = ls.Only(CatStream)
			se.Metadata, se.Parsed = ls.Only(CatMetadata), ls.Only(CatParsed)
		}
		s := streams.At(key, func() *Stream { return &Stream{Labels: key} })
		s.Entries = append(s.Entries, se)
		n++
		if ev.p.Limit > 0 && n >= ev.p.Limit {
			return errLimit
		}
		return nil
	})
	if err != nil && !errors.Is(err, errLimit) {
		return nil, err
	}
	res := &Result{Type: "streams", Streams: []Stream{}, Entries: ev.entries, Bytes: ev.bytes}
	for _, s := range streams.Sorted() {
		res.Streams = append(res.Streams, *s)
	}
	return res, nil
}

// value is an expression's value at every step: scalars, or a vector
// per step.
type value struct {
	scalar  bool
	scalars []float64
	vectors [][]Sample
}

func (ev *evaluator) eval(ctx context.Context, e Expr) (value, error) {
	switch x := e.(type) {
	case *Literal:
		s := make([]float64, len(ev.steps))
		for i := range s {
			s[i] = x.Val
		}
		return value{scalar: true, scalars: s}, nil
	case *VectorLit:
		vs := make([][]Sample, len(ev.steps))
		for i, t := range ev.steps {
			vs[i] = []Sample{{Labels: Labels{}, T: t, V: x.Val}}
		}
		return value{vectors: vs}, nil
	case *RangeAggr:
		return ev.rangeAggr(ctx, x, nil)
	case *VectorAggr:
		var inner value
		var err error
		if r, ok := x.Inner.(*RangeAggr); ok && x.Op == "sum" {
			// Loki evaluates a range aggregation under a sum with the
			// sum's grouping at hand (pkg/logql/evaluator.go
			// NewStepEvaluator sends the sum as the selector), which its
			// parser hints read: a sum without labels is by ().
			outer := x.Grouping
			if outer == nil {
				outer = &Grouping{}
			}
			inner, err = ev.rangeAggr(ctx, r, outer)
		} else {
			inner, err = ev.eval(ctx, x.Inner)
		}
		if err != nil {
			return value{}, err
		}
		if inner.scalar {
			return value{}, &QueryError{fmt.Sprintf("%s takes a vector, got a scalar", x.Op)}
		}
		for i := range inner.vectors {
			inner.vectors[i] = aggregate(x, inner.vectors[i])
		}
		return inner, nil
	case *BinaryExpr:
		l, err := ev.eval(ctx, x.LHS)
		if err != nil {
			return value{}, err
		}
		r, err := ev.eval(ctx, x.RHS)
		if err != nil {
			return value{}, err
		}
		return binary(x, l, r, ev.steps)
	case *LabelReplace:
		inner, err := ev.eval(ctx, x.Inner)
		if err != nil {
			return value{}, err
		}
		if inner.scalar {
			return value{}, &QueryError{"label_replace takes a vector, got a scalar"}
		}
		for _, v := range inner.vectors {
			for i := range v {
				v[i].Labels = labelReplace(x, v[i].Labels)
			}
		}
		return inner, nil
	case *LogExpr:
		return value{}, &QueryError{"a log query cannot be used as a metric"}
	}
	return value{}, fmt.Errorf("BUG: unknown expression %T", e)
}

// rangeAggr reads the entries every step's range covers, once, into
// series of samples, and applies the function over each step's window
// (t-offset-range, t-offset] (Loki pkg/logql/range_vector.go: the lower
// bound is excluded).
func (ev *evaluator) rangeAggr(ctx context.Context, r *RangeAggr, outer *Grouping) (value, error) {
	first, last := ev.steps[0], ev.steps[len(ev.steps)-1]
	filters, rest := pushable(r.Log.Stages)
	sel := Selection{Matchers: r.Log.Matchers, Filters: filters, Forward: true,
		Start: first - int64(r.Offset) - int64(r.Range) + 1, End: last - int64(r.Offset) + 1}
	pl := &pipeline{stages: rest, unwrap: r.Unwrap, keepUnwrapped: r.Grouping != nil && !r.Grouping.Without, hints: hintsOf(r, outer)}
	if w, ok := ev.buckets(r); ok {
		return ev.rangeAggrBucketed(ctx, r, sel, pl, w)
	}
	var all ByLabels[Series]
	err := ev.src.Select(ctx, sel, func(e *Entry) error {
		v, ls, ok, err := ev.sampleOf(r, pl, e)
		if err != nil && !ev.inWindow(r, e.TS) {
			// A step longer than the range leaves entries between the
			// windows: in no sample, their errors fail nothing (Loki
			// pkg/logql/evaluator.go RangeVectorEvaluator.Next looks at
			// each step's samples).
			return nil
		}
		if !ok || err != nil {
			return err
		}
		s := all.At(ls, func() *Series { return &Series{Labels: ls} })
		s.Points = append(s.Points, Point{T: e.TS, V: v})
		return nil
	})
	if err != nil {
		return value{}, err
	}
	series := all.Sorted()
	vs := make([][]Sample, len(ev.steps))
	for i, t := range ev.steps {
		hi := t - int64(r.Offset)
		lo := hi - int64(r.Range)
		for _, s := range series {
			from, _ := slices.BinarySearchFunc(s.Points, lo+1, func(p Point, t int64) int { return cmp.Compare(p.T, t) })
			to, _ := slices.BinarySearchFunc(s.Points, hi+1, func(p Point, t int64) int { return cmp.Compare(p.T, t) })
			if from == to {
				continue
			}
			vs[i] = append(vs[i], Sample{Labels: s.Labels, T: t, V: rangeFunc(r, s.Points[from:to], hi)})
		}
	}
	return ev.absent(r, vs), nil
}

// inWindow says whether ts is in a step's window of r: (t-offset-range,
// t-offset] for some step t.
func (ev *evaluator) inWindow(r *RangeAggr, ts int64) bool {
	first := ev.steps[0]
	at := ts + int64(r.Offset) // the entry's time as a step's
	i := 0                     // the first step at or after at
	if at > first && len(ev.steps) > 1 {
		step := ev.steps[1] - first
		i = int((at - first + step - 1) / step)
	}
	return i < len(ev.steps) && at <= ev.steps[i] && ev.steps[i]-int64(r.Range) < at
}

// absent is vs as absent_over_time answers it: a sample of the matchers'
// labels at each step without any, none at the others. Other aggregations'
// vs are as they are.
func (ev *evaluator) absent(r *RangeAggr, vs [][]Sample) value {
	if r.Op == "absent_over_time" {
		for i, t := range ev.steps {
			if len(vs[i]) == 0 {
				vs[i] = []Sample{{Labels: absentLabels(r.Log.Matchers), T: t, V: 1}}
			} else {
				vs[i] = nil
			}
		}
	}
	return value{vectors: vs}
}

// sampleOf is entry e's sample in range aggregation r (ok false for an
// entry the pipeline drops) and the labels of its series.
func (ev *evaluator) sampleOf(r *RangeAggr, pl *pipeline, e *Entry) (float64, Labels, bool, error) {
	ev.entries++
	ev.bytes += int64(len(e.Line))
	v, ok := pl.sample(e, r.Op)
	if !ok {
		return 0, nil, false, nil
	}
	ls := metricLabels(pl.b.ls)
	// The error is looked for before grouping, which could drop it: Loki
	// keeps every label of an entry with an error
	// (pkg/logql/log/labels.go LabelsBuilder.GroupedLabels), so by (…)
	// does not hide a failed conversion.
	if errKind, bad := ls.Get(ErrorLabel); bad && !pl.b.preserved {
		return 0, nil, false, &QueryError{fmt.Sprintf("pipeline error: '%s' for series: '%s'. Use a label filter to intentionally skip this error. (e.g | __error__!=\"%s\"). To skip all potential errors you can match empty errors.(e.g __error__=\"\") The label filter can also be specified after unwrap. (e.g | unwrap latency | __error__=\"\" )", errKind, ls, errKind)}
	}
	if r.Grouping != nil {
		ls = group(r.Grouping, ls)
	}
	return v, ls, true, nil
}

// bucketing is on but in the tests that compare it with the entries' path.
var bucketing = true

// buckets says whether r can be evaluated by rangeAggrBucketed and with
// buckets of how many ns: an aggregation whose windows' values are sums
// of integers (entries counted, bytes; Grafana's log volume is
// count_over_time), over steps the range is a whole number of.
func (ev *evaluator) buckets(r *RangeAggr) (width int64, ok bool) {
	switch r.Op {
	case "count_over_time", "absent_over_time", "rate", "bytes_over_time", "bytes_rate":
	default:
		return 0, false
	}
	if !bucketing || r.Unwrap != nil || r.Range <= 0 {
		return 0, false
	}
	// A bucket's index is counted from the first window's lower bound:
	// the last window's upper bound must be within int64 of it.
	if ev.steps[len(ev.steps)-1]-ev.steps[0] > math.MaxInt64-int64(r.Range) {
		return 0, false
	}
	if len(ev.steps) == 1 {
		return int64(r.Range), true
	}
	step := ev.steps[1] - ev.steps[0]
	return step, int64(r.Range)%step == 0
}

// bucket is the entries of one series in bucket k: how many, and the sum
// of their samples.
type bucket struct {
	k    int64
	n, v float64
}

// rangeAggrBucketed is rangeAggr for the aggregations buckets allows,
// holding per series a count and a sum per bucket of width ns that has
// entries, instead of every entry: bucket k holds (lo+k·width,
// lo+(k+1)·width], lo the first window's excluded lower bound, so each
// step's window is a run of range/width buckets. A series holds no more
// buckets than entries, nor than steps and range allow. Its answers are
// rangeAggr's.
func (ev *evaluator) rangeAggrBucketed(ctx context.Context, r *RangeAggr, sel Selection, pl *pipeline, width int64) (value, error) {
	lo := sel.Start - 1
	type bucketed struct {
		labels  Labels
		buckets []bucket // by k
	}
	var all ByLabels[bucketed]
	err := ev.src.Select(ctx, sel, func(e *Entry) error {
		v, ls, ok, err := ev.sampleOf(r, pl, e)
		if !ok || err != nil || e.TS <= lo || e.TS >= sel.End {
			return err
		}
		k := (e.TS - lo - 1) / width
		s := all.At(ls, func() *bucketed { return &bucketed{labels: ls} })
		// Entries come in time order: the last bucket, or a new one.
		i := len(s.buckets) - 1
		switch {
		case i < 0 || s.buckets[i].k < k:
			s.buckets = append(s.buckets, bucket{k: k})
			i++
		case s.buckets[i].k > k:
			var found bool
			if i, found = slices.BinarySearchFunc(s.buckets, k, func(b bucket, k int64) int { return cmp.Compare(b.k, k) }); !found {
				s.buckets = slices.Insert(s.buckets, i, bucket{k: k})
			}
		}
		s.buckets[i].n++
		s.buckets[i].v += v
		return nil
	})
	if err != nil {
		return value{}, err
	}
	span := int64(r.Range) / width // buckets per window
	secs := r.Range.Seconds()
	vs := make([][]Sample, len(ev.steps))
	for _, s := range all.Sorted() {
		var win bucket
		in, out := 0, 0 // the window is s.buckets[out:in]
		for i, t := range ev.steps {
			for ; in < len(s.buckets) && s.buckets[in].k < int64(i)+span; in++ {
				win.n += s.buckets[in].n
				win.v += s.buckets[in].v
			}
			for ; out < in && s.buckets[out].k < int64(i); out++ {
				win.n -= s.buckets[out].n
				win.v -= s.buckets[out].v
			}
			if win.n == 0 {
				continue
			}
			var v float64
			switch r.Op {
			case "count_over_time", "absent_over_time":
				v = win.n
			case "rate":
				v = win.n / secs
			case "bytes_over_time":
				v = win.v
			case "bytes_rate":
				v = win.v / secs
			}
			vs[i] = append(vs[i], Sample{Labels: s.labels, T: t, V: v})
		}
	}
	return ev.absent(r, vs), nil
}

// metricLabels are an entry's labels as a series' (sorted, no category).
func metricLabels(ls Labels) Labels {
	out := make(Labels, len(ls))
	for i, l := range ls {
		out[i] = Label{Name: l.Name, Value: l.Value}
	}
	return out.Sort()
}

// absentLabels are the equality matchers' labels, what absent_over_time
// answers (Prometheus's absent), but none of a name two matchers name
// (Loki pkg/logql/evaluator.go absentLabels).
func absentLabels(ms []*Matcher) Labels {
	named := map[string]int{}
	for _, m := range ms {
		named[m.Name]++
	}
	ls := Labels{}
	for _, m := range ms {
		if m.Op == MatchEq && named[m.Name] == 1 {
			ls = append(ls, Label{Name: m.Name, Value: m.Value})
		}
	}
	return ls.Sort()
}

// toMatrix turns a vector per step into series, sorted by labels.
func toMatrix(vs [][]Sample) []Series {
	var all ByLabels[Series]
	for _, v := range vs {
		for _, s := range v {
			se := all.At(s.Labels, func() *Series { return &Series{Labels: s.Labels} })
			se.Points = append(se.Points, Point{T: s.T, V: s.V})
		}
	}
	out := []Series{}
	for _, s := range all.Sorted() {
		out = append(out, *s)
	}
	return out
}
