package otlp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracelake/tracelake/internal/otel"
	"github.com/tracelake/tracelake/internal/sink"
)

// legacyRequest is one signal's OTLP/JSON export request in today's
// layout (two resources, one scope each, two items per scope) and the JSON
// names of its resource and scope levels.
type legacyRequest struct {
	signal, path string
	current      []byte
	// resources, scopes: today's names (resourceSpans, scopeSpans);
	// legacy is the scope level's name before OTLP 0.19
	// (instrumentationLibrarySpans) and legacySnake its proto field name.
	resources, scopes, legacy, legacySnake string
}

func legacyRequests(t *testing.T) []legacyRequest {
	t.Helper()
	scope := func(s pcommon.InstrumentationScope, r int) {
		s.SetName("lib")
		s.SetVersion("1.2")
		s.Attributes().PutInt("r", int64(r))
	}
	td := ptrace.NewTraces()
	ld := plog.NewLogs()
	md := pmetric.NewMetrics()
	for r := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", string(rune('a'+r)))
		ss := rs.ScopeSpans().AppendEmpty()
		scope(ss.Scope(), r)
		rl := ld.ResourceLogs().AppendEmpty()
		rl.Resource().Attributes().PutStr("service.name", string(rune('a'+r)))
		sl := rl.ScopeLogs().AppendEmpty()
		scope(sl.Scope(), r)
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("service.name", string(rune('a'+r)))
		sm := rm.ScopeMetrics().AppendEmpty()
		scope(sm.Scope(), r)
		for i := range 2 {
			s := ss.Spans().AppendEmpty()
			s.SetName("op")
			s.SetTraceID([16]byte{1, byte(r)})
			s.SetSpanID([8]byte{byte(r), byte(i + 1)})
			sl.LogRecords().AppendEmpty().Body().SetStr(string(rune('p' + 2*r + i)))
			g := sm.Metrics().AppendEmpty()
			g.SetName("queue_depth")
			g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(int64(10*r + i))
		}
	}
	marshal := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []legacyRequest{
		{Traces, "/v1/traces", marshal(ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()),
			"resourceSpans", "scopeSpans", "instrumentationLibrarySpans", "instrumentation_library_spans"},
		{Logs, "/v1/logs", marshal(plogotlp.NewExportRequestFromLogs(ld).MarshalJSON()),
			"resourceLogs", "scopeLogs", "instrumentationLibraryLogs", "instrumentation_library_logs"},
		{Metrics, "/v1/metrics", marshal(pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()),
			"resourceMetrics", "scopeMetrics", "instrumentationLibraryMetrics", "instrumentation_library_metrics"},
	}
}

// The layouts of one resource in a request from a sender older than OTLP
// 0.19.
const (
	layoutCurrent = "current"     // scopeSpans with scope
	layoutLegacy  = "legacy"      // instrumentationLibrarySpans with instrumentationLibrary
	layoutSnake   = "legacySnake" // instrumentation_library_spans with instrumentation_library
	// layoutBoth: both, with the same scopes: a JSON sender of OTLP 0.15
	// to 0.18 may double-publish so (opentelemetry-proto v0.18.0,
	// trace.proto on instrumentation_library_spans: "JSON receivers …
	// If scope_spans is set then instrumentation_library_spans field
	// SHOULD be ignored"), as pdata's protobuf decoding does for the
	// deprecated field 1000 (otlp.MigrateTraces).
	layoutBoth = "both"
)

// legacyCases are the bodies a sender older than OTLP 0.19 may send, by
// the layout of each of the two resources: each must load the rows of the
// request in today's layout.
var legacyCases = map[string][2]string{
	"old names":                             {layoutLegacy, layoutLegacy},
	"old names as proto fields":             {layoutSnake, layoutSnake},
	"old and today's names in one body":     {layoutLegacy, layoutCurrent},
	"both names on a resource, same scopes": {layoutBoth, layoutLegacy},
}

