package logql

import (
	"context"
	"regexp"
	"testing"
	"time"
)

// huntLine runs a log query over one entry with line and answers the
// line the pipeline made of it ("" when dropped).
func huntLine(t *testing.T, q, line string) string {
	t.Helper()
	e, err := Parse(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	src := entries{{TS: 1 * sec, Line: line, Stream: app("a")}}
	res, err := Eval(context.Background(), src, e, Params{Start: 0, End: 10 * sec, Limit: 100, Step: time.Second})
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	for _, s := range res.Streams {
		for _, en := range s.Entries {
			return en.Line
		}
	}
	return ""
}

// TestHuntTemplateTitleAndAlign: line_format's title is sprig's, which
// is strings.Title (a capital after every non-letter, spacing kept), and
// alignLeft/alignRight count characters, not bytes (Loki
// pkg/logql/log/fmt.go alignLeft, alignRight on []rune).
func TestHuntTemplateTitleAndAlign(t *testing.T) {
	for tmpl, want := range map[string]string{
		`{{ title "hello-world  foo" }}`: "Hello-World  Foo", // strings.Title("hello-world  foo")
		`{{ title "élan vital" }}`:       "Élan Vital",
		`{{ alignLeft 3 "héllo" }}`:      "hél",
		`{{ alignRight 4 "héllo" }}`:     "éllo",
		`{{ alignLeft 6 "hé" }}`:         "hé    ",
	} {
		q := "{app=\"a\"} | line_format `" + tmpl + "`"
		if got := huntLine(t, q, "x"); got != want {
			t.Errorf("%s: %q, want %q", tmpl, got, want)
		}
	}
}

// lokiANSI is Loki's decolorize pattern (pkg/logql/log/fmt.go
// ansiPattern, from acarl005/stripansi).
var lokiANSI = regexp.MustCompile("[\u001B\u009B][[\\]()#;?]*(?:(?:(?:[a-zA-Z\\d]*(?:;[a-zA-Z\\d]*)*)?\u0007)|(?:(?:\\d{1,4}(?:;\\d{0,4})*)?[\\dA-PRZcf-ntqry=><~]))")

// TestHuntDecolorizeAsLoki: decolorize removes what Loki's pattern
// removes: private-mode CSI sequences (ESC[?25l, cursor hiding, as a
// progress bar writes them) and OSC titles (ESC]0;…BEL) included.
func TestHuntDecolorizeAsLoki(t *testing.T) {
	for _, line := range []string{
		"\x1b[?25lloading\x1b[?25h done",
		"\x1b]0;build\x07compiling",
		"\x1b[31mred\x1b[0m plain",
	} {
		want := lokiANSI.ReplaceAllString(line, "")
		if got := huntLine(t, `{app="a"} | decolorize`, line); got != want {
			t.Errorf("decolorize %q: %q, want %q (Loki)", line, got, want)
		}
	}
}
