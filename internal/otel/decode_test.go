package otel

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/genai"
	"github.com/tracelake/tracelake/internal/prices"
	"github.com/tracelake/tracelake/internal/sink"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)

// sampleTraces is two resources, the second with two spans, and attributes
// of every type.
func sampleTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("tracelake.test")
	ss.Scope().SetVersion("1.2")
	s := ss.Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff})
	s.SetSpanID(pcommon.SpanID{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1})
	s.SetName("chat gpt-4o")
	s.SetKind(ptrace.SpanKindClient)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(1500 * time.Millisecond)))
	s.Status().SetCode(ptrace.StatusCodeError)
	s.Status().SetMessage("rate limited")
	a := s.Attributes()
	a.PutInt("gen_ai.usage.input_tokens", 9007199254740993) // not exact as a float64
	a.PutDouble("gen_ai.request.temperature", 0.7)
	a.PutDouble("nan", math.NaN())
	a.PutBool("stream", true)
	a.PutStr("quote", "say \"hi\"\n\x01")
	a.PutStr("bad_utf8", "a\xffb")
	a.PutEmptySlice("finish_reasons").AppendEmpty().SetStr("stop")
	a.PutEmptyMap("nested").PutInt("n", 1)
	a.PutEmptyBytes("blob").FromRaw([]byte{1, 2, 3})
	ev := s.Events().AppendEmpty()
	ev.SetName("gen_ai.choice")
	ev.SetTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Second)))
	ev.Attributes().PutInt("index", 0)
	ln := s.Links().AppendEmpty()
	ln.SetTraceID(pcommon.TraceID{1})
	ln.SetSpanID(pcommon.SpanID{2})

	rs2 := td.ResourceSpans().AppendEmpty()
	rs2.Resource().Attributes().PutStr("service.name", "tools")
	spans := rs2.ScopeSpans().AppendEmpty().Spans()
	for _, name := range []string{"search", "fetch"} {
		sp := spans.AppendEmpty()
		sp.SetName(name)
		sp.SetTraceID(pcommon.TraceID{0xab, 1})
		sp.SetSpanID(pcommon.SpanID{byte(len(name))})
		sp.SetParentSpanID(pcommon.SpanID{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1})
	}
	return td
}

// decodeRows decodes value and parses each row, numbers kept as written.
func decodeRows(t *testing.T, d *Decoder, r *kgo.Record) []map[string]any {
	t.Helper()
	b := &sink.Batch{Rows: []byte("prefix\n")}
	n, err := d.AppendRows(b, r)
	if err != nil {
		t.Fatal(err)
	}
	out, longest := b.Rows, b.MaxLine
	if !bytes.HasPrefix(out, []byte("prefix\n")) {
		t.Fatal("rows did not append to dst")
	}
	lines := strings.Split(strings.TrimSuffix(string(out[len("prefix\n"):]), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, %d rows reported", len(lines), n)
	}
	var rows []map[string]any
	maxLen := 0
	for _, l := range lines {
		maxLen = max(maxLen, len(l)+1)
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("row is not JSON: %v\n%s", err, l)
		}
		rows = append(rows, m)
	}
	if longest != maxLen {
		t.Errorf("longest line %d, want %d", longest, maxLen)
	}
	return rows
}

