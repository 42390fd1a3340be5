package otel

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
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

// appendTime writes a span event's (or an exemplar's) time (uint64
// nanoseconds) exact to the nanosecond, as sent: the Tempo API answers an
// event's time from it, and Tempo answers it as sent (it was cut to the
// microsecond). Also past int64's 2262, where converting to a time.Time
// wrapped to before 1970; unset is null. (envelope.AppendUTC is tested
// against the time package.)
func TestAppendTime(t *testing.T) {
	for ns, want := range map[uint64]string{
		0:                         "null",
		1_999:                     `"1970-01-01T00:00:00.000001999Z"`,
		1_764_633_600_123_456_789: `"2025-12-02T00:00:00.123456789Z"`,
		math.MaxInt64 + 1:         `"2262-04-11T23:47:16.854775808Z"`,
		math.MaxUint64:            `"2554-07-21T23:34:33.709551615Z"`,
	} {
		if got := string(appendTime(nil, pcommon.Timestamp(ns))); got != want {
			t.Errorf("%d ns: %s, want %s", ns, got, want)
		}
	}
}

// A double is written with a fraction or an exponent, whole or not, as
// DuckDB's JSON stores it (yyjson: read_ndjson of each value into a JSON
// column printed these texts), so that no reader takes it for an int
// and the text is the same on every sink.
func TestDoublesAreWrittenWithAFractionOrAnExponent(t *testing.T) {
	for f, want := range map[float64]string{
		2:                     "2.0",
		0:                     "0.0",
		-7:                    "-7.0",
		0.7:                   "0.7",
		123456.789:            "123456.789",
		1e6:                   "1000000.0",
		1e20:                  "100000000000000000000.0",
		1.2345678901234567e19: "12345678901234567000.0",
		1e21:                  "1e21",
		-1.5e21:               "-1.5e21",
		0.000001:              "0.000001",
		1e-7:                  "1e-7",
		1.23e-7:               "1.23e-7",
		5e-324:                "5e-324",
		math.MaxFloat64:       "1.7976931348623157e308",
		math.Inf(1):           `"Infinity"`,
		math.Inf(-1):          `"-Infinity"`,
	} {
		if got := string(appendDouble([]byte("x"), f)); got != "x"+want {
			t.Errorf("%v written as %s, want %s", f, got[1:], want)
		}
	}
	if got := string(appendDouble(nil, math.Copysign(0, -1))); got != "-0.0" {
		t.Errorf("-0 written as %s, want -0.0", got)
	}
}
