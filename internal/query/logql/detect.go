package logql

import "strings"

// LineFields are the fields Loki's detected_fields finds in a line
// (pkg/querier/queryrange/detected_fields.go parseEntry): a JSON object
// line's fields by the json parser, else a logfmt line's by logfmt;
// parser is "" for a line that is neither.
func LineFields(line string) (parser string, fields Labels) {
	var b builder
	var ps *Parser
	switch {
	case strings.HasPrefix(strings.TrimSpace(line), "{"):
		ps = &Parser{Kind: ParseJSON}
	case strings.Contains(line, "="):
		ps = &Parser{Kind: ParseLogfmt}
	default:
		return "", nil
	}
	ps.process(line, &b)
	if b.hasErr() {
		return "", nil
	}
	return string(ps.Kind), b.labels()
}