func TestSpansFromProtoAndJSONAreTheSameRows(t *testing.T) {
	td := sampleTraces()
	proto, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	js, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]map[string]any
	for enc, value := range map[string][]byte{EncodingProto: proto, EncodingJSON: js} {
		d, err := NewDecoder(SignalTraces, enc, Tenancy{Default: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, decodeRows(t, d, &kgo.Record{Topic: "otlp_spans", Partition: 3, Offset: 42, Value: value}))
	}
	a, _ := json.Marshal(got[0])
	b, _ := json.Marshal(got[1])
	if string(a) != string(b) {
		t.Fatalf("proto and JSON rows differ:\n%s\n%s", a, b)
	}
	rows := got[0]
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	r := rows[0]
	want := map[string]any{
		"tenant_id": "acme", "service_name": "agent", "trace_id": "ab0102030405060708090a0b0c0d0eff",
		"span_id": "deadbeef00000001", "parent_span_id": nil, "name": "chat gpt-4o", "kind": "client",
		"status_code": "error", "status_message": "rate limited", "scope_name": "tracelake.test", "scope_version": "1.2",
		"ktopic": "otlp_spans", "kpartition": json.Number("3"), "koffset": json.Number("42"), "kindex": json.Number("0"),
		"start_time": json.Number("1796040000123456"), "end_time": json.Number("1796040001623456"),
		"duration_ns": json.Number("1500000000"),
	}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %#v, want %#v", k, r[k], v)
		}
	}
	attrs := r["span_attributes"].(map[string]any)
	for k, v := range map[string]any{
		"gen_ai.usage.input_tokens": json.Number("9007199254740993"), "gen_ai.request.temperature": json.Number("0.7"),
		"nan": "NaN", "stream": true, "quote": "say \"hi\"\n\x01", "bad_utf8": "a\uFFFDb", "blob": "AQID",
	} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %#v, want %#v", k, attrs[k], v)
		}
	}
	if fr := attrs["finish_reasons"].([]any); len(fr) != 1 || fr[0] != "stop" {
		t.Errorf("finish_reasons = %v", fr)
	}
	if n := attrs["nested"].(map[string]any)["n"]; n != json.Number("1") {
		t.Errorf("nested.n = %v", n)
	}
	ev := r["events"].([]any)[0].(map[string]any)
	if ev["name"] != "gen_ai.choice" || ev["time"] != "2026-11-30T12:00:01.123456789Z" {
		t.Errorf("event = %v", ev)
	}
	if ln := r["links"].([]any)[0].(map[string]any); ln["trace_id"] != "01000000000000000000000000000000" || ln["span_id"] != "0200000000000000" {
		t.Errorf("link = %v", ln)
	}
	for i, name := range []string{"search", "fetch"} {
		r := rows[i+1]
		if r["name"] != name || r["service_name"] != "tools" || r["parent_span_id"] != "deadbeef00000001" ||
			r["kindex"] != json.Number(string(rune('1'+i))) || r["start_time"] != nil {
			t.Errorf("row %d = %v", i+1, r)
		}
	}
}

func TestLogsKeepTheirBodyAndTimes(t *testing.T) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("service.name", "agent")
	l := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	l.SetTimestamp(pcommon.NewTimestampFromTime(t0))
	l.SetObservedTimestamp(pcommon.NewTimestampFromTime(t0.Add(time.Millisecond)))
	l.SetSeverityNumber(plog.SeverityNumberWarn)
	l.SetSeverityText("WARN")
	l.Body().SetEmptyMap().PutStr("msg", "tool timed out")
	l.SetEventName("gen_ai.tool.message")
	l.SetTraceID(pcommon.TraceID{0xab})
	l.Attributes().PutInt("attempt", 3)
	value, err := (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(SignalLogs, EncodingProto, Tenancy{Header: "tenant", Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	rows := decodeRows(t, d, &kgo.Record{Value: value, Headers: []kgo.RecordHeader{{Key: "Tenant", Value: []byte("team-a")}}})
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	if r["tenant_id"] != "team-a" || r["severity_number"] != json.Number("13") || r["severity_text"] != "WARN" ||
		r["time"] != json.Number("1796040000123456") || r["observed_time"] != json.Number("1796040000124456") ||
		r["event_name"] != "gen_ai.tool.message" || r["trace_id"] != "ab000000000000000000000000000000" || r["span_id"] != nil {
		t.Errorf("row = %v", r)
	}
	if body := r["body"].(map[string]any); body["msg"] != "tool timed out" {
		t.Errorf("body = %v", body)
	}
	if a := r["log_attributes"].(map[string]any); a["attempt"] != json.Number("3") {
		t.Errorf("attributes = %v", a)
	}
}

func TestMessagesThatAreNotOTLPAreRefusedWithTheReason(t *testing.T) {
	td := sampleTraces()
	js, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	d, _ := NewDecoder(SignalTraces, EncodingProto, Tenancy{Header: "tenant", Default: "default"})
	dj, _ := NewDecoder(SignalTraces, EncodingJSON, Tenancy{Default: "default"})
	for _, c := range []struct {
		name string
		d    *Decoder
		r    *kgo.Record
		want string
	}{
		{"JSON sent to the proto decoder", d, &kgo.Record{Value: js}, "not OTLP traces (ExportTraceServiceRequest) in otlp_proto"},
		{"not JSON", dj, &kgo.Record{Value: []byte("{not json")}, "not OTLP traces (ExportTraceServiceRequest) in otlp_json"},
		{"bad tenant", d, &kgo.Record{Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("a/b")}}}, `header tenant: tenant id "a/b" has '/' at byte 1`},
		{"tenant ..", d, &kgo.Record{Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("..")}}}, `tenant id ".." is not allowed`},
	} {
		b := &sink.Batch{Rows: []byte("x"), Derived: []byte("y")}
		n, err := c.d.AppendRows(b, c.r)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		if string(b.Rows) != "x" || string(b.Derived) != "y" || n != 0 {
			t.Errorf("%s: appended %q / %q (%d rows) for a refused message", c.name, b.Rows, b.Derived, n)
		}
	}
	if _, err := NewDecoder(SignalTraces, EncodingProto, Tenancy{Default: strings.Repeat("a", 151)}); err == nil {
		t.Error("a default tenant of 151 bytes was accepted")
	}
}

