package loki

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/query/logql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

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
	ss, sels, start, end, ok := a.metaStreamsBy(w, r, scope, "query", stepped, true)
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
	step = volumeInterval(step)
	// Each step's sample is at its end less a millisecond (ForInterval's
	// SplitGap between steps), the last step's and an instant volume's at
	// the end rounded up to the millisecond (Loki
	// pkg/querier/queryrange/volume.go NewVolumeMiddleware: reqs[end]);
	// end is past the range's, which metaRange made inclusive.
	through := volumeThrough(end - 1)
	var groups logql.ByLabels[logql.Series]
	add := func(ls logql.Labels, s stream) {
		t := through
		if stepped && step > 0 {
			if e := volumeOrigin(start, int64(step)) + (s.bucket+1)*int64(step); e < through {
				t = e - int64(time.Millisecond)
			}
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

// volumeInterval is step as Loki's volume middleware splits by it, to
// the millisecond (pkg/querier/queryrange/codec.go: VolumeRequest.Step
// is step.Milliseconds()); 0, under a millisecond, is one step over the
// whole range (ForInterval with no interval).
func volumeInterval(step time.Duration) time.Duration { return step.Truncate(time.Millisecond) }

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
