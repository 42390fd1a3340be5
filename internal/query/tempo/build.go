package tempo

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// traceBuilder groups a trace's span rows into OTLP resource and scope
// spans, by their resource and scope as the rows hold them.
type traceBuilder struct {
	traceID   []byte
	resources []*tracepb.ResourceSpans
	byRes     map[string]*tracepb.ResourceSpans
	byScope   map[string]*tracepb.ScopeSpans
	err       error
}

func newTraceBuilder(traceID string) *traceBuilder {
	return &traceBuilder{traceID: idBytes(traceID), byRes: map[string]*tracepb.ResourceSpans{}, byScope: map[string]*tracepb.ScopeSpans{}}
}

var kinds = map[string]tracepb.Span_SpanKind{
	"internal": tracepb.Span_SPAN_KIND_INTERNAL, "server": tracepb.Span_SPAN_KIND_SERVER,
	"client": tracepb.Span_SPAN_KIND_CLIENT, "producer": tracepb.Span_SPAN_KIND_PRODUCER,
	"consumer": tracepb.Span_SPAN_KIND_CONSUMER,
}

var statusCodes = map[string]tracepb.Status_StatusCode{
	"ok": tracepb.Status_STATUS_CODE_OK, "error": tracepb.Status_STATUS_CODE_ERROR,
}

// add adds a row of traceColumns.
func (b *traceBuilder) add(r row) error {
	resJSON, scopeName, scopeVersion, scopeJSON := r.str(9), r.str(10), r.str(11), r.str(12)
	rs := b.byRes[resJSON]
	if rs == nil {
		attrs, err := keyValues(resJSON)
		if err != nil {
			return err
		}
		rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: attrs}}
		b.byRes[resJSON] = rs
		b.resources = append(b.resources, rs)
	}
	scopeKey := strings.Join([]string{resJSON, scopeName, scopeVersion, scopeJSON}, "\x00")
	ss := b.byScope[scopeKey]
	if ss == nil {
		attrs, err := keyValues(scopeJSON)
		if err != nil {
			return err
		}
		ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: scopeName, Version: scopeVersion, Attributes: attrs}}
		b.byScope[scopeKey] = ss
		rs.ScopeSpans = append(rs.ScopeSpans, ss)
	}
	attrs, err := keyValues(r.str(13))
	if err != nil {
		return err
	}
	events, err := spanEvents(r.str(14))
	if err != nil {
		return err
	}
	links, err := spanLinks(r.str(15))
	if err != nil {
		return err
	}
	start, end := spanNanos(r)
	ss.Spans = append(ss.Spans, &tracepb.Span{
		TraceId: b.traceID, SpanId: idBytes(r.str(0)), ParentSpanId: idBytes(r.str(1)), TraceState: r.str(2),
		Name: r.str(3), Kind: kinds[r.str(4)],
		Status:            &tracepb.Status{Code: statusCodes[r.str(5)], Message: r.str(6)},
		StartTimeUnixNano: start, EndTimeUnixNano: end,
		Attributes: attrs, Events: events, Links: links,
		DroppedAttributesCount: uint32(r.int(16)), DroppedEventsCount: uint32(r.int(17)), DroppedLinksCount: uint32(r.int(18)),
		Flags: uint32(r.int(19)),
	})
	return nil
}

// spanNanos are span r's (traceColumns) start and end as OTLP's uint64
// nanoseconds, 0 for unset. start_time_unix_nano holds a start past
// 2262-04-11 at int64's end, where OTLP's uint64 goes on to 2554:
// such a start is read from start_time's microseconds, which hold it, so
// that it is answered as sent (to the microsecond) rather than as 2262.
// The end is the start plus the duration (exact, both sent in
// nanoseconds); a span without a start (so without a duration) has the
// end of its end_time, which the duration cannot give.
func spanNanos(r row) (start, end uint64) {
	if !r.null(7) {
		start = uint64(r.int(7))
	}
	if us := r.int(20); start == math.MaxInt64 && !r.null(20) && us > math.MaxInt64/1000 {
		start = uint64(us) * 1000
	}
	switch {
	case !r.null(8):
		end = start + uint64(r.int(8))
	case start == 0 && !r.null(21) && r.int(21) > 0:
		end = uint64(r.int(21)) * 1000
	}
	return start, end
}

func (b *traceBuilder) data() *tracepb.TracesData {
	return &tracepb.TracesData{ResourceSpans: b.resources}
}

// spanEvents reads the events column: [{time, name, attributes,
// dropped_attributes_count}] (internal/otel appendEvents).
func spanEvents(js string) ([]*tracepb.Span_Event, error) {
	var raw []struct {
		Time    string          `json:"time"`
		Name    string          `json:"name"`
		Attrs   json.RawMessage `json:"attributes"`
		Dropped uint32          `json:"dropped_attributes_count"`
	}
	if js == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		return nil, fmt.Errorf("read span events: %w", err)
	}
	out := make([]*tracepb.Span_Event, len(raw))
	for i, e := range raw {
		attrs, err := keyValues(string(e.Attrs))
		if err != nil {
			return nil, err
		}
		out[i] = &tracepb.Span_Event{TimeUnixNano: nanos(e.Time), Name: e.Name, Attributes: attrs, DroppedAttributesCount: e.Dropped}
	}
	return out, nil
}

// spanLinks reads the links column: [{trace_id, span_id, trace_state,
// attributes, dropped_attributes_count, flags}] (internal/otel
// appendLinks).
func spanLinks(js string) ([]*tracepb.Span_Link, error) {
	var raw []struct {
		TraceID    string          `json:"trace_id"`
		SpanID     string          `json:"span_id"`
		TraceState string          `json:"trace_state"`
		Attrs      json.RawMessage `json:"attributes"`
		Dropped    uint32          `json:"dropped_attributes_count"`
		Flags      uint32          `json:"flags"`
	}
	if js == "" {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(js), &raw); err != nil {
		return nil, fmt.Errorf("read span links: %w", err)
	}
	out := make([]*tracepb.Span_Link, len(raw))
	for i, l := range raw {
		attrs, err := keyValues(string(l.Attrs))
		if err != nil {
			return nil, err
		}
		out[i] = &tracepb.Span_Link{TraceId: idBytes(l.TraceID), SpanId: idBytes(l.SpanID), TraceState: l.TraceState,
			Attributes: attrs, DroppedAttributesCount: l.Dropped, Flags: l.Flags}
	}
	return out, nil
}

// traceJSON is a trace as Tempo's jsonpb writes tempopb.Trace: an object
// whose one field, named field ("batches" in v1, MarshalToJSONV1 in
// pkg/tempopb/trace_utils.go; "resourceSpans" in v2), holds the resource
// spans in protobuf's JSON mapping (ids base64, enums by name, 64-bit
// integers as strings).
func traceJSON(t *tracepb.TracesData, field string) ([]byte, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{%q:[`, field)
	for i, rs := range t.ResourceSpans {
		b, err := protojson.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("marshal trace: %w", err)
		}
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.Write(b)
	}
	sb.WriteString("]}")
	return []byte(sb.String()), nil
}