func TestARepeatedAttributeKeyIsWrittenOnce(t *testing.T) {
	for _, n := range []int{3, 40} { // below and above the small-map path
		// A decoded message can hold a key twice (pdata's Put* replace).
		var b bytes.Buffer
		b.WriteString(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01000000000000000000000000000000","spanId":"0100000000000000","name":"s","attributes":[`)
		for i := range n {
			k := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"key":"` + k + `","value":{"intValue":"1"}},{"key":"` + k + `","value":{"intValue":"2"}}`)
		}
		b.WriteString(`]}]}]}]}`)
		d, _ := NewDecoder(SignalTraces, EncodingJSON, Tenancy{Default: "t"})
		rows := decodeRows(t, d, &kgo.Record{Value: b.Bytes()})
		attrs := rows[0]["span_attributes"].(map[string]any)
		if len(attrs) != n {
			t.Errorf("n=%d: %d attributes, want %d", n, len(attrs), n)
		}
		for k, v := range attrs {
			if v != json.Number("1") {
				t.Errorf("n=%d: %s = %v, want the first value 1", n, k, v)
			}
		}
		// encoding/json keeps the last of repeated keys: count them in the text.
		var line sink.Batch
		_, _ = d.AppendRows(&line, &kgo.Record{Value: b.Bytes()})
		if c := strings.Count(string(line.Rows), `"a":`); c != 1 {
			t.Errorf("n=%d: key a written %d times", n, c)
		}
	}
}

// A GenAI span whose attributes repeat a key (OTLP forbids it; decoders
// keep both) gives the same genai_operations row in its load as in a
// rebuild, which reads the span back from otel_spans, where the key's
// first value is stored (appendMap). The flattened lists (Traceloop's
// gen_ai.prompt.N.content, gen_ai.completion.N.finish_reason) took the
// last value in the load, while every other column takes the first
// (pcommon.Map.Get): a rebuild changed the load's messages and finish
// reasons.
func TestRepeatedAttributeKeyGivesTheRebuildTheLoadsOperation(t *testing.T) {
	msg := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01000000000000000000000000000000","spanId":"0100000000000000",
		"name":"openai.chat","startTimeUnixNano":"1796040000000000000","attributes":[
		{"key":"llm.request.type","value":{"stringValue":"chat"}},
		{"key":"gen_ai.system","value":{"stringValue":"openai"}},
		{"key":"gen_ai.request.model","value":{"stringValue":"gpt-4o"}},
		{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"10"}},
		{"key":"gen_ai.usage.prompt_tokens","value":{"intValue":"99"}},
		{"key":"gen_ai.prompt.0.role","value":{"stringValue":"user"}},
		{"key":"gen_ai.prompt.0.content","value":{"stringValue":"first"}},
		{"key":"gen_ai.prompt.0.content","value":{"stringValue":"second"}},
		{"key":"gen_ai.completion.0.finish_reason","value":{"stringValue":"stop"}},
		{"key":"gen_ai.completion.0.finish_reason","value":{"stringValue":"length"}}]}]}]}]}`
	load := loadAndRebuild(t, msg)
	for _, want := range []string{`"input_tokens":10,`, `"finish_reasons":["stop"]`, `"content":"first"`} {
		if !strings.Contains(load, want) {
			t.Errorf("the load's row lacks %s, the first value of its key:\n%s", want, load)
		}
	}
}

