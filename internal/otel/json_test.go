package otel

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

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

// appendTime writes what the time package's layout writes for the same
// instant: around day boundaries, leap days and the century rules, and at
// random instants up to the largest (timestamps are uint64 nanoseconds,
// past int64's 2262).
func TestAppendTimeIsRFC3339Micro(t *testing.T) {
	cases := []uint64{1, 999, 1000, 86_399_999_999_999, 86_400_000_000_000, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}
	for _, day := range []string{"1970-01-02", "1972-02-29", "1999-12-31", "2000-02-29", "2000-03-01", "2024-02-29",
		"2100-02-28", "2100-03-01", "2262-04-12", "2400-02-29", "2554-07-21"} {
		d, err := time.Parse(time.DateOnly, day)
		if err != nil {
			t.Fatal(err)
		}
		ns := uint64(d.Unix()) * 1e9
		cases = append(cases, ns, ns-1, ns+123_456_789)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		cases = append(cases, r.Uint64()|1)
	}
	for _, ns := range cases {
		want := `"` + time.Unix(int64(ns/1e9), int64(ns%1e9)).UTC().Format("2006-01-02T15:04:05.000000Z") + `"`
		if got := string(appendTime(nil, pcommon.Timestamp(ns))); got != want {
			t.Fatalf("%d ns: %s, want %s", ns, got, want)
		}
	}
	if got := string(appendTime([]byte("x"), 0)); got != "xnull" {
		t.Errorf("unset time: %s, want null", got)
	}
}
