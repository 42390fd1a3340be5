package logql

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a lexed token. The grammar follows Loki's
// (grafana/loki pkg/logql/syntax/lex.go and expr.y): the lexer tells
// numbers, durations and byte sizes apart by their suffix, since label
// filters compare with each.
type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokNumber
	tokDuration
	tokBytes
	tokRange // [5m]: the text between the brackets
	tokFlag  // --strict
	tokOp    // punctuation and operators
)

type token struct {
	kind tokKind
	text string // identifiers, operators, unquoted strings, number text
	pos  int
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of query"
	case tokString:
		return strconv.Quote(t.text)
	case tokRange:
		return "[" + t.text + "]"
	}
	return t.text
}

// ops are the operators, longest first so that "|=" wins over "|".
var ops = []string{"|=", "|~", "!=", "!~", "=~", "==", ">=", "<=", "|>", "!>", "{", "}", "(", ")", ",", "|", "=", ">", "<", "+", "-", "*", "/", "%", "^"}

// lex splits q into tokens.
func lex(q string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(q) {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment runs to the end of the line, as in Loki
			for i < len(q) && q[i] != '\n' {
				i++
			}
		case c == '"' || c == '`':
			s, n, err := lexString(q[i:])
			if err != nil {
				return nil, &ParseError{Pos: i, Msg: err.Error()}
			}
			toks = append(toks, token{tokString, s, i})
			i += n
		case c == '[':
			end := strings.IndexByte(q[i:], ']')
			if end < 0 {
				return nil, &ParseError{Pos: i, Msg: "unclosed range ["}
			}
			toks = append(toks, token{tokRange, strings.TrimSpace(q[i+1 : i+end]), i})
			i += end + 1
		case c == '-' && strings.HasPrefix(q[i:], "--") && i+2 < len(q) && isIdentStart(rune(q[i+2])):
			j := i + 2
			for j < len(q) && (isIdentChar(rune(q[j])) || q[j] == '-') {
				j++
			}
			toks = append(toks, token{tokFlag, q[i:j], i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9':
			j := i
			for j < len(q) && (isIdentChar(rune(q[j])) || q[j] == '.') {
				j++
			}
			text := q[i:j]
			toks = append(toks, token{numberKind(text), text, i})
			i = j
		case isIdentStart(rune(c)):
			j := i
			for j < len(q) && isIdentChar(rune(q[j])) {
				j++
			}
			toks = append(toks, token{tokIdent, q[i:j], i})
			i = j
		default:
			op := ""
			for _, o := range ops {
				if strings.HasPrefix(q[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(q[i:])
				return nil, &ParseError{Pos: i, Msg: fmt.Sprintf("unexpected character %q", r)}
			}
			toks = append(toks, token{tokOp, op, i})
			i += len(op)
		}
	}
	return append(toks, token{kind: tokEOF, pos: len(q)}), nil
}

func isIdentStart(r rune) bool { return r == '_' || unicode.IsLetter(r) && r < utf8.RuneSelf }
func isIdentChar(r rune) bool  { return isIdentStart(r) || r >= '0' && r <= '9' }

// numberKind classifies a token starting with a digit: a plain number,
// a duration (5m, 1h30m, 250ms) or a byte size (20MB, 1KiB).
func numberKind(text string) tokKind {
	if _, err := strconv.ParseFloat(text, 64); err == nil {
		return tokNumber
	}
	if _, err := ParseDuration(text); err == nil {
		return tokDuration
	}
	if _, err := ParseBytes(text); err == nil {
		return tokBytes
	}
	return tokNumber // the parser reports it as a malformed number
}

// lexString reads a double-quoted string (Go escapes) or a backquoted
// raw one at the start of s and returns its value and length.
func lexString(s string) (string, int, error) {
	if s[0] == '`' {
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return "", 0, fmt.Errorf("unclosed string")
		}
		return s[1 : end+1], end + 2, nil
	}
	for j := 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			v, err := strconv.Unquote(s[:j+1])
			if err != nil {
				return "", 0, fmt.Errorf("malformed string %s: %w", s[:j+1], err)
			}
			return v, j + 1, nil
		}
	}
	return "", 0, fmt.Errorf("unclosed string")
}

// ParseError is a query the parser refused, with the byte offset of
// what it could not read; its message is Loki's shape ("parse error at
// line 1, col N: ..."), which Grafana shows as is.
type ParseError struct {
	Pos int
	Msg string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("parse error at line 1, col %d: %s", e.Pos+1, e.Msg)
}