// A span whose marker of a value (the Vercel AI SDK's ai.operationId)
// repeats the key holds its first value, as otel_spans stores it: the
// load made an operation of the span whenever any of the values marked
// it, so that ai.operationId ai.embed (the call around, no operation)
// then ai.embed.doEmbed made one the rebuild does not make again and
// verify reports as a span's that is none.
func TestRepeatedMarkerKeyMarksByItsFirstValue(t *testing.T) {
	for _, c := range []struct {
		first, second string
		operation     bool
	}{{"ai.embed", "ai.embed.doEmbed", false}, {"ai.embed.doEmbed", "ai.embed", true}} {
		msg := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01000000000000000000000000000000","spanId":"0100000000000000",
			"name":"` + c.first + `","startTimeUnixNano":"1796040000000000000","attributes":[
			{"key":"ai.operationId","value":{"stringValue":"` + c.first + `"}},
			{"key":"ai.operationId","value":{"stringValue":"` + c.second + `"}},
			{"key":"ai.model.provider","value":{"stringValue":"openai.embedding"}},
			{"key":"ai.model.id","value":{"stringValue":"text-embedding-3-small"}},
			{"key":"ai.usage.tokens","value":{"intValue":"10"}}]}]}]}]}`
		d, _ := NewDecoder(SignalTraces, EncodingJSON, Tenancy{Default: "t"})
		d.WithGenAI(genai.NewMapper(prices.Embedded(), true))
		var b sink.Batch
		if n, err := d.AppendRows(&b, &kgo.Record{Topic: "k", Value: []byte(msg)}); err != nil || n != 1 {
			t.Fatalf("%d rows, %v", n, err)
		}
		var span struct {
			Name       string          `json:"name"`
			Attributes json.RawMessage `json:"span_attributes"`
		}
		if err := json.Unmarshal(b.Rows, &span); err != nil {
			t.Fatal(err)
		}
		stored, err := MakesOperation(span.Name, span.Attributes)
		if err != nil {
			t.Fatal(err)
		}
		if loaded := len(b.Derived) > 0; loaded != c.operation || stored != c.operation {
			t.Errorf("ai.operationId %s then %s: the load made an operation %v, the span stored (%s) makes one %v; want %v",
				c.first, c.second, loaded, span.Attributes, stored, c.operation)
		}
	}
}

// An attribute of bytes (a model name sent as bytes): the load read it as
// invalid (no model) while otel_spans stores it as its base64 text, which
// the rebuild read as the model: both read it as that text now.
func TestBytesAttributeGivesTheRebuildTheLoadsOperation(t *testing.T) {
	msg := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"01000000000000000000000000000000","spanId":"0100000000000000",
		"name":"chat","startTimeUnixNano":"1796040000000000000","attributes":[
		{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
		{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},
		{"key":"gen_ai.request.model","value":{"bytesValue":"Z3B0LTRv"}},
		{"key":"gen_ai.usage.input_tokens","value":{"intValue":"10"}}]}]}]}]}`
	if load := loadAndRebuild(t, msg); !strings.Contains(load, `"request_model":"Z3B0LTRv"`) {
		t.Errorf("the load's row does not read the bytes as their base64 text, as otel_spans stores them:\n%s", load)
	}
}

