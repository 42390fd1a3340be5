// Tests of answers that once differed from Grafana Loki's, each
// citing the Loki source its expectation comes from.

package logql

import (
	"context"
	"regexp"
	"testing"
	"time"
)

// lineAfter runs a log query over one entry with line and answers the
// line the pipeline made of it ("" when dropped).
func lineAfter(t *testing.T, q, line string) string {
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

// TestTemplateTitleAndAlignAsLoki: line_format's title is sprig's, which
// is strings.Title (a capital after every non-letter, spacing kept), and
// alignLeft/alignRight count characters, not bytes (Loki
// pkg/logql/log/fmt.go alignLeft, alignRight on []rune).
func TestTemplateTitleAndAlignAsLoki(t *testing.T) {
	for tmpl, want := range map[string]string{
		`{{ title "hello-world  foo" }}`: "Hello-World  Foo", // strings.Title("hello-world  foo")
		`{{ title "élan vital" }}`:       "Élan Vital",
		`{{ alignLeft 3 "héllo" }}`:      "hél",
		`{{ alignRight 4 "héllo" }}`:     "éllo",
		`{{ alignLeft 6 "hé" }}`:         "hé    ",
	} {
		q := "{app=\"a\"} | line_format `" + tmpl + "`"
		if got := lineAfter(t, q, "x"); got != want {
			t.Errorf("%s: %q, want %q", tmpl, got, want)
		}
	}
}

// TestTemplateFunctionsAsLoki: line_format has the functions of Loki's
// templates (pkg/logql/log/fmt.go): its own functionMap, and the sprig
// functions its templateFunctions names (arithmetic, JSON, dates), with
// sprig's behaviour (trunc and substr count bytes there: Loki's own
// rune-counting trunc and substring are not in the map).
func TestTemplateFunctionsAsLoki(t *testing.T) {
	for tmpl, want := range map[string]string{
		`{{ add 1 2 | mul 3 }}`:                                               "9",
		`{{ max 4 9 2 }} {{ floor 2.7 }} {{ round 2.345 2 }}`:                 "9 2 2.35",
		`{{ divf 1 4 }} {{ mod 7 3 }} {{ int "42" }}`:                         "0.25 1 42",
		`{{ duration "1m30s" }} {{ bytes "2KB" }}`:                            "90 2000",
		`{{ count "a" "banana" }}`:                                            "3",
		`{{ unixToTime "1673798889" | unixEpochMillis }}`:                     "1673798889000",
		`{{ unixToTime "19373" | unixEpoch }}`:                                "1673827200",
		`{{ toDateInZone "2006-01-02" "UTC" "2023-01-15" | unixEpochNanos }}`: "1673740800000000000",
		`{{ (fromJson "{\"a\":{\"b\":7}}").a.b }}`:                            "7",
		`{{ b64dec "aGk" }}`:                                                  "hi", // padded, as Loki's base64Decode
		`{{ "abcdef" | substr 1 3 }} {{ "abcdef" | trunc -2 }}`:               "bc ef",
		`{{ indent 2 "a" }}|{{ "x" | default "d" }}|{{ "" | default "d" }}`:   "  a|x|d",
	} {
		q := "{app=\"a\"} | line_format `" + tmpl + "`"
		if got := lineAfter(t, q, "x"); got != want {
			t.Errorf("%s: %q, want %q", tmpl, got, want)
		}
	}
}

// lokiANSI is Loki's decolorize pattern (pkg/logql/log/fmt.go
// ansiPattern, from acarl005/stripansi).
var lokiANSI = regexp.MustCompile("[\u001B\u009B][[\\]()#;?]*(?:(?:(?:[a-zA-Z\\d]*(?:;[a-zA-Z\\d]*)*)?\u0007)|(?:(?:\\d{1,4}(?:;\\d{0,4})*)?[\\dA-PRZcf-ntqry=><~]))")

// TestDecolorizeAsLoki: decolorize removes what Loki's pattern
// removes: private-mode CSI sequences (ESC[?25l, cursor hiding, as a
// progress bar writes them) and OSC titles (ESC]0;…BEL) included.
func TestDecolorizeAsLoki(t *testing.T) {
	for _, line := range []string{
		"\x1b[?25lloading\x1b[?25h done",
		"\x1b]0;build\x07compiling",
		"\x1b[31mred\x1b[0m plain",
	} {
		want := lokiANSI.ReplaceAllString(line, "")
		if got := lineAfter(t, `{app="a"} | decolorize`, line); got != want {
			t.Errorf("decolorize %q: %q, want %q (Loki)", line, got, want)
		}
	}
}

// TestLogfmtWithoutStrictSetsNoError: Loki's logfmt parser without
// --strict skips what it cannot scan and never sets __error__
// (pkg/logql/log/parser.go LogfmtParser.Process: only `if l.strict &&
// l.dec.Err() != nil` adds LogfmtParserErr), so a JSON line or a line
// with an unterminated quote among logfmt lines fails no metric query
// and matches no __error__ filter.
func TestLogfmtWithoutStrictSetsNoError(t *testing.T) {
	for _, line := range []string{
		`{"level":"error","msg":"payment failed"}`,
		`level=warn msg="unterminated`,
		`=oops level=info`,
	} {
		if got := lineAfter(t, `{app="a"} | logfmt | __error__ != ""`, line); got != "" {
			t.Errorf("logfmt (not strict) of %q set __error__: the line was kept by __error__ != \"\"", line)
		}
	}
	e, err := Parse(`sum(count_over_time({app="a"} | logfmt [5s]))`)
	if err != nil {
		t.Fatal(err)
	}
	src := entries{{TS: 1 * sec, Line: `{"level":"error"}`, Stream: app("a")}, {TS: 2 * sec, Line: `level=info`, Stream: app("a")}}
	res, err := Eval(context.Background(), src, e, Params{Start: 3 * sec, End: 3 * sec, Instant: true})
	if err != nil {
		t.Fatalf("a JSON line among logfmt ones fails the metric query: %v (Loki answers 2)", err)
	}
	if len(res.Vector) != 1 || res.Vector[0].V != 2 {
		t.Fatalf("%+v, want 2", res.Vector)
	}
}

// TestJSONExpressionObjectIsItsText: `| json u="user"` whose value
// is an object or an array sets the label to the value's text as the
// line holds it (Loki pkg/logql/log/parser.go JSONExpressionParser: an
// Object is string(data), the bytes of the line), not a re-encoding with
// its keys sorted and its spacing removed.
func TestJSONExpressionObjectIsItsText(t *testing.T) {
	line := `{"user": {"name": "x", "id": 1}, "tags": ["b", "a"]}`
	for q, want := range map[string]string{
		"{app=\"a\"} | json u=\"user\" | line_format `{{.u}}`": `{"name": "x", "id": 1}`,
		"{app=\"a\"} | json t=\"tags\" | line_format `{{.t}}`": `["b", "a"]`,
	} {
		if got := lineAfter(t, q, line); got != want {
			t.Errorf("%s: %q, want %q (the value's text in the line)", q, got, want)
		}
	}
}

// TestKeepKeepsTheError: keep never removes __error__ and
// __error_details__ (Loki pkg/logql/log/keep_labels.go: isSpecialLabel
// labels are skipped), so a line the json parser failed on still fails a
// metric query, and still matches `__error__ != ""` after keep.
func TestKeepKeepsTheError(t *testing.T) {
	if got := lineAfter(t, `{app="a"} | json | keep level | __error__ != ""`, `not json`); got != "not json" {
		t.Errorf("keep removed __error__: the line that failed json is not matched by __error__ != \"\" (got %q)", got)
	}
	// Not under a sum without labels: there Loki runs no parser for a
	// query that reads no label (loki TestParserErrorsAsLokiHintsThem).
	e, err := Parse(`sum by (app) (count_over_time({app="a"} | json | keep level [5s]))`)
	if err != nil {
		t.Fatal(err)
	}
	src := entries{{TS: 1 * sec, Line: `not json`, Stream: app("a")}}
	if res, err := Eval(context.Background(), src, e, Params{Start: 3 * sec, End: 3 * sec, Instant: true}); err == nil {
		t.Fatalf("%+v, want Loki's pipeline error (JSONParserErr kept through keep)", res.Vector)
	}
}

// TestLabelFormatRenameBeforeTemplate: Loki's label_format runs its
// items in order, a rename at once (set dst, delete src), and its
// templates read the labels as they are at the first template
// (pkg/logql/log/fmt.go LabelsFormatter.Process: lbs.IntoMap(m) when
// the first template runs): a template after a rename sees the renamed
// label and no longer its source.
func TestLabelFormatRenameBeforeTemplate(t *testing.T) {
	for q, want := range map[string]string{
		"{app=\"a\"} | logfmt | label_format a=b, c=`{{.a}}` | line_format `[{{.c}}]`": "[1]",
		"{app=\"a\"} | logfmt | label_format a=b, c=`{{.b}}` | line_format `[{{.c}}]`": "[]",
	} {
		if got := lineAfter(t, q, "b=1"); got != want {
			t.Errorf("%s: %q, want %q", q, got, want)
		}
	}
}

// TestUnwrapOfAMissingLabelSkipsTheLine: a line without the
// unwrapped label (or with it empty) gives no sample and no error (Loki
// pkg/logql/log/metrics_extraction.go: `if stringValue == "" { return
// ExtractedSample{}, false }`, grafana/loki#6713): the sum is the other
// lines', not a SampleExtractionErr.
func TestUnwrapOfAMissingLabelSkipsTheLine(t *testing.T) {
	e, err := Parse(`sum(sum_over_time({app="a"} | logfmt | unwrap took [5s]))`)
	if err != nil {
		t.Fatal(err)
	}
	src := entries{{TS: 1 * sec, Line: `took=5 msg=ok`, Stream: app("a")}, {TS: 2 * sec, Line: `msg=started`, Stream: app("a")}}
	res, err := Eval(context.Background(), src, e, Params{Start: 3 * sec, End: 3 * sec, Instant: true})
	if err != nil {
		t.Fatalf("a line without took fails the query: %v (Loki answers 5)", err)
	}
	if len(res.Vector) != 1 || res.Vector[0].V != 5 {
		t.Fatalf("%+v, want 5", res.Vector)
	}
}

// TestPatternLineFilterAsLoki: |> matches as Loki's pattern Test
// (pkg/logql/log/pattern/pattern.go Matcher.Test): each literal at its
// first occurrence after the previous, no capture empty, a pattern that
// ends on a literal consumes the whole line there, one that ends on a
// capture leaves it something. !> keeps what |> drops (Loki 3's
// LineMatchNotPattern, pkg/logql/syntax/lex.go).
func TestPatternLineFilterAsLoki(t *testing.T) {
	for _, c := range []struct {
		pattern, line string
		want          bool
	}{
		{"<_> bar", "x bar y bar", false}, // the first " bar" does not end the line
		{"foo <_>", "foo ", false},        // the last capture is empty
		{"<_> bar <_>", " bar x", false},  // the first capture is empty
		{"<_> bar <_>", "x bar y", true},
		{"foo <_>", "xfoo bar", true}, // Test does not anchor a leading literal
	} {
		q := "{app=\"a\"} |> `" + c.pattern + "`"
		got := lineAfter(t, q, c.line) != ""
		if got != c.want {
			t.Errorf("%q |> %q: kept %v, want %v (Loki)", c.line, c.pattern, got, c.want)
		}
		q = "{app=\"a\"} !> `" + c.pattern + "`"
		if got := lineAfter(t, q, c.line) != ""; got == c.want {
			t.Errorf("%q !> %q: kept %v, want %v (Loki)", c.line, c.pattern, got, !c.want)
		}
	}
	// A negated filter's "or" drops a line any of its patterns match, as
	// != "a" or "b" does (pkg/logql/syntax/ast.go, newOrLineFilterExpr).
	for line, want := range map[string]bool{"x bar y": false, "x baz y": false, "x qux y": true} {
		if got := lineAfter(t, "{app=\"a\"} !> `<_> bar <_>` or `<_> baz <_>`", line) != ""; got != want {
			t.Errorf("%q !> bar or baz: kept %v, want %v", line, got, want)
		}
	}
}

// TestLastParserErrorWins: a parser's or formatter's failure replaces an
// earlier stage's error and its details (Loki pkg/logql/log/parser.go
// addErrLabel: SetErr and SetErrorDetails overwrite), where a label
// filter's failure keeps the earlier error (label_filter.go: "Don't
// overwrite what might be a more useful error").
func TestLastParserErrorWins(t *testing.T) {
	const line = `{"a` // neither JSON nor strict logfmt
	for q, want := range map[string]bool{
		`{app="a"} | json | logfmt --strict | __error__ = "LogfmtParserErr" | __error_details__ =~ "logfmt.*"`: true,
		`{app="a"} | json | logfmt --strict | __error__ = "JSONParserErr"`:                                     false,
		`{app="a"} | json | app > 1 | __error__ = "JSONParserErr"`:                                             true,
	} {
		if got := lineAfter(t, q, line) != ""; got != want {
			t.Errorf("%s: kept %v, want %v (Loki)", q, got, want)
		}
	}
}

// TestTemplateFunctionsAreBounded: repeat and indent make at most a
// mebibyte (past it the template fails, TemplateFormatErr, the line left
// as it was), where {{ repeat 1000000000 "x" }} took a gigabyte a line of
// the process's memory; under the bound they answer as sprig's.
func TestTemplateFunctionsAreBounded(t *testing.T) {
	for _, tmpl := range []string{`{{ repeat 1000000000 "x" }}`, `{{ indent 2000000 "a" }}`, `{{ nindent 2000000 "a" }}`, `{{ repeat -1 "x" }}`} {
		q := "{app=\"a\"} | line_format `" + tmpl + "` | __error__ = \"TemplateFormatErr\""
		if got := lineAfter(t, q, "x"); got != "x" {
			t.Errorf("%s: %.40q, want the line as it was, marked TemplateFormatErr", tmpl, got)
		}
	}
	for tmpl, want := range map[string]string{`{{ repeat 3 "ab" }}`: "ababab", `{{ nindent 2 "a\nb" }}`: "\n  a\n  b"} {
		if got := lineAfter(t, "{app=\"a\"} | line_format `"+tmpl+"`", "x"); got != want {
			t.Errorf("%s: %q, want %q", tmpl, got, want)
		}
	}
}
