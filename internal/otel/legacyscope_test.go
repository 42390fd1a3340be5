package otel

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// PrepareJSON gives old scope lists today's names where pdata would read
// them, leaves them out of a resource with today's scopes (as pdata's
// protobuf decoding does with field 1000), and leaves every other body,
// and every string that is not such a key, as it is.
func TestPrepareJSONRenamesLegacyScopes(t *testing.T) {
	f := func(signal, in, want string) {
		t.Helper()
		got, err := PrepareJSON(signal, []byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(got) != want {
			t.Errorf("%s:\ngot  %s\nwant %s", in, got, want)
		}
	}
	same := func(signal, in string) { t.Helper(); f(signal, in, in) }

	same(SignalTraces, `{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"l"},"spans":[{"name":"instrumentationLibrarySpans"}]}]}]}`)
	same(SignalTraces, ` {"resourceSpans":[{"scopeSpans":[]}]} `)
	// Old names in values, not keys, or out of place: the body is read as it came.
	same(SignalTraces, `{"resourceSpans":[{"resource":{"attributes":[{"key":"instrumentationLibrary","value":{"stringValue":"\"instrumentationLibrarySpans\":"}}]}}]}`)
	same(SignalTraces, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"instrumentationLibrary":1}]}]}]}`)
	// Not an object of that shape: left to pdata.
	same(SignalTraces, `[{"instrumentationLibrarySpans":[]}]`)
	same(SignalTraces, `{"resourceSpans":[{"instrumentationLibrarySpans":[{"instrumentationLibrary":{}}]`)
	same(SignalTraces, `{"resourceSpans":[{"instrumentationLibrarySpans" [{}]}]}`)

	f(SignalTraces, "{ \"resourceSpans\" : [ { \"resource\" : {} , \"instrumentationLibrarySpans\" : [ { \"instrumentationLibrary\" : {\"name\":\"l\"} , \"spans\" : [] } ] } ] }\n",
		`{"resourceSpans" : [{"resource" : {},"scopeSpans":[{"scope" : {"name":"l"},"spans" : []}]}]}`)
	f(SignalTraces, `{"resource_spans":[{"instrumentation_library_spans":[{"instrumentation_library":{"name":"l"}}]}]}`,
		`{"resource_spans":[{"scopeSpans":[{"scope":{"name":"l"}}]}]}`)
	f(SignalLogs, `{"resourceLogs":[{"instrumentationLibraryLogs":[{"instrumentationLibrary":{"name":"l"},"logRecords":[]}]}]}`,
		`{"resourceLogs":[{"scopeLogs":[{"scope":{"name":"l"},"logRecords":[]}]}]}`)
	f(SignalMetrics, `{"resourceMetrics":[{"instrumentationLibraryMetrics":[{"instrumentationLibrary":{"name":"l"},"metrics":[]}]}]}`,
		`{"resourceMetrics":[{"scopeMetrics":[{"scope":{"name":"l"},"metrics":[]}]}]}`)
	// Another signal's old names are not this signal's.
	same(SignalTraces, `{"resourceSpans":[{"instrumentationLibraryLogs":[{"instrumentationLibrary":{}}]}]}`)

	// Both names on one resource: today's scopes win; an empty list of
	// them does not (pdata: used when today's hold none).
	f(SignalTraces, `{"resourceSpans":[{"instrumentationLibrarySpans":[{"instrumentationLibrary":{"name":"old"}}],"scopeSpans":[{"scope":{"name":"new"}}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"new"}}]}]}`)
	f(SignalTraces, `{"resourceSpans":[{"scopeSpans":[],"instrumentationLibrarySpans":[{"instrumentationLibrary":{"name":"old"}}]}]}`,
		`{"resourceSpans":[{"scopeSpans":[],"scopeSpans":[{"scope":{"name":"old"}}]}]}`)
	// A null list is no list (withoutNulls leaves it out); a string
	// null is kept.
	f(SignalTraces, `{"resourceSpans":[{"instrumentationLibrarySpans":null},{"instrumentationLibrarySpans":[{}, 7]}]}`,
		`{"resourceSpans":[{},{"scopeSpans":[{},7]}]}`)
	same(SignalTraces, `{"resourceSpans":[{"resource":{"attributes":[{"key":"null","value":{"stringValue":"null"}}]}}]}`)

	if _, err := PrepareJSON(SignalTraces, []byte(`{"resourceSpans":[{"instrumentationLibrarySpans":[]}]} {}`)); err == nil {
		t.Error("a second value after the request was not refused")
	}
}

// pdata reads a key with escapes (\u0053 for S) as the key it spells: so
// must PrepareJSON. A double-publishing sender's resource with today's
// scopes under an escaped key and the old copy stored every span twice
// (the old copy renamed beside today's, both read); an old request whose
// resource list or scope key was escaped stored no span, or its spans
// without their scope.
func TestPrepareJSONReadsEscapedKeysAsPdataDoes(t *testing.T) {
	spans := func(in string) (n int, scope string) {
		t.Helper()
		b, err := PrepareJSON(SignalTraces, []byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalJSON(b); err != nil {
			t.Fatalf("%s: read as %s: %v", in, b, err)
		}
		rs := req.Traces().ResourceSpans()
		if rs.Len() > 0 && rs.At(0).ScopeSpans().Len() > 0 {
			scope = rs.At(0).ScopeSpans().At(0).Scope().Name()
		}
		return req.Traces().SpanCount(), scope
	}
	for _, c := range []struct {
		in    string
		spans int
		scope string
	}{
		{`{"resourceSpans":[{"scope\u0053pans":[{"scope":{"name":"new"},"spans":[{"name":"a"}]}],` +
			`"instrumentationLibrarySpans":[{"instrumentationLibrary":{"name":"old"},"spans":[{"name":"a"}]}]}]}`, 1, "new"},
		{`{"resource\u0053pans":[{"instrumentationLibrarySpans":[{"instrumentationLibrary":{"name":"old"},"spans":[{"name":"a"}]}]}]}`, 1, "old"},
		{`{"resourceSpans":[{"instrumentation\u004cibrarySpans":[{"instrumentationLibrary":{"name":"old"},"spans":[{"name":"a"}]}]}]}`, 1, "old"},
		{`{"resourceSpans":[{"instrumentationLibrarySpans":[{"instrumentation\u004Cibrary":{"name":"old"},"spans":[{"name":"a"}]}]}]}`, 1, "old"},
		// Every old name escaped: no name's common start to find.
		{`{"resourceSpans":[{"instrumentation\u004cibrarySpans":[{"instrumentation\u004cibrary":{"name":"old"},"spans":[{"name":"a"}]}]}]}`, 1, "old"},
	} {
		if n, scope := spans(c.in); n != c.spans || scope != c.scope {
			t.Errorf("%s: %d spans, scope %q; want %d, %q", c.in, n, scope, c.spans, c.scope)
		}
	}
}