// loadAndRebuild decodes msg (one GenAI span, OTLP JSON) as a load does and
// returns its genai_operations row, failing unless the rebuild's reading
// of the stored span gives the same row.
func loadAndRebuild(t *testing.T, msg string) string {
	t.Helper()
	m := genai.NewMapper(prices.Embedded(), true)
	d, _ := NewDecoder(SignalTraces, EncodingJSON, Tenancy{Default: "t"})
	d.WithGenAI(m)
	var b sink.Batch
	if n, err := d.AppendRows(&b, &kgo.Record{Topic: "k", Value: []byte(msg)}); err != nil || n != 1 {
		t.Fatalf("%d rows, %v", n, err)
	}
	var span struct {
		Name       string          `json:"name"`
		Attributes json.RawMessage `json:"span_attributes"`
	}
	if err := json.Unmarshal(b.Rows, &span); err != nil {
		t.Fatal(err)
	}
	// The rebuild's reading of the stored span (cmd/tracelake's
	// writeOperations): its attributes from their JSON.
	attrs, err := AttributesFromJSON(span.Attributes)
	if err != nil {
		t.Fatal(err)
	}
	s := SpanRow{Tenant: "t", Name: span.Name, TraceID: pcommon.TraceID{1}, SpanID: pcommon.SpanID{1},
		Start: 1796040000000000000, NoDuration: true, Attributes: attrs, Topic: "k"}
	rebuilt, ok := AppendOperation(nil, m, &s)
	if !ok {
		t.Fatal("the rebuild read no operation")
	}
	load := strings.TrimSuffix(string(b.Derived), "\n")
	if load != strings.TrimSuffix(string(rebuilt), "\n") {
		t.Errorf("the rebuild's row differs from the load's:\n load    %s\n rebuild %s", load, rebuilt)
	}
	return load
}

// On a topic the signals share (otlp.forward.topic), a loader takes its
// own signal's messages and holds no row of the others'.
func TestOtherSignalsOfASharedTopicAreSkipped(t *testing.T) {
	value, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(sampleTraces())
	// As the receivers forward it: its tenant and its signal in headers.
	traces, _ := NewDecoder(SignalTraces, EncodingProto, Tenancy{Header: "tenant", Default: "d"})
	logs, _ := NewDecoder(SignalLogs, EncodingProto, Tenancy{Header: "tenant", Default: "d"})
	r := &kgo.Record{Value: value, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("t")}, {Key: SignalHeader, Value: []byte(SignalTraces)}}}
	if n, err := traces.AppendRows(&sink.Batch{}, r); err != nil || n != 3 {
		t.Errorf("the traces loader: %d rows, %v", n, err)
	}
	var out sink.Batch
	if n, err := logs.AppendRows(&out, r); err != nil || n != 0 || len(out.Rows) != 0 {
		t.Errorf("the logs loader took a traces message: %d rows, %v", n, err)
	}
	// The receivers name the signals of the message's topic: a loader
	// skips another signal's message only where its own is among them.
	for _, c := range []struct {
		shared   string
		deadLtrs bool
	}{{"traces,logs,metrics", false}, {"traces,logs", false}, {"traces", true}, {"traces,metrics", true}} {
		r.Headers = []kgo.RecordHeader{{Key: SignalHeader, Value: []byte(SignalTraces)}, {Key: TopicSignalsHeader, Value: []byte(c.shared)}}
		n, err := logs.AppendRows(&out, r)
		if n != 0 || len(out.Rows) != 0 || (err != nil) != c.deadLtrs {
			t.Errorf("the logs loader, a traces message of a topic of %s: %d rows, %v; want dead-lettered %v", c.shared, n, err, c.deadLtrs)
		}
		if err != nil && !strings.Contains(err.Error(), "kafka.signal traces") {
			t.Errorf("the reason does not name the kafka.signal to load it with: %v", err)
		}
	}
}

