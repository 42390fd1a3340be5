package report

import (
	"fmt"
	"html/template"
	"io"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/obs"
)

// WriteHTML writes the page.
func (r *Report) WriteHTML(w io.Writer) error {
	models := chartModels(r.Models)
	data := struct {
		*Report
		Window                              string
		CostChart, TokenChart, LatencyChart template.HTML
		ErrorChart                          template.HTML
	}{
		Report:       r,
		Window:       window(r.Since),
		CostChart:    r.byDayChart("cost", models, func(d ModelDay) float64 { return d.CostUSD }, dollarsShort),
		TokenChart:   r.byDayChart("tokens", models, func(d ModelDay) float64 { return float64(d.Tokens) }, obs.Short),
		LatencyChart: latencyChart(r.ByOperation),
		ErrorChart:   errorChart(r.ByOperation),
	}
	return page.Execute(w, data)
}

func window(since time.Duration) string {
	if since <= 0 {
		return "all time"
	}
	if since%(24*time.Hour) == 0 {
		return fmt.Sprintf("last %d days", since/(24*time.Hour))
	}
	return "last " + since.String()
}

// maxChartModels is how many models the charts tell apart; the others are
// drawn together as "other" (the tables list them all).
const maxChartModels = 8

var palette = []string{"#2f6fdf", "#17803d", "#b45309", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777", "#64748b"}

// chartModels are the models the charts draw, by cost; the rest are other.
func chartModels(ms []ModelUsage) []string {
	var out []string
	for i, m := range ms {
		if i == maxChartModels {
			return append(out, "other")
		}
		out = append(out, m.Model)
	}
	return out
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 640, 220
	padL, padR     = 70, 10
	padT, padB     = 10, 40
)

// byDayChart stacks each model's value per day.
func (r *Report) byDayChart(name string, models []string, value func(ModelDay) float64, label func(float64) string) template.HTML {
	series := map[string]map[string]float64{} // model → day → value
	for _, d := range r.ByDay {
		m := d.Model
		if !contains(models, m) {
			m = "other"
		}
		if v := value(d); v > 0 {
			if series[m] == nil {
				series[m] = map[string]float64{}
			}
			series[m][d.Day] += v
		}
	}
	top := 0.0
	for _, day := range r.Days {
		sum := 0.0
		for _, s := range series {
			sum += s[day]
		}
		top = max(top, sum)
	}
	var b strings.Builder
	c := newChart(&b, name, obs.NiceCeil(top), label)
	slot := float64(chartW-padL-padR) / float64(max(len(r.Days), 1))
	barW := slot * 0.7
	base := make([]float64, len(r.Days))
	for i, m := range models {
		if series[m] == nil {
			continue
		}
		fmt.Fprintf(&b, `<g class="series" data-series="%s" fill="%s">`, template.HTMLEscapeString(m), palette[i%len(palette)])
		for j, day := range r.Days {
			v := series[m][day]
			if v <= 0 {
				continue
			}
			y0, y1 := c.y(base[j]), c.y(base[j]+v)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %s</title></rect>`,
				padL+float64(j)*slot+(slot-barW)/2, y1, barW, y0-y1, template.HTMLEscapeString(m), day, label(v))
			base[j] += v
		}
		b.WriteString(`</g>`)
	}
	for j, day := range r.Days {
		if len(r.Days) <= 14 || j%(len(r.Days)/7+1) == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="xlabel">%s</text>`, padL+(float64(j)+0.5)*slot, chartH-padB+16, day[5:])
		}
	}
	c.end(legend(models, series))
	return template.HTML(b.String())
}

func legend(models []string, series map[string]map[string]float64) string {
	var b strings.Builder
	b.WriteString(`<div class="legend">`)
	for i, m := range models {
		if series[m] != nil {
			fmt.Fprintf(&b, `<span><i style="background:%s"></i>%s</span>`, palette[i%len(palette)], template.HTMLEscapeString(m))
		}
	}
	b.WriteString(`</div>`)
	return b.String()
}

