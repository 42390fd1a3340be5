package loki

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// stream is a stream of the metadata routes, with what it holds in the
// range asked.
type stream struct {
	labels         logql.Labels
	entries, bytes int64
	bucket         int64 // the step it falls in, for volume_range
}

// streams reads the streams the matchers select in [start, end), each
// once; every metadata route answers from them, so a tenant learns only
// the labels and values of its own records.
func (a *api) streams(ctx context.Context, scope tenancy.Scope, ms []*logql.Matcher, start, end, step int64) ([]stream, error) {
	var args sqlArgs
	q := streamsSQL(a.o.Table, ms, start, end, step, &args)
	rr, err := a.o.Reader.Query(ctx, scope, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read the streams of %s: %w", a.o.Table, err)
	}
	defer rr.Release()
	res := resources{}
	var all logql.ByLabels[stream]
	for rr.Next() {
		rec := rr.RecordBatch()
		service, err1 := textColumn(rec.Column(0))
		resource, err2 := textColumn(rec.Column(1))
		number, err3 := intColumn(rec.Column(2))
		text, err4 := textColumn(rec.Column(3))
		entries, err5 := intColumn(rec.Column(4))
		bytes, err6 := intColumn(rec.Column(5))
		bucket, err7 := intColumn(rec.Column(6))
		for _, err := range []error{err1, err2, err3, err4, err5, err6, err7} {
			if err != nil {
				return nil, err
			}
		}
		for i := range int(rec.NumRows()) {
			// Copies: Arrow's strings point into buffers the next batch reuses.
			ls := res.get(strings.Clone(resource.Value(i))).labels(strings.Clone(service.Value(i)), int32(number(i)), strings.Clone(text.Value(i)))
			b := bucket(i)
			key := append(slices.Clone(ls), logql.Label{Name: "__bucket__", Value: strconv.FormatInt(b, 10)})
			s := all.At(key, func() *stream { return &stream{labels: ls, bucket: b} })
			s.entries += entries(i)
			s.bytes += bytes(i)
		}
	}
	if err := rr.Err(); err != nil {
		return nil, fmt.Errorf("read the streams of %s: %w", a.o.Table, err)
	}
	var out []stream
	for _, s := range all.Sorted() {
		out = append(out, *s)
	}
	return out, nil
}

// selector reads a stream selector parameter (a log query's selector
// is taken, its pipeline ignored, as Loki's metadata routes do); none
// selects every stream.
func selector(q string) ([]*logql.Matcher, error) {
	if q == "" {
		return nil, nil
	}
	e, err := logql.Parse(q)
	if err != nil {
		return nil, err
	}
	log, ok := e.(*logql.LogExpr)
	if !ok {
		return nil, badParam("a stream selector is required, got a metric query")
	}
	return log.Matchers, nil
}

// metaRange reads the range and selector of a metadata request.
func (a *api) metaRange(r *http.Request, param string) ([][]*logql.Matcher, int64, int64, error) {
	start, end, err := bounds(r, a.now())
	if err != nil {
		return nil, 0, 0, err
	}
	var sels [][]*logql.Matcher
	for _, q := range r.Form[param] {
		ms, err := selector(q)
		if err != nil {
			return nil, 0, 0, err
		}
		sels = append(sels, ms)
	}
	if len(sels) == 0 {
		sels = [][]*logql.Matcher{nil}
	}
	// Loki's metadata ranges include their end.
	return sels, start.UnixNano(), end.UnixNano() + 1, nil
}

// metaStreams does what every metadata route does first: it reads the
// form, the range and the selectors of param, and the streams they
// select; ok false when it answered an error.
func (a *api) metaStreams(w http.ResponseWriter, r *http.Request, scope tenancy.Scope, param string) (ss []stream, sels [][]*logql.Matcher, end int64, ok bool) {
	ss, sels, _, end, ok = a.metaStreamsBy(w, r, scope, param, false)
	return ss, sels, end, ok
}

