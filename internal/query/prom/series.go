package prom

import (
	"cmp"
	"slices"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// floatSeries is one Prometheus series read from the table: its labels
// and its float samples, in strictly increasing time.
type floatSeries struct {
	lset labels.Labels
	pts  points
}

// add appends a sample at t (ms); one at or before the last (two points
// within the same millisecond, the table keeping microseconds) is
// dropped, since a series holds one sample per timestamp.
func (s *floatSeries) add(t int64, v float64) {
	if n := len(s.pts); n > 0 && t <= s.pts[n-1].t {
		return
	}
	s.pts = append(s.pts, point{t, v})
}

// merge adds o's samples to s's, keeping one per timestamp (s's).
func (s *floatSeries) merge(o *floatSeries) {
	all := append(s.pts, o.pts...)
	slices.SortStableFunc(all, func(a, b point) int { return cmp.Compare(a.t, b.t) })
	s.pts = slices.CompactFunc(all, func(a, b point) bool { return a.t == b.t })
}

func (s *floatSeries) Labels() labels.Labels { return s.lset }

// Iterator implements storage.Series with Prometheus's own iterator over
// a list of samples (binary search on Seek).
func (s *floatSeries) Iterator(chunkenc.Iterator) chunkenc.Iterator {
	return storage.NewListSeriesIterator(s.pts)
}

// point is a float sample (chunks.Sample); its methods take a pointer so
// that handing one out (points.Get) allocates nothing.
type point struct {
	t int64
	v float64
}

func (p *point) T() int64                      { return p.t }
func (p *point) ST() int64                     { return 0 } // no start timestamp: off in the engine
func (p *point) F() float64                    { return p.v }
func (p *point) H() *histogram.Histogram       { return nil }
func (p *point) FH() *histogram.FloatHistogram { return nil }
func (p *point) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (p *point) Copy() chunks.Sample           { c := *p; return &c }

// points are a series's samples (storage.Samples).
type points []point

func (ps points) Get(i int) chunks.Sample { return &ps[i] }
func (ps points) Len() int                { return len(ps) }

// seriesSet serves series from a slice (storage.SeriesSet).
type seriesSet struct {
	series []*floatSeries
	i      int
}

func newSeriesSet(series []*floatSeries) storage.SeriesSet { return &seriesSet{series: series, i: -1} }

func (s *seriesSet) Next() bool {
	s.i++
	return s.i < len(s.series)
}

func (s *seriesSet) At() storage.Series                { return s.series[s.i] }
func (s *seriesSet) Err() error                        { return nil }
func (s *seriesSet) Warnings() annotations.Annotations { return nil }
