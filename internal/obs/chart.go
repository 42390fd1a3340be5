package obs

import (
	"fmt"
	"html/template"
	"math"
	"strings"
	"time"
)

// point is one value of a chart series at a time.
type point struct {
	at time.Time
	v  float64
}

type series struct {
	name, color string
	points      []point
}

// rates turns cumulative counts into per-second rates between samples.
func rates(samples []Sample, count func(Sample) int64) []point {
	var out []point
	for i := 1; i < len(samples); i++ {
		dt := samples[i].At.Sub(samples[i-1].At).Seconds()
		if dt <= 0 {
			continue
		}
		out = append(out, point{samples[i].At, float64(count(samples[i])-count(samples[i-1])) / dt})
	}
	return out
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 640, 170
	padL, padR     = 64, 10
	padT, padB     = 10, 22
)

// svgChart draws series over the last History up to now as inline SVG. It
// builds the markup from numbers and fixed labels only, so nothing in it
// needs escaping.
func svgChart(now time.Time, unit string, ss ...series) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" class="chart">`, chartW, chartH)
	top := 0.0
	for _, s := range ss {
		for _, p := range s.points {
			top = max(top, p.v)
		}
	}
	top = NiceCeil(top)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	x := func(t time.Time) float64 {
		return padL + plotW*(1-now.Sub(t).Seconds()/History.Seconds())
	}
	y := func(v float64) float64 { return padT + plotH*(1-v/top) }

	for i := 0; i <= 2; i++ {
		v := top * float64(i) / 2
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/>`, padL, chartW-padR, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="ylabel">%s%s</text>`, padL-6, y(v)+4, Short(v), unit)
	}
	for m := 15; m >= 0; m -= 5 {
		label := fmt.Sprintf("−%dm", m)
		if m == 0 {
			label = "now"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="xlabel">%s</text>`, x(now.Add(-time.Duration(m)*time.Minute)), chartH-6, label)
	}
	empty := true
	for i, s := range ss {
		var pts strings.Builder
		for _, p := range s.points {
			if now.Sub(p.at) > History {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(p.at), y(p.v))
			empty = false
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`, strings.TrimSpace(pts.String()), s.color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s" class="legend">%s</text>`, padL+8+i*110, padT+12, s.color, s.name)
	}
	if empty {
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="nodata">no data yet</text>`, chartW/2, chartH/2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // #nosec: built from numbers and constants above
}

// NiceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v ≤ 0):
// a chart's top.
func NiceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// Short renders v compactly: 950, 12k, 3.5M.
func Short(v float64) string {
	switch {
	case v >= 1e9:
		return trimZero(v/1e9) + "G"
	case v >= 1e6:
		return trimZero(v/1e6) + "M"
	case v >= 1e3:
		return trimZero(v/1e3) + "k"
	}
	return trimZero(v)
}

func trimZero(v float64) string {
	s := fmt.Sprintf("%.1f", v)
	return strings.TrimSuffix(s, ".0")
}
