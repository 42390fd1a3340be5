package tempo

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/tracelake/tracelake/internal/query/traceql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// rangeRequest is a metrics query_range request, its times in
// nanoseconds, aligned as Tempo's frontend aligns them.
type rangeRequest struct {
	q                *traceql.Query
	start, end, step uint64
	// instant: one interval, the whole range (start, end].
	instant bool
}

// The frontend's bounds on a metrics query (modules/frontend/config.go:
// metrics max_intervals, and the metrics sharder's max_duration).
const (
	maxIntervals       = 10_000
	maxMetricsDuration = 24 * time.Hour
)

// parseRange reads query_range's parameters as pkg/api/http.go
// ParseQueryRangeRequest does: the query in q (or query, Prometheus's
// name), start and end (Unix seconds, fractional seconds, nanoseconds or
// RFC 3339; end default now, start default an hour, or since, before),
// step (seconds or a duration; default DefaultQueryRangeStep), then
// aligned (pkg/traceql/engine_metrics.go AlignRequest).
func parseRange(r *http.Request, now time.Time, instant bool) (rangeRequest, error) {
	v := r.URL.Query()
	text := v.Get("query")
	if q := v.Get("q"); q != "" {
		text = q
	}
	q, err := traceql.Parse(text)
	if err != nil {
		return rangeRequest{}, bad("%v", err)
	}
	if q.Metrics == nil {
		return rangeRequest{}, bad("not a metrics query: it needs a metrics function (rate, count_over_time, quantile_over_time, histogram_over_time)")
	}
	since := time.Hour
	if s := v.Get("since"); s != "" {
		// Prometheus's durations, 1d and 1w among them (pkg/api/http.go
		// determineBounds).
		d, err := model.ParseDuration(s)
		if err != nil {
			return rangeRequest{}, bad("could not parse 'since' parameter: %v", err)
		}
		since = time.Duration(d)
	}
	end, err := parseTimestamp(v.Get("end"), now)
	if err != nil {
		return rangeRequest{}, bad("could not parse 'end' parameter: %v", err)
	}
	endOrNow := end
	if end.After(now) {
		endOrNow = now
	}
	start, err := parseTimestamp(v.Get("start"), endOrNow.Add(-since))
	if err != nil {
		return rangeRequest{}, bad("could not parse 'start' parameter: %v", err)
	}
	if !end.After(start) {
		return rangeRequest{}, bad("end must be after start")
	}
	req := rangeRequest{q: q, start: uint64(start.UnixNano()), end: uint64(end.UnixNano())}
	if req.end-req.start > uint64(maxMetricsDuration) {
		// modules/frontend/metrics_query_validation.go
		// validateMetricsQueryMaxDuration
		return rangeRequest{}, bad("metrics query time range exceeds the maximum allowed duration of %s", maxMetricsDuration)
	}
	if instant {
		// One interval, the whole range, unaligned (an instant query is
		// a range query of one step: engine_metrics.go IsInstant).
		req.step, req.instant = req.end-req.start, true
		return req, nil
	}
	if s := v.Get("step"); s != "" {
		d, err := parseSecondsOrDuration(s)
		if err != nil || d <= 0 {
			return rangeRequest{}, bad("cannot parse %q to a valid step", s)
		}
		req.step = uint64(d)
	} else {
		req.step = defaultStep(req.start, req.end)
	}
	if (req.end-req.start)/req.step > maxIntervals {
		// metrics_query_validation.go validateQueryRangeReq, before
		// the alignment widens the range.
		return rangeRequest{}, bad("step of %s is too small, minimum step for given range is %s",
			time.Duration(req.step), time.Duration((req.end-req.start)/maxIntervals))
	}
	req.start -= req.start % req.step
	if m := req.end % req.step; m != 0 {
		req.end += req.step - m
	}
	if req.start > req.step {
		req.start -= req.step // an additional first interval, as AlignRequest adds
	}
	return req, nil
}

// parseTimestamp: pkg/api/http.go parseTimestamp.
func parseTimestamp(s string, def time.Time) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	if strings.Contains(s, ".") {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			sec, frac := math.Modf(f)
			return time.Unix(int64(sec), int64(math.Round(frac*1000)/1000*float64(time.Second))), nil
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Parse(time.RFC3339Nano, s)
	}
	if len(s) <= 10 {
		return time.Unix(n, 0), nil
	}
	return time.Unix(0, n), nil
}

