package logql

import (
	"fmt"
	"strings"
)

// patternPart is a literal or a capture (<name>, or <_> for one not
// kept) of a pattern (Loki pkg/logql/log/pattern).
type patternPart struct {
	literal string
	capture string
	isCap   bool
}

// compilePattern reads a pattern; the pattern parser's must capture
// (needCapture), the |> line filter's need not.
func compilePattern(in string, needCapture bool) ([]patternPart, error) {
	var parts []patternPart
	rest := in
	for rest != "" {
		open := strings.IndexByte(rest, '<')
		if open >= 0 {
			end := strings.IndexByte(rest[open:], '>')
			if end > 1 && isCaptureName(rest[open+1:open+end]) {
				if open > 0 {
					parts = append(parts, patternPart{literal: rest[:open]})
				}
				parts = append(parts, patternPart{capture: rest[open+1 : open+end], isCap: true})
				rest = rest[open+end+1:]
				continue
			}
			// Not a capture: the < is part of a literal.
			parts = appendLiteral(parts, rest[:open+1])
			rest = rest[open+1:]
			continue
		}
		parts = appendLiteral(parts, rest)
		rest = ""
	}
	seen := map[string]bool{}
	named := 0
	for i, p := range parts {
		if !p.isCap {
			continue
		}
		if i+1 < len(parts) && parts[i+1].isCap {
			return nil, &ParseError{Msg: fmt.Sprintf("found consecutive capture '<%s><%s>': invalid expression", p.capture, parts[i+1].capture)}
		}
		if p.capture != "_" {
			if seen[p.capture] {
				return nil, &ParseError{Msg: fmt.Sprintf("duplicate capture name (%s): invalid expression", p.capture)}
			}
			seen[p.capture] = true
			named++
		}
	}
	if needCapture && named == 0 {
		return nil, &ParseError{Msg: "at least one capture is required"}
	}
	return parts, nil
}

func appendLiteral(parts []patternPart, s string) []patternPart {
	if n := len(parts); n > 0 && !parts[n-1].isCap {
		parts[n-1].literal += s
		return parts
	}
	return append(parts, patternPart{literal: s})
}

func isCaptureName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// matchPattern matches a line as Loki's pattern parser does: a leading
// literal must start the line; each capture runs to the next literal,
// or to the end of the line when that literal is missing.
func matchPattern(parts []patternPart, line string) (names, values []string) {
	if line == "" || len(parts) == 0 {
		return nil, nil
	}
	if !parts[0].isCap {
		if !strings.HasPrefix(line, parts[0].literal) {
			return nil, nil
		}
		line = line[len(parts[0].literal):]
		parts = parts[1:]
	}
	for len(parts) > 0 {
		c := parts[0]
		if len(parts) == 1 {
			if c.capture != "_" {
				names, values = append(names, c.capture), append(values, line)
			}
			return names, values
		}
		lit := parts[1].literal
		parts = parts[2:]
		i := strings.Index(line, lit)
		if i < 0 {
			if c.capture != "_" {
				names, values = append(names, c.capture), append(values, line)
			}
			return names, values
		}
		if c.capture != "_" {
			names, values = append(names, c.capture), append(values, line[:i])
		}
		line = line[i+len(lit):]
	}
	return names, values
}

// testPattern is the |> line filter, as Loki's Matcher.Test
// (pkg/logql/log/pattern/pattern.go): each literal is found at its
// first occurrence after the previous one (a leading literal anywhere:
// Test, unlike the parser's match, does not anchor it); no capture may
// be empty, so a literal right after the previous one fails; a pattern
// ending on a literal must end the line there, one ending on a capture
// must leave it something.
func testPattern(parts []patternPart, line string) bool {
	if line == "" || len(parts) == 0 {
		return line == "" && len(parts) == 0
	}
	off := 0
	for i, p := range parts {
		if p.isCap {
			continue
		}
		j := strings.Index(line[off:], p.literal)
		if j < 0 || i > 0 && j == 0 {
			return false
		}
		off += j + len(p.literal)
	}
	endsOnCapture := parts[len(parts)-1].isCap
	return endsOnCapture == (off < len(line))
}
