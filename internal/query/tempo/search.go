package tempo

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/tracelake/tracelake/internal/query/traceql"
	"github.com/tracelake/tracelake/internal/tenancy"
)

// rootSpanNotYetReceived names the root service of a trace without a
// root span (pkg/search/util.go, set by modules/frontend/combiner/search.go).
const rootSpanNotYetReceived = "<root span not yet received>"

// search answers /api/search: the traces a TraceQL query (q) or tags
// match in the window, most recent first, each with up to spss of its
// matched spans carrying the attributes the query names and select()s
// (pkg/traceql/engine.go asTraceSearchMetadata).
func (s *server) search(w http.ResponseWriter, r *http.Request, scope tenancy.Scope) {
	p, err := parseSearch(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := &traceql.Query{Spans: tagsSpanset(p.tags)}
	if p.q != "" {
		if q, err = traceql.Parse(p.q); err != nil {
			s.fail(w, r, bad("%v", err))
			return
		}
		if q.Metrics != nil {
			s.fail(w, r, bad("metrics queries are answered by /api/metrics/query_range"))
			return
		}
		// minDuration and maxDuration are the tags search's alone: the
		// TraceQL engine never reads them (modules/querier/querier.go
		// picks it by api.IsTraceQLQuery; pkg/traceql/engine.go
		// ExecuteSearch).
		p.minDur, p.maxDur = 0, 0
	} else {
		// A tags search answers traces alone (no spansets), as Tempo's
		// non-TraceQL search did.
		p.spss = 0
	}
	resp, err := s.runSearch(r.Context(), scope, q, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, resp)
}

// tagsSpanset is the spanset of a tags search: every tag matched by some
// span of the trace, with the matching of Tempo's tag search
// (tempodb/encoding/vparquet4/block_search.go makePipelineWithRowGroups):
// a substring of the span's name, of the service and of the other
// well-known resource and span columns (labelMappings), of the root
// span's name and service; http.status_code as an int when it is one;
// status.code one of unset, ok, error; any other tag a string attribute
// of the span or its resource equal to the value.
func tagsSpanset(tags map[string]string) traceql.Spanset {
	var out traceql.Spanset
	for _, k := range sortedKeys(tags) {
		v := tags[k]
		substring := traceql.Static{Kind: traceql.String, S: ".*" + regexp.QuoteMeta(v) + ".*"}
		var c traceql.Comparison
		switch k {
		case "name":
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicName}, Op: "=~", Value: substring}
		case "root.name":
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicRootName}, Op: "=~", Value: substring}
		case "root.service.name":
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicRootServiceName}, Op: "=~", Value: substring}
		case "service.name", "cluster", "namespace", "pod", "container",
			"k8s.cluster.name", "k8s.namespace.name", "k8s.pod.name", "k8s.container.name":
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.ResourceScope, Name: k}, Op: "=~", Value: substring}
		case "http.method", "http.url":
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.SpanScope, Name: k}, Op: "=~", Value: substring}
		case "status.code":
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.Intrinsic, Name: traceql.IntrinsicStatus}, Op: "=", Value: traceql.Static{Kind: traceql.Status, S: v}}
		default:
			c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.Unscoped, Name: k}, Op: "=", Value: traceql.Static{Kind: traceql.String, S: v}}
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && k == "http.status_code" {
				c = traceql.Comparison{Attr: traceql.Attribute{Scope: traceql.SpanScope, Name: k}, Op: "=", Value: traceql.Static{Kind: traceql.Int, I: n}}
			}
		}
		f := traceql.Filter{Cond: c}
		if out == nil {
			out = f
		} else {
			out = traceql.SpansetOp{Op: "&&", L: out, R: f}
		}
	}
	if out == nil {
		return traceql.Filter{}
	}
	return out
}

// searchResponse is tempopb.SearchResponse as jsonpb writes it: fields by
// their proto names, zero values left out, 64-bit integers as strings.
type searchResponse struct {
	Traces  []*traceMeta  `json:"traces,omitempty"`
	Metrics searchMetrics `json:"metrics"`
}

type traceMeta struct {
	TraceID           string                  `json:"traceID"`
	RootServiceName   string                  `json:"rootServiceName,omitempty"`
	RootTraceName     string                  `json:"rootTraceName,omitempty"`
	StartTimeUnixNano uint64                  `json:"startTimeUnixNano,omitempty,string"`
	DurationMs        uint32                  `json:"durationMs,omitempty"`
	SpanSet           *spanSet                `json:"spanSet,omitempty"`
	SpanSets          []*spanSet              `json:"spanSets,omitempty"`
	ServiceStats      map[string]serviceStats `json:"serviceStats,omitempty"`
}