// parseSecondsOrDuration: pkg/api/http.go parseSecondsOrDuration.
func parseSecondsOrDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// defaultStep: pkg/traceql/engine_metrics.go DefaultQueryRangeStep,
// about 240 points, rounded down to a granularity.
func defaultStep(start, end uint64) uint64 {
	delta := time.Duration(end - start)
	baseline := delta / 240
	if delta < time.Minute {
		g := 50 * time.Millisecond
		return uint64(max(baseline/g*g, g))
	}
	for _, g := range []time.Duration{time.Hour, 5 * time.Minute, time.Minute, 15 * time.Second, 5 * time.Second, time.Second} {
		if baseline > g {
			return uint64(baseline / g * g)
		}
	}
	return uint64(time.Second)
}

// seriesLabel is a label of a series: the attribute as TraceQL writes it
// and its value.
type seriesLabel struct {
	key   string
	value *commonpb.AnyValue
}

// series is a time series being built: one value per interval, or for a
// quantile the log2 histogram of each interval.
type series struct {
	labels []seriesLabel
	key    string
	counts []float64
	hist   []map[float64]float64 // interval → bucket max (seconds) → count
}

// queryRange answers /api/metrics/query_range: rate(), count_over_time(),
// quantile_over_time() and histogram_over_time() of the spans a TraceQL spanset matches, by the
// attributes of by(), over intervals of step right-closed (start+i·step,
// start+(i+1)·step], each sample stamped with its interval's end
// (engine_metrics.go IntervalMapperQueryRange); a span counts in the
// interval of its start, once however often it was loaded.
func (s *server) queryRange(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	resp, err := s.metrics(r, scope, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, resp)
}

// metrics reads a metrics request (instant or range) and answers its
// series.
func (s *server) metrics(r *http.Request, scope tenancy.Scope, instant bool) (rangeResponse, error) {
	req, err := parseRange(r, time.Now(), instant)
	if err != nil {
		return rangeResponse{}, err
	}
	all, err := s.runRange(r.Context(), scope, req)
	if err != nil {
		return rangeResponse{}, err
	}
	return rangeAnswer(req, all), nil
}

// instantResponse is tempopb.QueryInstantResponse as jsonpb writes it.
type instantResponse struct {
	Series  []instantSeries `json:"series,omitempty"`
	Metrics searchMetrics   `json:"metrics"`
}

type instantSeries struct {
	Labels []*keyValue `json:"labels,omitempty"`
	Value  float64     `json:"value,omitempty"`
}

