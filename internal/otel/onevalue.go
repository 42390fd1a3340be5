package otel

import (
	"bytes"
	"fmt"

	"github.com/tracelake/tracelake/internal/envelope"
)

// CheckOneJSONValue refuses an OTLP JSON body (or message) holding anything
// but white space after its first JSON value. pdata's JSON unmarshalers
// read the first value and ignore the rest: a body of two export requests,
// or of one followed by garbage, was taken for its first request, and the
// rest lost without a word (the receivers answered a full success, a
// loader stored no dead letter). JSON is one value (RFC 8259), so such a
// body is not OTLP JSON. Only the first value's end is looked for here,
// in one pass over the bytes: its syntax is pdata's to check (a value that
// does not end is left to it).
func CheckOneJSONValue(b []byte) error {
	_, err := checkOneJSONValue(b)
	return err
}

// checkOneJSONValue is CheckOneJSONValue, also saying whether the value
// may hold a literal null: an n outside its strings, seen in the same pass
// (PrepareJSON then looks for null members; nearly no sender's body has
// one, and costs no second scan).
func checkOneJSONValue(b []byte) (mayHoldNull bool, _ error) {
	i := envelope.SkipJSONSpace(b, 0)
	if i == len(b) {
		return false, nil
	}
	end := len(b)
	switch b[i] {
	case '{', '[':
		depth := 0
	scan:
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = envelope.JSONStringEnd(b, j) - 1
			case 'n':
				mayHoldNull = true
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					end = j + 1
					break scan
				}
			}
		}
	default:
		end = envelope.JSONValueEnd(b, i)
		mayHoldNull = b[i] == 'n'
	}
	if rest := bytes.TrimLeft(b[end:], " \t\r\n"); len(rest) > 0 {
		return false, fmt.Errorf("%d bytes follow the JSON value that ends at byte %d: one export request is one JSON value", len(rest), end)
	}
	return mayHoldNull, nil
}
