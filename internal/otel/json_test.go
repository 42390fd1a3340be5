package otel

import (
	"encoding/json"
	"strings"
	"testing"
)

// appendText writes every string as a JSON string that reads back as the
// string (invalid UTF-8 as U+FFFD), whether it takes the plain-ASCII path
// or the escaping one.
func TestAppendTextReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain text", "gen_ai.usage.input_tokens", `say "hi"`, `back\slash`, "tab\there",
		"line\nbreak", "\x00\x1f", "del\x7f", "héllo ✓", "a\xffb", "plain then \xc3", "😀 emoji", strings.Repeat("x", 300) + "\""} {
		out := appendText([]byte("prefix"), s)
		if !strings.HasPrefix(string(out), "prefix") {
			t.Fatalf("%q: the buffer's start was overwritten: %q", s, out)
		}
		var got string
		if err := json.Unmarshal(out[len("prefix"):], &got); err != nil {
			t.Fatalf("%q: not a JSON string: %s (%v)", s, out, err)
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); got != want {
			t.Errorf("%q read back as %q, want %q", s, got, want)
		}
	}
}