// queryInstant answers /api/metrics/query: the same functions over the
// whole range (start, end], one value per series (Grafana's instant
// metrics queries; pkg/api/http.go ParseQueryInstantRequest).
func (s *server) queryInstant(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	ranged, err := s.metrics(r, scope, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp := instantResponse{Metrics: ranged.Metrics}
	for _, ts := range ranged.Series {
		resp.Series = append(resp.Series, instantSeries{Labels: ts.Labels, Value: ts.Samples[0].Value})
	}
	writeJSON(w, resp)
}

// labelSQL is the SQL of a by() attribute's value: JSON text, or plain
// text for the intrinsics (text true).
func labelSQL(a traceql.Attribute) (sql string, text bool, err error) {
	switch a.Scope {
	case traceql.SpanScope:
		return jsonValue("span_attributes", a.Name), false, nil
	case traceql.ResourceScope:
		return jsonValue("resource_attributes", a.Name), false, nil
	case traceql.Unscoped:
		return fmt.Sprintf("coalesce(%s, %s)", jsonValue("span_attributes", a.Name), jsonValue("resource_attributes", a.Name)), false, nil
	}
	// The trace-level ones are the trace's (engine_metrics.go
	// GroupingAggregator reads each span's value with AttributeFor, the
	// trace's root for these), from the builder's tr.
	col := map[string]string{traceql.IntrinsicName: "name", traceql.IntrinsicStatus: "status_code",
		traceql.IntrinsicKind: "kind", traceql.IntrinsicStatusMessage: "status_message",
		traceql.IntrinsicRootName: "root_name", traceql.IntrinsicRootServiceName: "root_service_name"}[a.Name]
	if col == "" {
		return "", false, bad("by(%s) is not supported", a)
	}
	return col, true, nil
}

func (s *server) runRange(ctx context.Context, scope tenancy.Scope, req rangeRequest) (map[string]*series, error) {
	m := req.q.Metrics
	// The spansets are evaluated over the traces running during the range
	// (ReachMicros), and the matched spans starting in it counted, as
	// Tempo evaluates a trace's spansets and then checks each span's
	// start (engine_metrics.go MetricsEvaluator.Do, checkTime): a span
	// in the range matches structurally, and by its trace's root and
	// duration, spans before it.
	b := &traceql.Builder{Table: s.Table, StartMicros: int64(req.start / 1000), EndMicros: int64(req.end/1000 + 1),
		ReachMicros: traceReach.Microseconds()}
	spans := "sp.*"
	for _, a := range m.By {
		if a.Scope == traceql.Intrinsic && (a.Name == traceql.IntrinsicRootName || a.Name == traceql.IntrinsicRootServiceName) {
			b.UseTraceIntrinsics()
			spans = "sp.*, tr.root_name, tr.root_service_name"
		}
	}
	with, err := b.Matches(req.q.Spans)
	if err != nil {
		return nil, bad("%v", err)
	}
	join := "JOIN hit USING (" + traceql.SpanKey + ")"
	if spans != "sp.*" {
		join += " LEFT JOIN tr USING (trace_id)"
	}
	var cols []string
	texts := make([]bool, len(m.By))
	for i, a := range m.By {
		sql, text, err := labelSQL(a)
		if err != nil {
			return nil, err
		}
		cols = append(cols, fmt.Sprintf("%s AS l%d", sql, i))
		texts[i] = text
	}
	startP, endP := b.Param(int64(req.start)), b.Param(int64(req.end))
	// Spans starting in (start, end] alone, instant or not: Tempo's
	// evaluator skips a span with start <= its request's start before
	// it picks an interval (engine_metrics.go metricsEvaluator.Do,
	// DoSpansOnly: checkTime), so IntervalMapperInstant's ts >= start
	// never counts one at start.
	if req.instant {
		cols = append(cols, "0 AS iv")
	} else {
		cols = append(cols, fmt.Sprintf("(start_ns - %s - 1) // %s AS iv", startP, b.Param(int64(req.step))))
	}
	bucketed := m.Of != nil
	cond := ""
	if bucketed {
		if m.Of.Scope != traceql.Intrinsic || m.Of.Name != traceql.IntrinsicDuration {
			return nil, bad("%s of %s is not supported: of duration only", m.Func, m.Of)
		}
		// Log2Bucketize (engine_metrics.go): the smallest power of two
		// at least the duration, in seconds; a span under 2ns is in no
		// bucket (bucketizeDuration in ast_metrics.go).
		cols = append(cols, "pow(2, ceil(log2(duration_ns))) / 1e9 AS bucket")
		cond = " AND duration_ns >= 2"
	}
	sql := fmt.Sprintf(`WITH %s
SELECT %s, count(*) AS n FROM (SELECT DISTINCT ON (sp.tenant_id, sp.trace_id, sp.span_id) %s FROM %s sp %s)
WHERE start_ns > %s AND start_ns <= %s%s GROUP BY ALL`, with, strings.Join(cols, ", "), spans, b.SpanRelation(), join, startP, endP, cond)
	intervals := int((req.end - req.start) / req.step)
	all := map[string]*series{}
	err = each(ctx, s.Reader, scope, sql, b.Params, func(r row) error {
		labels := make([]seriesLabel, len(m.By))
		var key strings.Builder
		for i, a := range m.By {
			v := &commonpb.AnyValue{}
			if !r.null(i) {
				raw := r.str(i)
				if texts[i] {
					v = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: raw}}
				} else {
					var err error
					if v, err = scalarValue(raw); err != nil {
						return fmt.Errorf("read label %s: %w", a, err)
					}
				}
				fmt.Fprintf(&key, "%q=%s;", a.String(), raw)
			} else {
				fmt.Fprintf(&key, "%q=nil;", a.String())
			}
			labels[i] = seriesLabel{key: a.String(), value: v}
		}
		ser := all[key.String()]
		if ser == nil {
			ser = &series{labels: labels, key: key.String(), counts: make([]float64, intervals), hist: make([]map[float64]float64, intervals)}
			all[key.String()] = ser
		}
		iv := int(r.int(len(m.By)))
		if iv < 0 || iv >= intervals {
			return nil
		}
		n := float64(r.int(int(r.rec.NumCols()) - 1))
		if bucketed {
			if ser.hist[iv] == nil {
				ser.hist[iv] = map[float64]float64{}
			}
			ser.hist[iv][r.float(len(m.By)+1)] += n
		} else {
			ser.counts[iv] += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("metrics query: %w", err)
	}
	return all, nil
}

// rangeResponse is tempopb.QueryRangeResponse as jsonpb writes it (a
// sample's zero value left out, its timestamp a string).
type rangeResponse struct {
	Series  []*timeSeries `json:"series,omitempty"`
	Metrics searchMetrics `json:"metrics"`
}

type timeSeries struct {
	Labels  []*keyValue `json:"labels,omitempty"`
	Samples []sample    `json:"samples,omitempty"`
}

type sample struct {
	TimestampMs int64   `json:"timestampMs,omitempty,string"`
	Value       float64 `json:"value,omitempty"`
}

// rangeAnswer writes the series: ungrouped ones labelled
// __name__=<function>, as Prometheus names a metric (engine_metrics.go
// UngroupedAggregator.Series); a quantile's series each with its p
// label; values at every interval (0 where none), rates per second.
func rangeAnswer(req rangeRequest, all map[string]*series) rangeResponse {
	m := req.q.Metrics
	resp := rangeResponse{Metrics: searchMetrics{CompletedJobs: 1, TotalJobs: 1}}
	keys := sortedKeys(all)
	for _, k := range keys {
		ser := all[k]
		// A span without a by() attribute has no such label; a group
		// of spans missing every one is labelled by the first, "nil"
		// (engine_metrics.go GroupingAggregator.labelsFor), but for a
		// quantile's or a histogram's, which their p or __bucket label
		// names.
		base := make([]*keyValue, 0, len(ser.labels)+1)
		for _, l := range ser.labels {
			if l.value.GetValue() != nil {
				base = append(base, &keyValue{Key: l.key, Value: l.value})
			}
		}
		if len(base) == 0 && len(ser.labels) > 0 && m.Of == nil {
			base = append(base, &keyValue{Key: ser.labels[0].key, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "nil"}}})
		}
		if len(base) == 0 && m.Of == nil {
			base = append(base, &keyValue{Key: "__name__", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: m.Func}}})
		}
		values := func(f func(i int) float64) []sample {
			out := make([]sample, len(ser.counts))
			for i := range out {
				out[i] = sample{TimestampMs: int64((req.start + uint64(i+1)*req.step) / 1e6), Value: f(i)}
			}
			return out
		}
		switch m.Func {
		case "rate":
			secs := float64(req.step) / 1e9
			resp.Series = append(resp.Series, &timeSeries{Labels: base, Samples: values(func(i int) float64 { return ser.counts[i] / secs })})
		case "count_over_time":
			resp.Series = append(resp.Series, &timeSeries{Labels: base, Samples: values(func(i int) float64 { return ser.counts[i] })})
		case "histogram_over_time":
			// A series per bucket, labelled __bucket (its max in
			// seconds) after the by() labels (engine_metrics.go
			// GroupingAggregator with byFuncLabel).
			for _, max := range bucketsOf(ser.hist) {
				labels := append(slices.Clone(base), &keyValue{Key: "__bucket", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: max}}})
				resp.Series = append(resp.Series, &timeSeries{Labels: labels, Samples: values(func(i int) float64 { return ser.hist[i][max] })})
			}
		default:
			for _, q := range m.Quantiles {
				labels := append(slices.Clone(base), &keyValue{Key: "p", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: q}}})
				resp.Series = append(resp.Series, &timeSeries{Labels: labels, Samples: values(func(i int) float64 { return log2Quantile(q, ser.hist[i]) })})
			}
		}
	}
	return resp
}