// latencyChart draws p50, p90 and p99 of each operation side by side.
func latencyChart(ops []OperationStats) template.HTML {
	top := 0.0
	for _, o := range ops {
		top = max(top, o.P99)
	}
	var b strings.Builder
	c := newChart(&b, "latency", obs.NiceCeil(top), func(v float64) string { return obs.Short(v) + " ms" })
	slot := float64(chartW-padL-padR) / float64(max(len(ops), 1))
	barW := slot * 0.8 / 3
	names := []string{"p50", "p90", "p99"}
	for k, name := range names {
		fmt.Fprintf(&b, `<g class="series" data-series="%s" fill="%s">`, name, palette[k])
		for j, o := range ops {
			v := []float64{o.P50, o.P90, o.P99}[k]
			x := padL + float64(j)*slot + slot*0.1 + float64(k)*barW
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s %s: %.1f ms</title></rect>`,
				x, c.y(v), barW, c.y(0)-c.y(v), template.HTMLEscapeString(o.Operation), name, v)
		}
		b.WriteString(`</g>`)
	}
	opLabels(&b, ops, slot)
	c.end(`<div class="legend"><span><i style="background:` + palette[0] + `"></i>p50</span><span><i style="background:` + palette[1] +
		`"></i>p90</span><span><i style="background:` + palette[2] + `"></i>p99</span></div>`)
	return template.HTML(b.String())
}

// errorChart draws each operation's error rate.
func errorChart(ops []OperationStats) template.HTML {
	var b strings.Builder
	c := newChart(&b, "errors", 1, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
	slot := float64(chartW-padL-padR) / float64(max(len(ops), 1))
	fmt.Fprintf(&b, `<g class="series" data-series="error rate" fill="%s">`, palette[4])
	for j, o := range ops {
		v := o.ErrorRate()
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d of %d failed</title></rect>`,
			padL+float64(j)*slot+slot*0.2, c.y(v), slot*0.6, c.y(0)-c.y(v), template.HTMLEscapeString(o.Operation), o.Errors, o.Count)
	}
	b.WriteString(`</g>`)
	opLabels(&b, ops, slot)
	c.end("")
	return template.HTML(b.String())
}

func opLabels(b *strings.Builder, ops []OperationStats, slot float64) {
	for j, o := range ops {
		fmt.Fprintf(b, `<text x="%.1f" y="%d" class="xlabel">%s</text>`, padL+(float64(j)+0.5)*slot, chartH-padB+16, template.HTMLEscapeString(o.Operation))
	}
}

// chart is an SVG being written: axes, grid and the y scale.
type chart struct {
	b   *strings.Builder
	top float64
}

func newChart(b *strings.Builder, name string, top float64, label func(float64) string) *chart {
	if top <= 0 {
		top = 1
	}
	c := &chart{b: b, top: top}
	fmt.Fprintf(b, `<figure class="chart" data-chart="%s"><svg viewBox="0 0 %d %d" role="img">`, name, chartW, chartH)
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="grid"/><text x="%d" y="%.1f" class="ylabel">%s</text>`,
			padL, chartW-padR, c.y(v), c.y(v), padL-6, c.y(v)+4, template.HTMLEscapeString(label(v)))
	}
	return c
}

func (c *chart) y(v float64) float64 {
	return padT + float64(chartH-padT-padB)*(1-v/c.top)
}

func (c *chart) end(legend string) {
	c.b.WriteString(`</svg>` + legend + `</figure>`)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func dollarsShort(v float64) string {
	if v >= 100 || v == 0 {
		return "$" + obs.Short(v)
	}
	return fmt.Sprintf("$%.4g", v)
}

// integer formats n with thousands separators.
func integer(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + integer(-n)
	}
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, parts...), ",")
}

// money shows an exact decimal amount rounded to cents, or to a hundredth
// of a cent below a dollar, halves away from zero. It rounds the decimal
// itself: through a float64, 2.675 (2.67499999… in binary) showed $2.67,
// and a sum's last shown digit depended on the binary noise.
func money(s string) string {
	var x big.Rat
	if _, ok := x.SetString(s); !ok {
		return s
	}
	if x.Cmp(big.NewRat(1, 1)) < 0 {
		return "$" + x.FloatString(4)
	}
	return "$" + x.FloatString(2)
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"num": integer, "money": money, "ms": func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"pct": func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	"sorted": func(ns []NamedStats) []NamedStats {
		out := append([]NamedStats(nil), ns...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
		return out
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tracelake: GenAI operations</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#1f2430;background:#f6f7f9}
h1{font-size:20px;margin:0 0 .2em}h2{font-size:16px;margin:1.6em 0 .5em}
.muted{color:#6b7280}
.tiles{display:flex;gap:.8em;flex-wrap:wrap;margin:1em 0}
.tile{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:.6em 1em;min-width:9em}
.tile .v{font-size:20px;font-weight:600}.tile .k{color:#6b7280}
.charts{display:flex;gap:1em;flex-wrap:wrap}
figure.chart{margin:0;width:640px;max-width:100%;background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:.4em}
figure.chart svg{width:100%;height:auto;display:block}
figcaption{font-weight:600;margin:.2em .4em}
.grid{stroke:#e5e7eb}.ylabel{font-size:11px;text-anchor:end;fill:#6b7280}.xlabel{font-size:11px;text-anchor:middle;fill:#6b7280}
.legend{font-size:12px;margin:.2em .4em}.legend span{margin-right:1em;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border-radius:2px}
table{border-collapse:collapse;background:#fff;border:1px solid #dde1e8}
th,td{padding:.3em .7em;text-align:right;border-bottom:1px solid #eef0f3}th{background:#f0f2f5}
.l{text-align:left}code{font-size:12px}
</style></head><body>
<h1>GenAI operations</h1>
<p class="muted">{{.Table}}{{if .Tenant}} · tenant {{.Tenant}}{{end}} · {{.Window}} · generated {{.Generated.Format "2006-01-02 15:04 UTC"}} by tracelake report</p>
<div class="tiles">
<div class="tile"><div class="v">{{num .Operations}}</div><div class="k">operations</div></div>
<div class="tile"><div class="v">{{money .CostUSD}}</div><div class="k">cost</div></div>
<div class="tile"><div class="v">{{num .InputTokens}}</div><div class="k">input tokens</div></div>
<div class="tile"><div class="v">{{num .OutputTokens}}</div><div class="k">output tokens</div></div>
<div class="tile"><div class="v">{{num .Errors}}</div><div class="k">failed</div></div>
<div class="tile"><div class="v">{{num .Unpriced}}</div><div class="k">with tokens, no price</div></div>
</div>
{{if not .Operations}}<p class="muted">No operations in this window.</p>{{end}}
<h2>Cost and tokens by model and day</h2>
<div class="charts">
<div><figcaption>Cost (USD)</figcaption>{{.CostChart}}</div>
<div><figcaption>Tokens</figcaption>{{.TokenChart}}</div>
</div>
<h2>Models</h2>
<table><tr><th class="l">model</th><th>operations</th><th>input tokens</th><th>cache read</th><th>output tokens</th><th>cost</th></tr>
{{range .Models}}<tr><td class="l">{{.Model}}</td><td>{{num .Operations}}</td><td>{{num .InputTokens}}</td><td>{{num .CacheRead}}</td><td>{{num .OutputTokens}}</td><td>{{if .CostText}}{{money .CostText}}{{else}}<span class="muted">no price</span>{{end}}</td></tr>
{{end}}</table>
<h2>Latency and errors by operation</h2>
<div class="charts">
<div><figcaption>Duration percentiles (ms)</figcaption>{{.LatencyChart}}</div>
<div><figcaption>Error rate</figcaption>{{.ErrorChart}}</div>
</div>
<table><tr><th class="l">operation</th><th>spans</th><th>failed</th><th>error rate</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th></tr>
{{range .ByOperation}}<tr><td class="l">{{.Operation}}</td><td>{{num .Count}}</td><td>{{num .Errors}}</td><td>{{pct .ErrorRate}}</td><td>{{ms .P50}}</td><td>{{ms .P90}}</td><td>{{ms .P99}}</td></tr>
{{end}}</table>
<div class="charts">
<div><h2>Top tools</h2>
<table><tr><th class="l">tool</th><th>calls</th><th>failed</th><th>p50 ms</th></tr>
{{range sorted .Tools}}<tr><td class="l">{{.Name}}</td><td>{{num .Count}}</td><td>{{num .Errors}}</td><td>{{ms .P50}}</td></tr>
{{else}}<tr><td class="l muted" colspan="4">no tool calls</td></tr>{{end}}</table></div>
<div><h2>Top agents</h2>
<table><tr><th class="l">agent</th><th>runs</th><th>failed</th><th>p50 ms</th></tr>
{{range sorted .Agents}}<tr><td class="l">{{.Name}}</td><td>{{num .Count}}</td><td>{{num .Errors}}</td><td>{{ms .P50}}</td></tr>
{{else}}<tr><td class="l muted" colspan="4">no agent runs</td></tr>{{end}}</table></div>
</div>
<h2>Most expensive traces</h2>
<table><tr><th class="l">tenant</th><th class="l">trace</th><th class="l">service</th><th class="l">models</th><th>operations</th><th>tokens</th><th>cost</th></tr>
{{range .Traces}}<tr><td class="l">{{.Tenant}}</td><td class="l"><code>{{.TraceID}}</code></td><td class="l">{{.Service}}</td><td class="l">{{.Models}}</td><td>{{num .Operations}}</td><td>{{num .Tokens}}</td><td>{{money .CostUSD}}</td></tr>
{{else}}<tr><td class="l muted" colspan="7">no priced traces</td></tr>{{end}}</table>
<p class="muted">Costs from the genai-prices table (MIT) at each operation's time; an operation whose model has no price counts above and adds no cost.</p>
<script>
// Records what the charts drew (each series and the area it covers) on
// the page's root element, for checks in a headless browser.
addEventListener("load", function () {
  var out = [];
  document.querySelectorAll("figure.chart").forEach(function (f) {
    f.querySelectorAll("g.series").forEach(function (g) {
      var area = 0;
      g.querySelectorAll("rect").forEach(function (r) { var b = r.getBBox(); area += b.width * b.height; });
      out.push({chart: f.dataset.chart, series: g.dataset.series, area: Math.round(area)});
    });
  });
  document.documentElement.dataset.rendered = JSON.stringify(out);
});
</script>
</body></html>
`))
