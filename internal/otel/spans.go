package otel

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// appendSpans writes one row of Spans per span, and a row of
// genai_operations of each GenAI span to ops; it returns the rows and the
// longest line.
func appendSpans(w *row, td ptrace.Traces, src source, frags *fragments, ops *operations) (rows, longest int) {
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		resMark := frags.mark()
		res := rs.Resource().Attributes()
		service := serviceName(res)
		resJSON, rowHead := frags.attributes(res), frags.head(src.tenant, service)
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			ss := sss.At(j)
			spans := ss.Spans()
			if spans.Len() == 0 {
				continue // no row copies its fragment
			}
			scopeMark := frags.mark()
			scope := frags.scope(resJSON, ss.Scope())
			for k := range spans.Len() {
				if w.full() {
					return rows, longest
				}
				s := spans.At(k)
				start := len(w.b)
				w.beginWith(rowHead)
				tid, sid, pid := s.TraceID(), s.SpanID(), s.ParentSpanID()
				w.id("trace_id", tid[:])
				w.id("span_id", sid[:])
				w.id("parent_span_id", pid[:])
				w.str("trace_state", s.TraceState().AsRaw())
				w.str("name", s.Name())
				w.str("kind", spanKind(s.Kind()))
				w.str("status_code", statusCode(s.Status().Code()))
				w.str("status_message", s.Status().Message())
				w.time("start_time", s.StartTimestamp())
				w.time("end_time", s.EndTimestamp())
				if d, ok := spanDuration(s.StartTimestamp(), s.EndTimestamp()); ok {
					w.int("duration_ns", d)
				} else {
					w.null("duration_ns")
				}
				w.fragment(scope)
				w.attrs("span_attributes", s.Attributes())
				w.key("events")
				w.b = appendEvents(w.b, s.Events())
				w.key("links")
				w.b = appendLinks(w.b, s.Links())
				w.int("dropped_attributes_count", int64(s.DroppedAttributesCount()))
				w.int("dropped_events_count", int64(s.DroppedEventsCount()))
				w.int("dropped_links_count", int64(s.DroppedLinksCount()))
				w.int("flags", int64(s.Flags()))
				w.nanos("start_time_unix_nano", s.StartTimestamp())
				w.coordinates(src, rows)
				w.end()
				ops.add(s, ss.Scope(), service, src, rows)
				rows++
				longest = max(longest, len(w.b)-start)
			}
			frags.drop(scopeMark)
		}
		frags.drop(resMark)
	}
	return rows, longest
}

// serviceName is the resource's service.name, "" without one.
func serviceName(res pcommon.Map) string {
	if v, ok := res.Get("service.name"); ok {
		return v.AsString()
	}
	return ""
}

func spanKind(k ptrace.SpanKind) string {
	switch k {
	case ptrace.SpanKindInternal:
		return "internal"
	case ptrace.SpanKindServer:
		return "server"
	case ptrace.SpanKindClient:
		return "client"
	case ptrace.SpanKindProducer:
		return "producer"
	case ptrace.SpanKindConsumer:
		return "consumer"
	default:
		return "unspecified"
	}
}

func statusCode(c ptrace.StatusCode) string {
	switch c {
	case ptrace.StatusCodeOk:
		return "ok"
	case ptrace.StatusCodeError:
		return "error"
	default:
		return "unset"
	}
}

// appendEvents writes span events as a JSON array of
// {time, name, attributes, dropped_attributes_count}.
func appendEvents(dst []byte, events ptrace.SpanEventSlice) []byte {
	dst = append(dst, '[')
	for i := range events.Len() {
		e := events.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		w := row{b: dst}
		w.begin()
		w.key("time")
		w.b = appendTime(w.b, e.Timestamp())
		w.str("name", e.Name())
		w.attrs("attributes", e.Attributes())
		w.int("dropped_attributes_count", int64(e.DroppedAttributesCount()))
		dst = append(w.b, '}')
	}
	return append(dst, ']')
}

// appendLinks writes span links as a JSON array of {trace_id, span_id,
// trace_state, attributes, dropped_attributes_count, flags}.
func appendLinks(dst []byte, links ptrace.SpanLinkSlice) []byte {
	dst = append(dst, '[')
	for i := range links.Len() {
		l := links.At(i)
		if i > 0 {
			dst = append(dst, ',')
		}
		w := row{b: dst}
		w.begin()
		tid, sid := l.TraceID(), l.SpanID()
		w.id("trace_id", tid[:])
		w.id("span_id", sid[:])
		w.str("trace_state", l.TraceState().AsRaw())
		w.attrs("attributes", l.Attributes())
		w.int("dropped_attributes_count", int64(l.DroppedAttributesCount()))
		w.int("flags", int64(l.Flags()))
		dst = append(w.b, '}')
	}
	return append(dst, ']')
}