// duration_ns (and a GenAI operation's duration_ms) is null for a span
// without a start or an end, negative for one that ends before it starts,
// and exact or clamped where int64 arithmetic on the timestamps wrapped.
// Before, a span without an end had minus its start as its duration.
func TestSpanDurations(t *testing.T) {
	ts := func(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t0.Add(d)) }
	cases := []struct {
		name       string
		start, end pcommon.Timestamp
		want       any // json.Number, or nil for null
	}{
		{"ended", ts(0), ts(1500 * time.Millisecond), json.Number("1500000000")},
		{"no end", ts(0), 0, nil},
		{"no start", 0, ts(0), nil},
		{"neither", 0, 0, nil},
		{"ends before it starts", ts(time.Second), ts(0), json.Number("-1000000000")},
		{"past int64", 1, math.MaxUint64, json.Number("9223372036854775807")},
		{"past int64 backwards", math.MaxUint64, 1, json.Number("-9223372036854775807")},
		{"ends past 2262", 1 << 62, 1<<63 + 5, json.Number("4611686018427387909")},
	}
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i, c := range cases {
		s := spans.AppendEmpty()
		s.SetTraceID(pcommon.TraceID{1})
		s.SetSpanID(pcommon.SpanID{byte(i + 1)})
		s.SetName("chat gpt-4o")
		s.SetStartTimestamp(c.start)
		s.SetEndTimestamp(c.end)
		s.Attributes().PutStr("gen_ai.operation.name", "chat")
		s.Attributes().PutStr("gen_ai.request.model", "gpt-4o")
	}
	value, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := NewDecoder(SignalTraces, EncodingProto, Tenancy{Default: "t"})
	d.WithGenAI(genai.NewMapper(prices.Embedded(), true))
	b := &sink.Batch{}
	if _, err := d.AppendRows(b, &kgo.Record{Value: value}); err != nil {
		t.Fatal(err)
	}
	rows := parseRows(t, b.Rows)
	ops := parseRows(t, b.Derived)
	if len(rows) != len(cases) || len(ops) != len(cases) {
		t.Fatalf("%d span rows and %d operation rows, want %d of each", len(rows), len(ops), len(cases))
	}
	for i, c := range cases {
		if got := rows[i]["duration_ns"]; got != c.want {
			t.Errorf("%s: duration_ns %v, want %v", c.name, got, c.want)
		}
		got, present := ops[i]["duration_ms"]
		if !present || (got == nil) != (c.want == nil) {
			t.Errorf("%s: the operation's duration_ms is %v (present %t), want null exactly when duration_ns is", c.name, got, present)
		}
	}
}

// parseRows parses NDJSON rows, numbers kept as written.
func parseRows(t *testing.T, ndjson []byte) []map[string]any {
	t.Helper()
	var rows []map[string]any
	dec := json.NewDecoder(bytes.NewReader(ndjson))
	dec.UseNumber()
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("row is not JSON: %v", err)
		}
		rows = append(rows, m)
	}
	return rows
}