// metaStreamsBy is metaStreams, by bucket of the step parameter when
// stepped (volume_range), with the range's start.
func (a *api) metaStreamsBy(w http.ResponseWriter, r *http.Request, scope tenancy.Scope, param string, stepped bool) (ss []stream, sels [][]*logql.Matcher, start, end int64, ok bool) {
	if !a.form(w, r) {
		return nil, nil, 0, 0, false
	}
	if param == "match[]" && len(r.Form[param]) == 0 {
		param = "match"
	}
	sels, start, end, err := a.metaRange(r, param)
	var step time.Duration
	if err == nil && stepped {
		step, err = volumeStep(r, start, end)
	}
	if err == nil {
		ss, err = a.streamsOf(r.Context(), scope, sels, start, end, int64(step))
	}
	if err != nil {
		a.fail(w, r, err)
		return nil, nil, 0, 0, false
	}
	return ss, sels, start, end, true
}

// streamsOf reads the streams of every selector, each stream once.
func (a *api) streamsOf(ctx context.Context, scope tenancy.Scope, sels [][]*logql.Matcher, start, end, step int64) ([]stream, error) {
	var all []stream
	seen := map[string]bool{}
	for _, ms := range sels {
		ss, err := a.streams(ctx, scope, ms, start, end, step)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			if k := s.labels.String() + strconv.FormatInt(s.bucket, 10); !seen[k] {
				seen[k] = true
				all = append(all, s)
			}
		}
	}
	return all, nil
}

// labels answers /loki/api/v1/labels: the names of the stream labels in
// the range.
func (a *api) labels(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	names := map[string]bool{}
	for _, s := range ss {
		for _, l := range s.labels {
			names[l.Name] = true
		}
	}
	writeJSON(w, stringsBody(names))
}

// labelValues answers /loki/api/v1/label/{name}/values.
func (a *api) labelValues(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	name := r.PathValue("name")
	values := map[string]bool{}
	for _, s := range ss {
		if v, ok := s.labels.Get(name); ok {
			values[v] = true
		}
	}
	writeJSON(w, stringsBody(values))
}

func stringsBody(set map[string]bool) []byte {
	names := slices.Sorted(maps.Keys(set))
	b := []byte(`{"status":"success","data":`)
	b = appendArray(b, len(names), func(b []byte, i int) []byte { return appendString(b, names[i]) })
	return append(b, '}')
}

// series answers /loki/api/v1/series: the streams match[] selects.
func (a *api) series(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "match[]")
	if !ok {
		return
	}
	b := []byte(`{"status":"success","data":`)
	b = appendArray(b, len(ss), func(b []byte, i int) []byte { return appendLabels(b, ss[i].labels) })
	writeJSON(w, append(b, '}'))
}

// indexStats answers /loki/api/v1/index/stats (Loki
// pkg/logproto/indexgateway.proto IndexStatsResponse): streams, chunks,
// bytes and entries of what the selector selects. There are no chunks
// here: each stream counts as one, the smallest Loki could hold.
func (a *api) indexStats(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ss, _, _, ok := a.metaStreams(w, r, scope, "query")
	if !ok {
		return
	}
	var entries, bytes int64
	for _, s := range ss {
		entries += s.entries
		bytes += s.bytes
	}
	writeJSON(w, fmt.Appendf(nil, `{"streams":%d,"chunks":%d,"bytes":%d,"entries":%d}`, len(ss), len(ss), bytes, entries))
}

// indexVolume answers /loki/api/v1/index/volume (Loki
// pkg/querier/http.go VolumeHandler, pkg/storage/stores/index/seriesvolume):
// the bytes of the selected streams, as a vector at the range's end.
func (a *api) indexVolume(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	a.volume(w, r, scope, false)
}