type serviceStats struct {
	SpanCount  uint32 `json:"spanCount,omitempty"`
	ErrorCount uint32 `json:"errorCount,omitempty"`
}

type spanSet struct {
	Spans   []*searchSpan `json:"spans,omitempty"`
	Matched uint32        `json:"matched,omitempty"`
}

type searchSpan struct {
	SpanID            string      `json:"spanID"`
	Name              string      `json:"name,omitempty"`
	StartTimeUnixNano uint64      `json:"startTimeUnixNano,omitempty,string"`
	DurationNanos     uint64      `json:"durationNanos,omitempty,string"`
	Attributes        []*keyValue `json:"attributes,omitempty"`
}

type searchMetrics struct {
	InspectedTraces uint32 `json:"inspectedTraces,omitempty"`
	InspectedSpans  uint64 `json:"inspectedSpans,omitempty,string"`
	CompletedJobs   uint32 `json:"completedJobs,omitempty"`
	TotalJobs       uint32 `json:"totalJobs,omitempty"`
}

// searchOutput is an attribute a search answers on its spans: its key
// and the SQL of its value (JSON text, or a plain string when text).
type searchOutput struct {
	key  string
	sql  string
	text bool
}

// runSearch runs q (its spanset and select()) with p's window, limits
// and durations.
func (s *server) runSearch(ctx context.Context, scope tenancy.Scope, q *traceql.Query, p searchParams) (*searchResponse, error) {
	b := &traceql.Builder{Table: s.Table, ReachMicros: traceReach.Microseconds()}
	b.StartMicros, b.EndMicros = p.window()
	if b.EndMicros != 0 {
		// A trace is in the window when it starts by end×1e9 ns, not
		// by the end second's last nanosecond: Tempo's trace time
		// range (tempodb/encoding/vparquet4/block_traceql.go
		// createTraceIterator: start <= EndTimeUnixNanos).
		b.EndNanos = int64(p.end) * 1e9
	}
	with, err := b.Matches(q.Spans)
	if err != nil {
		return nil, bad("%v", err)
	}
	var dur []string
	if p.minDur > 0 {
		dur = append(dur, "s.t_end - s.t_start >= "+b.Param(p.minDur.Nanoseconds()))
	}
	if p.maxDur > 0 {
		dur = append(dur, "s.t_end - s.t_start <= "+b.Param(p.maxDur.Nanoseconds()))
	}
	durCond := "TRUE"
	if len(dur) > 0 {
		durCond = strings.Join(dur, " AND ")
	}
	outputs := searchOutputs(q)
	var outCols, pickCols strings.Builder
	for i, o := range outputs {
		fmt.Fprintf(&pickCols, ", %s AS a%d", o.sql, i)
		fmt.Fprintf(&outCols, ", p.a%d", i)
	}
	sql := fmt.Sprintf(`WITH %s,
cand AS (SELECT trace_id, count(*) AS matched FROM hit GROUP BY trace_id),
summ AS (SELECT trace_id, min(start_ns) AS t_start, max(%s) AS t_end,
	arg_min(name, coalesce(start_ns, 0)) FILTER (WHERE parent_span_id IS NULL) AS root_name,
	arg_min(service_name, coalesce(start_ns, 0)) FILTER (WHERE parent_span_id IS NULL) AS root_service
	FROM %s sp WHERE trace_id IN (SELECT trace_id FROM cand) GROUP BY trace_id),
top AS (SELECT c.trace_id, c.matched, s.t_start, s.t_end, s.root_name, s.root_service
	FROM cand c JOIN summ s USING (trace_id) WHERE %s ORDER BY s.t_start DESC, c.trace_id LIMIT %s),
picked AS (SELECT *, row_number() OVER (PARTITION BY trace_id ORDER BY start_ns, span_id) AS rn
	FROM (SELECT DISTINCT ON (sp.tenant_id, sp.trace_id, sp.span_id) sp.trace_id, sp.span_id, sp.name, sp.start_ns, sp.duration_ns%s
		FROM %s sp JOIN hit USING (`+traceql.SpanKey+`)
		WHERE sp.trace_id IN (SELECT trace_id FROM top) ORDER BY sp.tenant_id, sp.trace_id, sp.span_id, sp.start_ns DESC))
SELECT t.trace_id, t.matched, t.t_start, t.t_end, t.root_name, t.root_service,
	p.span_id, p.name, p.start_ns, p.duration_ns%s
FROM top t LEFT JOIN picked p ON p.trace_id = t.trace_id AND p.rn <= %s
ORDER BY t.t_start DESC, t.trace_id, p.rn`,
		with, traceql.EndNanos("start_ns", "coalesce(duration_ns, 0)"), b.SpanRelation(), durCond, b.Param(p.limit), pickCols.String(), b.SpanRelation(), outCols.String(), b.Param(p.spss))
	resp := &searchResponse{Metrics: searchMetrics{CompletedJobs: 1, TotalJobs: 1}}
	var cur *traceMeta
	err = each(ctx, s.Reader, scope, sql, b.Params, func(r row) error {
		id := r.str(0)
		if cur == nil || cur.TraceID != trimID(id) {
			cur = &traceMeta{TraceID: trimID(id), RootServiceName: r.str(5), RootTraceName: r.str(4),
				StartTimeUnixNano: uint64(r.int(2)), DurationMs: uint32((r.int(3) - r.int(2)) / 1e6)}
			if cur.RootServiceName == "" {
				// No root, or a root whose resource names no service:
				// the frontend replaces every empty root service name
				// (modules/frontend/combiner/search.go
				// addRootSpanNotReceivedText).
				cur.RootServiceName = rootSpanNotYetReceived
			}
			if p.spss > 0 {
				set := &spanSet{Matched: uint32(r.int(1))}
				cur.SpanSet, cur.SpanSets = set, []*spanSet{set}
			}
			resp.Traces = append(resp.Traces, cur)
		}
		if r.null(6) {
			return nil
		}
		sp := &searchSpan{SpanID: r.str(6), Name: r.str(7), StartTimeUnixNano: uint64(r.int(8)), DurationNanos: uint64(r.int(9))}
		for i, o := range outputs {
			c := 10 + i
			if r.null(c) {
				continue
			}
			v := &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: r.str(c)}}
			if !o.text {
				var err error
				if v, err = scalarValue(r.str(c)); err != nil {
					return fmt.Errorf("read attribute %s: %w", o.key, err)
				}
			}
			sp.Attributes = append(sp.Attributes, &keyValue{Key: o.key, Value: v})
		}
		cur.SpanSet.Spans = append(cur.SpanSet.Spans, sp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	resp.Metrics.InspectedTraces = uint32(len(resp.Traces))
	return resp, nil
}

// trimID is a trace id as Tempo's search writes it, without its leading
// zeros (pkg/util/traceid.go TraceIDToHexString).
func trimID(id string) string {
	t := strings.TrimLeft(id, "0")
	if t == "" && id != "" {
		return "0"
	}
	return t
}

// searchOutputs are the attributes a search's spans carry: those its
// conditions compare and select() names, each once, keyed by name
// without scope; of the intrinsics, those not already a span's field
// (name, duration) nor the trace's (asTraceSearchMetadata).
func searchOutputs(q *traceql.Query) []searchOutput {
	var attrs []traceql.Attribute
	var walk func(e traceql.Expr)
	walk = func(e traceql.Expr) {
		switch e := e.(type) {
		case traceql.Logical:
			walk(e.L)
			walk(e.R)
		case traceql.Not:
			walk(e.X)
		case traceql.Comparison:
			attrs = append(attrs, e.Attr)
		case traceql.Attribute:
			attrs = append(attrs, e)
		}
	}
	var spans func(s traceql.Spanset)
	spans = func(s traceql.Spanset) {
		switch s := s.(type) {
		case traceql.Filter:
			walk(s.Cond)
		case traceql.SpansetOp:
			spans(s.L)
			spans(s.R)
		}
	}
	spans(q.Spans)
	attrs = append(attrs, q.Select...)
	seen := map[string]bool{}
	var out []searchOutput
	for _, a := range attrs {
		var o searchOutput
		switch a.Scope {
		case traceql.Intrinsic:
			col := map[string]string{traceql.IntrinsicStatus: "status_code", traceql.IntrinsicKind: "kind",
				traceql.IntrinsicStatusMessage: "status_message"}[a.Name]
			if col == "" {
				continue
			}
			o = searchOutput{key: a.Name, sql: col, text: true}
		case traceql.SpanScope:
			o = searchOutput{key: a.Name, sql: jsonValue("span_attributes", a.Name)}
		case traceql.ResourceScope:
			o = searchOutput{key: a.Name, sql: jsonValue("resource_attributes", a.Name)}
			if a.Name == "service.name" {
				// Its own column, cheaper than the JSON: a JSON string.
				o.sql = "to_json(service_name)::VARCHAR"
			}
		default:
			o = searchOutput{key: a.Name, sql: fmt.Sprintf("coalesce(%s, %s)", jsonValue("span_attributes", a.Name), jsonValue("resource_attributes", a.Name))}
		}
		if seen[o.key] {
			continue
		}
		seen[o.key] = true
		out = append(out, o)
	}
	return out
}

// jsonValue is the SQL of an attribute's value as JSON text.
func jsonValue(col, key string) string {
	return fmt.Sprintf("CAST(json_extract(%s, %s) AS VARCHAR)", col, traceql.JSONPath(key))
}
