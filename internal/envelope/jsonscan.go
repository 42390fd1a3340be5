package envelope

import "bytes"

// The functions here find where JSON values end in JSON text, in place,
// looking only for the structure: the text's syntax is checked elsewhere
// (gojson.Valid, or the decoder that reads it), and a value that does not
// end ends at the text's end.

// SkipJSONSpace returns the index of the first byte at or after i that is
// not JSON white space.
func SkipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// JSONValueEnd returns the index just past the value starting at i: a
// string, an object or an array with what they hold, or a number, true,
// false or null up to the next white space or punctuation.
func JSONValueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return JSONStringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = JSONStringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r', '{', '[', '"', ':':
			return j
		}
	}
	return len(b)
}

// JSONStringEnd returns the index just past the string whose quote is at i.
func JSONStringEnd(b []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		escapes := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}