// indexVolumeRange answers /loki/api/v1/index/volume_range: the same by
// step, each step's bytes at the step's end, the last step ending at the
// range's end (Loki pkg/querier/queryrange/volume.go); a matrix when a
// series has several steps.
func (a *api) indexVolumeRange(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	a.volume(w, r, scope, true)
}

// volume sums bytes by the labels the selector names (or targetLabels)
// with aggregateBy=series, the default; by label name (each series
// {name=""}) with aggregateBy=labels; largest first, at most limit
// series.
func (a *api) volume(w http.ResponseWriter, r *http.Request, scope tenancy.Scope, stepped bool) {
	ss, sels, start, end, ok := a.metaStreamsBy(w, r, scope, "query", stepped)
	if !ok {
		return
	}
	byLabels := false
	switch by := r.Form.Get("aggregateBy"); by {
	case "", "series":
	case "labels":
		byLabels = true
	default:
		a.fail(w, r, badParam("invalid aggregateBy %q: series or labels", by))
		return
	}
	limit, err := parseLimit(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var names []string
	if t := r.Form.Get("targetLabels"); t != "" {
		names = strings.Split(t, ",")
	} else if !byLabels {
		for _, ms := range sels {
			for _, m := range ms {
				names = append(names, m.Name)
			}
		}
	}
	step, _ := volumeStep(r, start, end)
	var groups logql.ByLabels[logql.Series]
	add := func(ls logql.Labels, s stream) {
		t := end - 1
		if stepped {
			t = min(start+(s.bucket+1)*int64(step), end-1)
		}
		g := groups.At(ls, func() *logql.Series { return &logql.Series{Labels: ls} })
		if n := len(g.Points); n > 0 && g.Points[n-1].T == t {
			g.Points[n-1].V += float64(s.bytes)
			return
		}
		g.Points = append(g.Points, logql.Point{T: t, V: float64(s.bytes)})
	}
	slices.SortStableFunc(ss, func(x, y stream) int { return cmp.Compare(x.bucket, y.bucket) })
	for _, s := range ss {
		if byLabels {
			for _, l := range s.labels {
				if len(names) == 0 || slices.Contains(names, l.Name) {
					add(logql.Labels{{Name: l.Name}}, s)
				}
			}
			continue
		}
		var ls logql.Labels
		for _, l := range s.labels {
			if slices.Contains(names, l.Name) {
				ls = append(ls, l)
			}
		}
		add(ls, s)
	}
	series := groups.Sorted()
	slices.SortStableFunc(series, func(x, y *logql.Series) int { return cmp.Compare(y.Points[0].V, x.Points[0].V) })
	if len(series) > limit {
		series = series[:limit]
	}
	matrix := false
	for _, s := range series {
		matrix = matrix || len(s.Points) > 1
	}
	res := &logql.Result{Type: "vector", Vector: []logql.Sample{}}
	if matrix {
		res.Type = "matrix"
		for _, s := range series {
			res.Matrix = append(res.Matrix, *s)
		}
	} else {
		for _, s := range series {
			res.Vector = append(res.Vector, logql.Sample{Labels: s.Labels, T: s.Points[0].T, V: s.Points[0].V})
		}
	}
	b := []byte(`{"status":"success","data":{"resultType":"` + res.Type + `","result":`)
	if matrix {
		b = appendMatrix(b, res.Matrix)
	} else {
		b = appendVector(b, res.Vector)
	}
	writeJSON(w, append(b, "}}"...))
}

// volumeStep is volume_range's step (a duration or seconds; by default
// as query_range's).
func volumeStep(r *http.Request, start, end int64) (time.Duration, error) {
	if v := r.Form.Get("step"); v != "" {
		d, err := parseSecondsOrDuration(v)
		if err == nil && d <= 0 {
			err = badParam("zero or negative query resolution step widths are not accepted. Try a positive integer")
		}
		return d, err
	}
	return time.Duration(max(math.Floor(time.Duration(end-start).Seconds()/250), 1)) * time.Second, nil
}