// log2Quantile is quantile p of a log2 histogram (bucket max → count):
// the bucket holding the p·total-th sample (rounded up, at least one),
// interpolated exponentially between the bucket below's max and its own
// (engine_metrics.go Log2QuantileWithBucket); 0 for no samples.
func log2Quantile(p float64, hist map[float64]float64) float64 {
	if len(hist) == 0 || math.IsNaN(p) || p < 0 || p > 1 {
		return 0
	}
	maxes := sortedFloats(hist)
	var total float64
	for _, m := range maxes {
		total += hist[m]
	}
	want := max(math.Ceil(p*total), 1)
	var seen float64
	i := 0
	for ; i < len(maxes); i++ {
		c := hist[maxes[i]]
		if seen+c > want {
			break
		}
		seen += c
		if seen == want {
			return maxes[i]
		}
	}
	i = min(i, len(maxes)-1)
	frac := (want - seen) / hist[maxes[i]]
	hi := math.Log2(maxes[i])
	lo := hi - 1
	if i > 0 {
		lo = math.Log2(maxes[i-1])
	}
	return math.Pow(2, lo+(hi-lo)*frac)
}

// bucketsOf are the buckets of every interval, sorted.
func bucketsOf(hist []map[float64]float64) []float64 {
	all := map[float64]float64{}
	for _, h := range hist {
		for b := range h {
			all[b] = 0
		}
	}
	return sortedFloats(all)
}

func sortedFloats(m map[float64]float64) []float64 {
	out := make([]float64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
