package otel

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Leaving a null member out must not make an invalid request valid: a key
// pdata refuses (a bad escape, a control character) was a 400.
func TestPrepareJSONNullMemberWithInvalidKeyStillRefused(t *testing.T) {
	for _, body := range []string{
		`{"resourceSpans":[],"bad\q":null}`,
		"{\"resourceSpans\":[],\"bad\x01\":null}",
	} {
		if _, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(body)); err == nil {
			t.Fatalf("pdata takes %q", body)
		}
		if _, err := (jsonTraces{}).UnmarshalTraces([]byte(body)); err == nil {
			t.Errorf("%q is invalid JSON, refused before, taken now", body)
		}
	}
}