// A double attribute reads back a double and an int an int, whole or
// not, in a span's attributes, inside arrays and maps, a log's body and
// a metric's exemplars: the JSON columns keep OTLP's types.
func TestWholeDoublesReadBackAsDoubles(t *testing.T) {
	fill := func(m pcommon.Map) {
		m.PutDouble("d", 2)
		m.PutDouble("zero", 0)
		m.PutDouble("neg_zero", math.Copysign(0, -1))
		m.PutDouble("big", 1e6)
		m.PutDouble("huge", 1e21)
		m.PutDouble("half", 2.5)
		m.PutInt("i", 2)
		arr := m.PutEmptySlice("arr")
		arr.AppendEmpty().SetDouble(2)
		arr.AppendEmpty().SetInt(3)
		m.PutEmptyMap("kv").PutDouble("d", 2)
	}
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	fill(rs.Resource().Attributes())
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID(pcommon.TraceID{1})
	sp.SetSpanID(pcommon.SpanID{1})
	fill(sp.Attributes())
	value, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(SignalTraces, EncodingProto, Tenancy{Default: "a"})
	if err != nil {
		t.Fatal(err)
	}
	var b sink.Batch
	if _, err := d.AppendRows(&b, &kgo.Record{Value: value}); err != nil {
		t.Fatal(err)
	}
	var row map[string]json.RawMessage
	if err := json.Unmarshal(b.Rows, &row); err != nil {
		t.Fatal(err)
	}
	want := pcommon.NewMap()
	fill(want)
	for _, col := range []string{"resource_attributes", "span_attributes"} {
		got, err := AttributesFromJSON(row[col])
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(want) {
			t.Errorf("%s %s read back as %v, want %v", col, row[col], got.AsRaw(), want.AsRaw())
		}
		neg, _ := got.Get("neg_zero")
		if neg.Type() != pcommon.ValueTypeDouble || !math.Signbit(neg.Double()) {
			t.Errorf("%s: -0.0 read back as %s %v", col, neg.Type(), neg.AsRaw())
		}
	}

	// A log's body, a double alone.
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetDouble(2)
	value, err = (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	if err != nil {
		t.Fatal(err)
	}
	if d, err = NewDecoder(SignalLogs, EncodingProto, Tenancy{Default: "a"}); err != nil {
		t.Fatal(err)
	}
	rows := decodeRows(t, d, &kgo.Record{Value: value})
	if body := rows[0]["body"]; body != json.Number("2.0") {
		t.Errorf("a double body 2 written as %#v, want 2.0", body)
	}

	// Exemplars: an as_double 2 and an as_int 2 stay apart.
	md := pmetric.NewMetrics()
	dp := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetDoubleValue(2)
	dp.Exemplars().AppendEmpty().SetDoubleValue(2)
	dp.Exemplars().AppendEmpty().SetIntValue(2)
	value, err = (&pmetric.ProtoMarshaler{}).MarshalMetrics(md)
	if err != nil {
		t.Fatal(err)
	}
	if d, err = NewDecoder(SignalMetrics, EncodingProto, Tenancy{Default: "a"}); err != nil {
		t.Fatal(err)
	}
	rows = decodeRows(t, d, &kgo.Record{Value: value})
	ex := rows[0]["exemplars"].([]any)
	if v0, v1 := ex[0].(map[string]any)["value"], ex[1].(map[string]any)["value"]; v0 != json.Number("2.0") || v1 != json.Number("2") {
		t.Errorf("exemplar values as_double 2 and as_int 2 written as %v and %v, want 2.0 and 2", v0, v1)
	}
	if v, vi := rows[0]["value"], rows[0]["value_int"]; v != json.Number("2.0") || vi != nil {
		t.Errorf("a double point's value %v, value_int %v; want 2.0 and none", v, vi)
	}
}

// A record carrying the tenant header twice (its name in any case: the
// header is matched case-insensitively) is refused, never loaded as the
// first one's tenant, as the receivers refuse X-Scope-OrgID twice; a
// value with whitespace around it is the tenant within, as the receivers
// read it.
func TestSeveralTenantHeadersAreRefused(t *testing.T) {
	value, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(sampleTraces())
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecoder(SignalTraces, EncodingProto, Tenancy{Header: "tenant", Default: "default"})
	if err != nil {
		t.Fatal(err)
	}
	for name, hs := range map[string][]kgo.RecordHeader{
		"two tenants":   {{Key: "tenant", Value: []byte("a")}, {Key: "Tenant", Value: []byte("b")}},
		"one twice":     {{Key: "tenant", Value: []byte("a")}, {Key: "tenant", Value: []byte("a")}},
		"empty, then a": {{Key: "tenant", Value: nil}, {Key: "tenant", Value: []byte("a")}},
	} {
		var b sink.Batch
		n, err := d.AppendRows(&b, &kgo.Record{Value: value, Headers: hs})
		if err == nil || !strings.Contains(err.Error(), "several") {
			t.Errorf("%s: %d rows, err %v; want refused for several tenants", name, n, err)
		}
	}
	rows := decodeRows(t, d, &kgo.Record{Value: value, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(" a ")}}})
	for _, r := range rows {
		if r["tenant_id"] != "a" {
			t.Errorf("tenant header %q: a row of tenant %v, want a", " a ", r["tenant_id"])
		}
	}
}