// withLayouts rewrites req's JSON so that resource i has layouts[i].
func (req legacyRequest) withLayouts(t *testing.T, layouts [2]string) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(req.current))
	dec.UseNumber()
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		t.Fatal(err)
	}
	resources := body[req.resources].([]any)
	if len(resources) != len(layouts) {
		t.Fatalf("%d resources, want %d", len(resources), len(layouts))
	}
	legacyScopes := func(scopes []any, scopeKey string) []any {
		var out []any
		for _, s := range scopes {
			old := map[string]any{}
			for k, v := range s.(map[string]any) {
				if k == "scope" {
					k = scopeKey
				}
				old[k] = v
			}
			out = append(out, old)
		}
		return out
	}
	for i, layout := range layouts {
		res := resources[i].(map[string]any)
		scopes := res[req.scopes].([]any)
		switch layout {
		case layoutLegacy, layoutBoth:
			res[req.legacy] = legacyScopes(scopes, "instrumentationLibrary")
		case layoutSnake:
			res[req.legacySnake] = legacyScopes(scopes, "instrumentation_library")
		}
		if layout == layoutLegacy || layout == layoutSnake {
			delete(res, req.scopes)
		}
	}
	out, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rowsOfMessage is the rows the loaders of a Kafka topic in encoding make
// of one message of signal.
func rowsOfMessage(t *testing.T, signal, encoding string, msg []byte) []byte {
	t.Helper()
	dec, err := otel.NewDecoder(signal, encoding, otel.Tenancy{Header: "tenant", Default: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var b sink.Batch
	if _, err := dec.AppendRows(&b, &kgo.Record{Value: msg, Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte("team-a")}}}); err != nil {
		t.Fatal(err)
	}
	return b.Rows
}

// An otlp_json message from a sender older than OTLP 0.19 names the scope
// level instrumentationLibrarySpans (…Logs, …Metrics) with
// instrumentationLibrary inside. pdata's JSON unmarshaler ignores those
// keys: the message decoded to no row and no dead letter, and the Kafka
// offset was committed past it, its spans lost. It must load the rows of
// the same request in today's layout, as the protobuf message with its
// scopes in the deprecated field 1000 does (TestDeprecatedScopeFieldRequestIsStored).
func TestKafkaJSONMessageWithOldScopeNamesIsStored(t *testing.T) {
	for _, req := range legacyRequests(t) {
		want := rowsOfMessage(t, req.signal, otel.EncodingJSON, req.current)
		if n := bytes.Count(want, []byte("\n")); n != 4 {
			t.Fatalf("%s: the request in today's layout makes %d rows, want 4", req.signal, n)
		}
		for name, layouts := range legacyCases {
			msg := req.withLayouts(t, layouts)
			if rows := rowsOfMessage(t, req.signal, otel.EncodingJSON, msg); !bytes.Equal(rows, want) {
				t.Errorf("%s, %s: the message loads as %d rows:\n%s\nwant %d:\n%s\nmessage: %s",
					req.signal, name, bytes.Count(rows, []byte("\n")), rows, 4, want, msg)
			}
		}
	}
}

// An OTLP/HTTP JSON request from a sender older than OTLP 0.19 (scopes
// under instrumentationLibrarySpans, …) was read by pdata's JSON
// unmarshaler, which skips those keys: it counted no item and was answered
// 200 as an empty request, nothing forwarded, its client told every span
// was stored. It must be forwarded as the same request in today's layout
// is: the loaders of the forward topic make the same rows of it.
func TestHTTPJSONRequestWithOldScopeNamesIsForwarded(t *testing.T) {
	fwd := &forwarded{}
	r := start(t, fwd, func(o *Options) { o.Signals = []string{Traces, Logs, Metrics} })
	forward := func(req legacyRequest, body []byte) []byte {
		t.Helper()
		before := len(fwd.stored())
		resp, out := post(t, r, req.path, contentJSON, "", body, map[string]string{"X-Scope-OrgID": "team-a"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", req.signal, resp.StatusCode, out)
		}
		got := fwd.stored()[before:]
		if len(got) != 1 {
			t.Errorf("%s: answered 200 with %d forwards, want 1: %s", req.signal, len(got), body)
			return nil
		}
		return rowsOfMessage(t, req.signal, otel.EncodingProto, got[0].body)
	}
	for _, req := range legacyRequests(t) {
		want := forward(req, req.current)
		if n := bytes.Count(want, []byte("\n")); n != 4 {
			t.Fatalf("%s: the request in today's layout is forwarded as %d rows, want 4", req.signal, n)
		}
		for name, layouts := range legacyCases {
			body := req.withLayouts(t, layouts)
			if rows := forward(req, body); rows != nil && !bytes.Equal(rows, want) {
				t.Errorf("%s, %s: the acknowledged request loads as %d rows:\n%s\nwant %d:\n%s\nrequest: %s",
					req.signal, name, bytes.Count(rows, []byte("\n")), rows, 4, want, body)
			}
		}
	}
}
