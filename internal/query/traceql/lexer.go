package traceql

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a token.
type tokKind int

const (
	tEOF tokKind = iota
	tOp
	tIdent
	tString
	tInt
	tFloat
	tDuration
	tAttr
)

// token is one token of a query; pos is its byte offset, for errors.
type token struct {
	kind tokKind
	text string // tOp, tIdent; the decoded text of tString
	attr Attribute
	i    int64
	f    float64
	d    time.Duration
	pos  int
}

// ops are the operators, longest first so that a scan takes the longest
// (upstream's lexer.go tokenMap; the structural negations and unions
// such as !> and &>> are outside the subset and lex as errors).
var ops = []string{"!>>", "!<<", "&>>", "&<<", ">>", "<<", "&&", "||", "!=", "=~", "!~", ">=", "<=",
	"!>", "!<", "&>", "&<", "&~", "{", "}", "(", ")", ",", "=", ">", "<", "~", "!", "|", "-"}

// unsupportedOps lex but are refused by name.
var unsupportedOps = map[string]bool{"!>>": true, "!<<": true, "&>>": true, "&<<": true, "!>": true, "!<": true, "&>": true, "&<": true, "&~": true}

// lex splits q into tokens.
func lex(q string) ([]token, error) {
	var out []token
	i := 0
	for {
		for i < len(q) {
			r, n := utf8.DecodeRuneInString(q[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		if i >= len(q) {
			return append(out, token{kind: tEOF, pos: i}), nil
		}
		t, n, err := lexOne(q, i)
		if err != nil {
			return nil, err
		}
		t.pos = i
		out = append(out, t)
		i += n
	}
}

// lexOne reads the token at q[i:] and returns it with its length.
func lexOne(q string, i int) (token, int, error) {
	c := q[i]
	switch {
	case c == '"' || c == '`':
		return lexString(q, i)
	case isDigit(c) || (c == '.' && i+1 < len(q) && isDigit(q[i+1])):
		return lexNumber(q, i)
	case c == '.':
		name, n, err := lexAttrName(q, i+1)
		if err != nil {
			return token{}, 0, err
		}
		return token{kind: tAttr, attr: Attribute{Scope: Unscoped, Name: name}}, 1 + n, nil
	case isIdentStart(c):
		j := i
		for j < len(q) && isIdentPart(q[j]) {
			j++
		}
		word := q[i:j]
		if j < len(q) && q[j] == '.' {
			switch word {
			case "span", "resource":
				name, n, err := lexAttrName(q, j+1)
				if err != nil {
					return token{}, 0, err
				}
				scope := SpanScope
				if word == "resource" {
					scope = ResourceScope
				}
				return token{kind: tAttr, attr: Attribute{Scope: scope, Name: name}}, j + 1 + n - i, nil
			case "parent", "event", "link", "instrumentation":
				return token{}, 0, fmt.Errorf("the %s. scope is not supported", word)
			}
		}
		if j < len(q) && q[j] == ':' && (word == "span" || word == "trace") {
			// span:name, trace:rootName: an intrinsic named with its scope.
			k := j + 1
			for k < len(q) && isIdentPart(q[k]) {
				k++
			}
			name, ok := scopedIntrinsics[q[i:k]]
			if !ok {
				return token{}, 0, fmt.Errorf("intrinsic %s is not supported", q[i:k])
			}
			return token{kind: tIdent, text: name}, k - i, nil
		}
		return token{kind: tIdent, text: word}, j - i, nil
	}
	for _, op := range ops {
		if strings.HasPrefix(q[i:], op) {
			if unsupportedOps[op] {
				return token{}, 0, fmt.Errorf("operator %s is not supported", op)
			}
			return token{kind: tOp, text: op}, len(op), nil
		}
	}
	r, _ := utf8.DecodeRuneInString(q[i:])
	return token{}, 0, fmt.Errorf("unexpected %q", r)
}

// scopedIntrinsics are the scoped spellings of the intrinsics answered
// (upstream enum_attributes.go ScopedIntrinsic…), by the unscoped name.
var scopedIntrinsics = map[string]string{
	"span:name": IntrinsicName, "span:status": IntrinsicStatus, "span:statusMessage": IntrinsicStatusMessage,
	"span:kind": IntrinsicKind, "span:duration": IntrinsicDuration, "trace:rootName": IntrinsicRootName,
	"trace:rootService": IntrinsicRootServiceName, "trace:duration": IntrinsicTraceDuration,
}

// lexAttrName reads an attribute's name at q[i:]: the runes upstream's
// isAttributeRune admits, with double-quoted parts in which \" and \\
// are escapes (lexer.go parseAttribute, parseQuotedAtrribute).
func lexAttrName(q string, i int) (string, int, error) {
	var sb strings.Builder
	j := i
	for j < len(q) {
		r, n := utf8.DecodeRuneInString(q[j:])
		if r == '"' {
			j++
			closed := false
			for j < len(q) {
				c := q[j]
				if c == '"' {
					j++
					closed = true
					break
				}
				if c == '\\' {
					if j+1 >= len(q) || (q[j+1] != '"' && q[j+1] != '\\') {
						return "", 0, fmt.Errorf("invalid escape sequence in attribute name")
					}
					sb.WriteByte(q[j+1])
					j += 2
					continue
				}
				sb.WriteByte(c)
				j++
			}
			if !closed {
				return "", 0, fmt.Errorf(`unexpected end of query, expecting "`)
			}
			continue
		}
		if !isAttributeRune(r) {
			break
		}
		sb.WriteRune(r)
		j += n
	}
	if sb.Len() == 0 {
		return "", 0, fmt.Errorf("an attribute needs a name")
	}
	return sb.String(), j - i, nil
}

// isAttributeRune: what may be in an unquoted attribute name (upstream
// lexer.go isAttributeRune).
func isAttributeRune(r rune) bool {
	if unicode.IsSpace(r) {
		return false
	}
	switch r {
	case '{', '}', '(', ')', '=', '~', '!', '<', '>', '&', '|', '^', ',', '"':
		return false
	}
	return true
}

// quoteName writes an attribute name so that lexAttrName reads it back.
func quoteName(name string) string {
	for _, r := range name {
		if !isAttributeRune(r) {
			return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
		}
	}
	return name
}

func lexString(q string, i int) (token, int, error) {
	quote := q[i]
	j := i + 1
	for j < len(q) && q[j] != quote {
		if q[j] == '\\' && quote == '"' {
			j++
		}
		j++
	}
	if j >= len(q) {
		return token{}, 0, fmt.Errorf("unterminated string")
	}
	s, err := strconv.Unquote(q[i : j+1])
	if err != nil {
		return token{}, 0, fmt.Errorf("string %s: %w", q[i:j+1], err)
	}
	return token{kind: tString, text: s}, j + 1 - i, nil
}

// lexNumber reads an integer, a float or a duration (a number followed
// by units: upstream tries Prometheus's durations, then Go's).
func lexNumber(q string, i int) (token, int, error) {
	j := i
	for j < len(q) && (isDigit(q[j]) || q[j] == '.') {
		j++
	}
	if e := exponentLen(q[j:]); e > 0 {
		// 1e1, 2.5E-3: a float, as Go's text/scanner reads it (upstream
		// lexer.go Lex, case scanner.Float).
		f, err := strconv.ParseFloat(q[i:j+e], 64)
		if err != nil {
			return token{}, 0, fmt.Errorf("number %s: %w", q[i:j+e], err)
		}
		return token{kind: tFloat, f: f}, j + e - i, nil
	}
	k := j
	for k < len(q) {
		r, n := utf8.DecodeRuneInString(q[k:])
		if !(isDigit(q[k]) || q[k] == '.' || strings.ContainsRune("nsumhµdwy", r)) {
			break
		}
		k += n
	}
	if k > j {
		d, err := parseDuration(q[i:k])
		if err != nil {
			return token{}, 0, fmt.Errorf("duration %s: %w", q[i:k], err)
		}
		return token{kind: tDuration, d: d}, k - i, nil
	}
	text := q[i:j]
	if strings.Contains(text, ".") {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return token{}, 0, fmt.Errorf("number %s: %w", text, err)
		}
		return token{kind: tFloat, f: f}, j - i, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{}, 0, fmt.Errorf("number %s: %w", text, err)
	}
	return token{kind: tInt, i: n}, j - i, nil
}

// exponentLen is the length of the exponent (e or E, a sign, digits)
// that s starts with, 0 if none.
func exponentLen(s string) int {
	if len(s) < 2 || s[0]|0x20 != 'e' {
		return 0
	}
	n := 1
	if s[n] == '+' || s[n] == '-' {
		n++
	}
	start := n
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	if n == start {
		return 0
	}
	return n
}

// parseDuration reads Go's durations and Prometheus's d, w, y units.
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	var total time.Duration
	rest := s
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute,
		"h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour, "y": 365 * 24 * time.Hour}
	for rest != "" {
		j := 0
		for j < len(rest) && isDigit(rest[j]) {
			j++
		}
		k := j
		for k < len(rest) && !isDigit(rest[k]) {
			k++
		}
		n, err := strconv.ParseInt(rest[:j], 10, 64)
		unit, ok := units[rest[j:k]]
		if err != nil || !ok {
			return 0, fmt.Errorf("not a duration")
		}
		total += time.Duration(n) * unit
		rest = rest[k:]
	}
	return total, nil
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }
