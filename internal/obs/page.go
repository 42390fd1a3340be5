package obs

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"time"
)

// page is the status page: one server-rendered HTML document with inline
// CSS and SVG, no scripts and no external assets, refreshing itself.
var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"num":   num,
	"bytes": humanBytes,
	"ago":   ago,
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="10">
<title>tracelake status</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.2em 2em;color:#1d2330;background:#f7f8fa}
h1{font-size:20px;margin:0 0 .2em}h2{font-size:15px;margin:1.4em 0 .4em}
.info span{margin-right:1.4em;color:#555}.info b{color:#1d2330;font-weight:600}
.ok{color:#17803d}.bad{color:#b42318}
.tiles{display:flex;gap:.8em;flex-wrap:wrap;margin-top:.8em}
.tile{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:.5em .9em;min-width:8em}
.tile .v{font-size:20px;font-weight:600}.tile .k{color:#666;font-size:12px}
.charts{display:flex;gap:1em;flex-wrap:wrap}
.chart{width:640px;max-width:100%;background:#fff;border:1px solid #dde1e8;border-radius:6px}
.grid{stroke:#e6e9ef}.ylabel{font-size:11px;fill:#666;text-anchor:end}
.xlabel{font-size:11px;fill:#666;text-anchor:middle}.legend{font-size:12px;font-weight:600}
.nodata{font-size:13px;fill:#999;text-anchor:middle}
table{border-collapse:collapse;background:#fff;border:1px solid #dde1e8}
th,td{padding:.3em .8em;border-bottom:1px solid #eef0f4;text-align:right}
th{background:#f0f2f6;font-weight:600}td.l,th.l{text-align:left}
.lag{font-weight:600}.errors td{text-align:left;vertical-align:top}.errors td.t{white-space:nowrap;color:#666}
.WARN{color:#9a6700}.ERROR{color:#b42318}
.muted{color:#888}
</style></head><body>
<h1>tracelake</h1>
<div class="info">{{range .Info}}<span>{{index . 0}} <b>{{index . 1}}</b></span>{{end}}
<span>up <b>{{.Uptime}}</b></span>
<span>{{if .NotReady}}<b class="bad">not ready: {{.NotReady}}</b>{{else}}<b class="ok">ready</b>{{end}}</span></div>
<div class="tiles">
<div class="tile"><div class="v">{{num .Snap.Consumed}}</div><div class="k">records read</div></div>
<div class="tile"><div class="v">{{num .Snap.Loaded}}</div><div class="k">rows loaded</div></div>
<div class="tile"><div class="v">{{num .Snap.DLQ}}</div><div class="k">dead-letter rows</div></div>
<div class="tile"><div class="v">{{num .Lag}}</div><div class="k">lag (records)</div></div>
<div class="tile"><div class="v">{{bytes .Snap.InflightBytes}}</div><div class="k">in flight of {{bytes .Snap.InflightBudget}}</div></div>
</div>
<h2>Last 15 minutes</h2>
<div class="charts">{{.Throughput}}{{.LagChart}}</div>
<h2>Partitions owned by this process ({{len .Snap.Partitions}})</h2>
{{if .Snap.Partitions}}<table>
<tr><th class="l">topic</th><th>partition</th><th>worker</th><th>ledger (next offset)</th><th>committed</th><th>high watermark</th><th>lag</th><th>last load</th></tr>
{{range .Snap.Partitions}}<tr><td class="l">{{.Topic}}</td><td>{{.Partition}}</td><td>{{if ge .Worker 0}}{{.Worker}}{{else}}receivers{{end}}</td><td>{{num .Next}}</td><td>{{num .Committed}}</td><td>{{num .HWM}}</td><td class="lag">{{num .Lag}}</td><td>{{ago $.Now .LastLoad}}</td></tr>
{{end}}</table>{{else}}<p class="muted">none: not joined yet, or every partition is owned by other members of the group.</p>{{end}}
{{if .Models}}<h2>Models (merge.every)</h2>
<table>
<tr><th class="l">model</th><th>last merge</th><th>raw rows read</th><th>target rows changed</th><th>rejected</th><th>took</th><th>last success</th><th class="l">last error</th></tr>
{{range .Models}}<tr><td class="l">{{.Name}}</td><td>{{ago $.Now .At}}</td><td>{{num .Read}}</td><td>{{num .Changed}}</td><td>{{num .Rejected}}</td><td>{{.Took}}</td><td>{{ago $.Now .LastSuccess}}</td><td class="l {{if .Err}}bad{{end}}">{{.Err}}</td></tr>
{{end}}</table>{{end}}
{{if .Commits}}<h2>Catalog commits (Iceberg)</h2>
<table>
<tr><th class="l">table</th><th>commits</th><th>lost races</th><th>failed</th><th>last took</th><th>slowest</th><th>last commit</th><th>snapshots</th><th>metadata file</th></tr>
{{range .Commits}}<tr><td class="l">{{.Table}}</td><td>{{num .Commits}}</td><td>{{num .Conflicts}}</td><td class="{{if .Failed}}bad{{end}}">{{num .Failed}}</td><td>{{.LastTook}}</td><td>{{.MaxTook}}</td><td>{{ago $.Now .Last}}</td><td>{{num .Snapshots}}</td><td>{{bytes .MetadataBytes}}</td></tr>
{{end}}</table>{{end}}
<h2>Last errors and warnings</h2>
{{if .Errors}}<table class="errors">
{{range .Errors}}<tr><td class="t">{{clock .At}}</td><td class="{{.Level}}">{{.Level}}</td><td>{{.Text}}</td></tr>
{{end}}</table>{{else}}<p class="muted">none since start.</p>{{end}}
<p class="muted">{{.Now.UTC.Format "2006-01-02 15:04:05"}} UTC · refreshes every 10 s · <a href="/metrics">/metrics</a>{{range .Links}} · <a href="{{index . 1}}">{{index . 0}}</a>{{end}}</p>
</body></html>
`))

type pageData struct {
	Info, Links          [][2]string
	Uptime               string
	NotReady             string
	Now                  time.Time
	Snap                 Snapshot
	Lag                  int64
	Throughput, LagChart template.HTML
	Errors               []LoggedError
	Models               []ModelStatus
	Commits              []TableCommits
}

// Handler serves the status page; ready says why the process is not ready,
// or "" when it is.
func (s *Status) Handler(ready func() string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := time.Now()
		snap := s.Snapshot()
		samples := s.Samples()
		d := pageData{
			Info:     s.header(),
			Links:    s.links,
			Uptime:   now.Sub(s.started).Round(time.Second).String(),
			NotReady: ready(),
			Now:      now,
			Snap:     snap,
			Lag:      snap.totalLag(),
			Throughput: svgChart(now, "/s",
				series{"read", "#2f6fdf", rates(samples, func(s Sample) int64 { return s.Consumed })},
				series{"loaded", "#17803d", rates(samples, func(s Sample) int64 { return s.Loaded })}),
			LagChart: svgChart(now, "", series{"lag", "#b45309", lagPoints(samples)}),
			Errors:   s.Errors(),
			Models:   s.Models(),
			Commits:  s.Commits(),
		}
		var buf bytes.Buffer
		if err := page.Execute(&buf, d); err != nil {
			http.Error(w, "render status page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(buf.Bytes())
	})
}

func lagPoints(samples []Sample) []point {
	out := make([]point, len(samples))
	for i, s := range samples {
		out[i] = point{s.At, float64(s.Lag)}
	}
	return out
}

// num renders an offset or count with thousands separators; negative
// values mean unknown.
func num(v int64) string {
	if v < 0 {
		return "–"
	}
	s := strconv.FormatInt(v, 10)
	out := make([]byte, 0, len(s)+len(s)/3)
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func humanBytes(v int64) string {
	const unit = 1024
	if v < unit {
		return strconv.FormatInt(v, 10) + " B"
	}
	f, suffix := float64(v)/unit, "KiB"
	for _, next := range []string{"MiB", "GiB", "TiB"} {
		if f < unit {
			break
		}
		f, suffix = f/unit, next
	}
	return trimZero(f) + " " + suffix
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}
