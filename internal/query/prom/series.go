package prom

import (
	"cmp"
	"slices"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

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
	if n := len(s.pts); n > 0 && t <= s.pts[n-1].T {
		return
	}
	s.pts = append(s.pts, promql.FPoint{T: t, F: v})
}

// merge adds o's samples to s's, keeping one per timestamp (s's).
func (s *floatSeries) merge(o *floatSeries) {
	all := append(s.pts, o.pts...)
	slices.SortStableFunc(all, func(a, b promql.FPoint) int { return cmp.Compare(a.T, b.T) })
	s.pts = slices.CompactFunc(all, func(a, b promql.FPoint) bool { return a.T == b.T })
}

func (s *floatSeries) Labels() labels.Labels { return s.lset }

// Iterator implements storage.Series with the engine's own iterator over
// a slice of samples: Prometheus's list iterator
// (storage.NewListSeriesIterator) reaches each sample through two
// interface calls, and the engine reads every step's window of every
// series.
func (s *floatSeries) Iterator(it chunkenc.Iterator) chunkenc.Iterator {
	return promql.NewStorageSeries(promql.Series{Floats: s.pts}).Iterator(it)
}

// points are a series's samples.
type points []promql.FPoint

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
