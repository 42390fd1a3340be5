package otlp

import (
	"bytes"
	"net/http"
	"testing"
)

// An OTLP/JSON body is one export request. pdata's JSON unmarshaler reads
// the body's first JSON value and ignores whatever follows it, so a body
// of two requests (a client or proxy concatenating them), or one followed
// by garbage (a body corrupted in transit), was answered 200 with an empty
// partial_success, a full success, and only the first request's spans
// were forwarded: the second's were lost, and its client, told they were
// stored, never sent them again. Such a body is not valid JSON (RFC 8259:
// one value): 400, nothing forwarded. Whitespace after the request is
// JSON's own and stays accepted.
func TestJSONBodyWithMoreAfterItsRequestIsRefused(t *testing.T) {
	fwd := &forwarded{}
	r := start(t, fwd, nil)
	_, first := traceRequest(t, 2)
	second := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"05000000000000000000000000000000","spanId":"0500000000000000","name":"second"}]}]}]}`)
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for name, body := range map[string][]byte{
		"two requests":            join(first, second),
		"two requests, a newline": join(first, []byte("\n"), second),
		"garbage":                 join(first, []byte(" garbage")),
		"a stray bracket":         join(first, []byte("]")),
		"a request after null":    join([]byte("null"), second),
	} {
		before := len(fwd.stored())
		resp, out := post(t, r, "/v1/traces", contentJSON, "", body, nil)
		got := fwd.stored()[before:]
		if resp.StatusCode != http.StatusBadRequest || len(got) != 0 {
			t.Errorf("%s: answered %d %s, %d spans forwarded; want 400 and none: the body is not one export request",
				name, resp.StatusCode, out, len(rowsOf(t, got)))
		}
	}
	before := len(fwd.stored())
	if resp, out := post(t, r, "/v1/traces", contentJSON, "", join(first, []byte(" \r\n\t")), nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a request followed by whitespace: answered %d %s, want 200", resp.StatusCode, out)
	}
	if rows := rowsOf(t, fwd.stored()[before:]); len(rows) != 2 {
		t.Errorf("a request followed by whitespace: %d spans forwarded, want 2", len(rows))
	}
}
