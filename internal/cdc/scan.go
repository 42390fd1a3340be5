package cdc

import (
	"encoding/json"

	"bytes"
	gojson "github.com/goccy/go-json"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tracelake/tracelake/internal/envelope"
)

// The functions here walk JSON text that gojson.Valid has accepted, so
// they look only for the structure, in place: the members of an object in
// their order (Go maps lose it, and columns keep the source's order) and
// each value as its text (a 12 MB string is sliced, not copied).

// iter walks the members of an object or the elements of an array.
type iter struct {
	b []byte
	i int
}

// open starts a walk of v, which must be an object (open == '{') or an
// array ('['); false if it is not.
func open(v []byte, kind byte) (iter, bool) {
	if len(v) == 0 || v[0] != kind {
		return iter{}, false
	}
	return iter{b: v, i: 1}, true
}

// member returns the next member's key (the text between its quotes,
// still escaped) and value, false after the last.
func (it *iter) member() (key, val []byte, ok bool) {
	i := envelope.SkipJSONSpace(it.b, it.i)
	if i >= len(it.b) || it.b[i] == '}' {
		return nil, nil, false
	}
	if it.b[i] == ',' {
		i = envelope.SkipJSONSpace(it.b, i+1)
	}
	end := envelope.JSONStringEnd(it.b, i)
	key = it.b[i+1 : end-1]
	i = envelope.SkipJSONSpace(it.b, end) // at ':'
	i = envelope.SkipJSONSpace(it.b, i+1) // at the value
	end = envelope.JSONValueEnd(it.b, i)
	it.i = end
	return key, it.b[i:end], true
}

// element returns the next element of an array, false after the last.
func (it *iter) element() (val []byte, ok bool) {
	i := envelope.SkipJSONSpace(it.b, it.i)
	if i >= len(it.b) || it.b[i] == ']' {
		return nil, false
	}
	if it.b[i] == ',' {
		i = envelope.SkipJSONSpace(it.b, i+1)
	}
	end := envelope.JSONValueEnd(it.b, i)
	it.i = end
	return it.b[i:end], true
}

// member returns the value of obj's member name, nil if obj is not an
// object or has none.
func member(obj []byte, name string) []byte {
	it, ok := open(obj, '{')
	for k, v, more := it.member(); ok && more; k, v, more = it.member() {
		if string(k) == name {
			return v
		}
	}
	return nil
}

// count returns the number of elements of array v (0 if v is not one).
func count(v []byte) int {
	it, ok := open(v, '[')
	n := 0
	for ok {
		if _, ok = it.element(); ok {
			n++
		}
	}
	return n
}

func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// isString says whether v is a JSON string.
func isString(v []byte) bool { return len(v) >= 2 && v[0] == '"' }

// unquote returns the content of JSON string v unescaped: a slice of v when
// it holds no escape, else appended to dst (grown is then true).
func unquote(dst, v []byte) (out []byte, grown bool) {
	s := v[1 : len(v)-1]
	i := bytes.IndexByte(s, '\\')
	if i < 0 {
		return s, false
	}
	dst = append(dst, s[:i]...)
	for i < len(s) {
		c := s[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch e := s[i+1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(s[i+2:]))
			i += 4
			if utf16.IsSurrogate(r) && i+7 < len(s) && s[i+2] == '\\' && s[i+3] == 'u' {
				if pair := utf16.DecodeRune(r, rune(hex4(s[i+4:]))); pair != utf8.RuneError {
					r = pair
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // " \ /
			dst = append(dst, e)
		}
		i += 2
	}
	return dst, true
}

func hex4(b []byte) int {
	v := 0
	for _, c := range b[:4] {
		v <<= 4
		switch {
		case c >= '0' && c <= '9':
			v |= int(c - '0')
		case c >= 'a' && c <= 'f':
			v |= int(c - 'a' + 10)
		default:
			v |= int(c - 'A' + 10)
		}
	}
	return v
}

// bigJSON is the size from which JSON is validated in place: gojson.Valid
// copies its input into a pooled buffer, which for a 12 MB row is a 12 MB
// copy, and a 12 MB buffer kept in the pool.
const bigJSON = 1 << 20

// validJSON says whether b is valid JSON: with gojson (faster) when small,
// with encoding/json (no copy) when big.
func validJSON(b []byte) bool {
	if len(b) >= bigJSON {
		return json.Valid(b)
	}
	return gojson.Valid(b)
}
