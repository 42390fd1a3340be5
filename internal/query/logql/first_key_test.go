package logql

import "testing"

// TestJSONFirstKeyWins: when two keys of a line sanitize to one
// label name, Loki keeps the FIRST one's value, not the last.
// pkg/logql/log/parser.go JSONParser.parseLabelValue skips a key when
// `j.lbs.ParserLabelHints().Extracted(sanitizedKey)`; labels.go
// LabelsBuilder.Set records every parsed label with
// `b.parserKeyHints.RecordExtracted(n)` ("so that future parse stages can
// quickly bypass any existing extracted fields"), and the hints are
// never nil (NewBaseLabelsBuilderWithGrouping: NoParserHints() when
// none) and only cleared per line (BaseLabelsBuilder.Reset →
// Hints.Reset). The nested path (parseLabelValue's prefix branch) checks
// parserHints.Extracted(keyString) alike. The JSONExpressionParser's
// test says the same for params: "duplicate field name takes first
// value" (parser_test.go). d660023's TestJSONLastKeyWins asserts the
// opposite.
func TestJSONFirstKeyWins(t *testing.T) {
	for line, want := range map[string]string{
		`{"a-b":"1","a_b":"2"}`:     "1",
		`{"a_b":"2","a-b":"1"}`:     "2",
		`{"x":{"y":"3"},"x_y":"4"}`: "3",
	} {
		if got := lineAfter(t, "{app=\"a\"} | json | line_format `{{.a_b}}{{.x_y}}`", line); got != want {
			t.Errorf("%s: %q, want %q (the first key, as Loki)", line, got, want)
		}
	}
}

// TestLogfmtFirstKeyWins: Loki's LogfmtParser skips a key already
// extracted on the line (pkg/logql/log/parser.go LogfmtParser.Process:
// `if !parserHints.ShouldExtract(key) || parserHints.Extracted(key) {
// continue }`, the hints recording each parsed label: labels.go Set →
// RecordExtracted), so of `a=1 a=2`, and of two keys sanitizing alike,
// the first is the label. Not introduced today (bd219dc rewrote the
// loop around it), the same rule as TestJSONFirstKeyWins.
func TestLogfmtFirstKeyWins(t *testing.T) {
	for line, want := range map[string]string{
		`a_b=1 a_b=2`: "1",
		`a-b=1 a_b=2`: "1",
	} {
		if got := lineAfter(t, "{app=\"a\"} | logfmt | line_format `{{.a_b}}`", line); got != want {
			t.Errorf("%s: %q, want %q (the first key, as Loki)", line, got, want)
		}
	}
}
