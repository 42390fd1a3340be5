package otel

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
)

// operations writes the genai_operations rows of a message's spans.
type operations struct {
	mapper  *genai.Mapper // nil: none are written
	w       row
	longest int
}

// add writes the operation of span s, the index-th row of its message, if
// it is one: with its span's coordinates, so the fence and verify treat
// the two rows as one.
func (o *operations) add(s ptrace.Span, scope pcommon.InstrumentationScope, service string, src source, index int) {
	if o.mapper == nil {
		return
	}
	tid, sid, pid := s.TraceID(), s.SpanID(), s.ParentSpanID()
	d, known := spanDuration(s.StartTimestamp(), s.EndTimestamp())
	sr := SpanRow{
		Tenant: src.tenant, Service: service, Name: s.Name(),
		ScopeName: scope.Name(), ScopeVersion: scope.Version(),
		TraceID: tid, SpanID: sid, ParentSpanID: pid,
		Start:      s.StartTimestamp(),
		DurationNs: d, NoDuration: !known,
		StatusError: s.Status().Code() == ptrace.StatusCodeError,
		Attributes:  s.Attributes(),
		Topic:       src.topic, Partition: src.partition, Offset: src.offset, Index: index,
	}
	start := len(o.w.b)
	var ok bool
	if o.w.b, ok = AppendOperation(o.w.b, o.mapper, &sr); ok {
		o.longest = max(o.longest, len(o.w.b)-start)
	}
}

// SpanRow is what a genai_operations row is made of: a span as decoded,
// or as otel_spans stored it (a rebuild).
type SpanRow struct {
	Tenant, Service, Name   string
	ScopeName, ScopeVersion string
	TraceID                 pcommon.TraceID
	SpanID, ParentSpanID    pcommon.SpanID
	Start                   pcommon.Timestamp
	DurationNs              int64
	NoDuration              bool // the span's duration is unknown (spanDuration)
	StatusError             bool
	Attributes              pcommon.Map
	Topic                   string
	Partition               int32
	Offset                  int64
	Index                   int
}

// AppendOperation appends the genai_operations row of s to dst as one
// NDJSON line, if m reads an operation in it.
func AppendOperation(dst []byte, m *genai.Mapper, s *SpanRow) ([]byte, bool) {
	gs := genai.Span{
		Name: s.Name, Attributes: s.Attributes, StatusError: s.StatusError, Start: s.Start.AsTime(),
		ScopeName: s.ScopeName, ScopeVersion: s.ScopeVersion,
	}
	op, ok := m.Map(&gs)
	if !ok {
		return dst, false
	}
	w := row{b: dst}
	w.begin()
	w.str("tenant_id", s.Tenant)
	w.id("trace_id", s.TraceID[:])
	w.id("span_id", s.SpanID[:])
	w.id("parent_span_id", s.ParentSpanID[:])
	w.time("start_time", s.Start)
	if s.NoDuration {
		w.null("duration_ms")
	} else {
		w.float("duration_ms", float64(s.DurationNs)/1e6)
	}
	w.str("service_name", s.Service)
	w.str("span_name", s.Name)
	op.WriteValues(&opValues{w: &w})
	w.coordinates(source{topic: s.Topic, partition: s.Partition, offset: s.Offset, tenant: s.Tenant}, s.Index)
	w.end()
	return w.b, true
}

// opValues writes an operation's values (genai.ValueWriter) as the
// row's fields, named by genai.Columns: "", nil and empty decimals as
// null, JSON compacted to one line (an attribute's JSON may span many).
type opValues struct {
	w *row
	i int // the column of the next value
}

// next writes the next column's key; false, with null written, for a
// null value.
func (o *opValues) next(null bool) bool {
	o.w.key(genai.Columns[o.i].Name)
	o.i++
	if null {
		o.w.b = append(o.w.b, "null"...)
	}
	return !null
}

func (o *opValues) Text(s string) {
	if o.next(s == "") {
		o.w.b = appendText(o.w.b, s)
	}
}

func (o *opValues) Cost(pico int64, ok bool) {
	if o.next(!ok) {
		o.w.b = append(prices.AppendDecimal(append(o.w.b, '"'), pico), '"')
	}
}

func (o *opValues) Int(v *int64) {
	if o.next(v == nil) {
		o.w.b = strconv.AppendInt(o.w.b, *v, 10)
	}
}

func (o *opValues) Float(v *float64) {
	if o.next(v == nil) {
		o.w.b = appendDouble(o.w.b, *v)
	}
}

func (o *opValues) Texts(v []string) {
	if !o.next(v == nil) {
		return
	}
	o.w.b = append(o.w.b, '[')
	for i, s := range v {
		if i > 0 {
			o.w.b = append(o.w.b, ',')
		}
		o.w.b = appendText(o.w.b, s)
	}
	o.w.b = append(o.w.b, ']')
}

func (o *opValues) JSON(v []byte) {
	if !o.next(v == nil) {
		return
	}
	var buf bytes.Buffer
	if utf8.Valid(v) && json.Compact(&buf, v) == nil {
		o.w.b = append(o.w.b, buf.Bytes()...)
	} else {
		o.w.b = appendText(o.w.b, string(v)) // kept, as a JSON string
	}
}

// MakesOperation reports whether a span stored with name and attributes
// attrs (its span_attributes, a JSON object) makes a genai_operations row:
// genai.Convention on the attributes as a rebuild reads them. A span
// whose attributes name none of the markers (or none of a valued
// marker's values) is told without parsing them (the decoder writes keys
// and strings as they are: these have nothing to escape): the Vercel AI
// SDK's spans all carry ai.operationId, few of them a marking one.
func MakesOperation(name string, attrs []byte) (bool, error) {
	if strings.HasPrefix(name, genai.ClaudeCodePrefix) {
		return true, nil
	}
	if !slices.ContainsFunc(operationMarkers, func(m genai.Marker) bool { return mayMark(attrs, m) }) {
		return false, nil
	}
	m, err := AttributesFromJSON(attrs)
	if err != nil {
		return false, err
	}
	return genai.Convention(&genai.Span{Name: name, Attributes: m}) != "", nil
}

// operationMarkers are genai.OperationMarkers, read once: MakesOperation
// runs on every span verify scans.
var operationMarkers = genai.OperationMarkers()

// mayMark reports whether the JSON object attrs may hold marker m: its
// name, and one of its values if it has any, are in the text.
func mayMark(attrs []byte, m genai.Marker) bool {
	if !bytes.Contains(attrs, []byte(`"`+m.Attr+`"`)) {
		return false
	}
	return m.Values == nil || slices.ContainsFunc(m.Values, func(v string) bool {
		return bytes.Contains(attrs, []byte(`"`+v+`"`))
	})
}
