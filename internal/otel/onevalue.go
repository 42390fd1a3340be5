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
	i := envelope.SkipJSONSpace(b, 0)
	if i == len(b) {
		return nil
	}
	end := envelope.JSONValueEnd(b, i)
	if rest := bytes.TrimLeft(b[end:], " \t\r\n"); len(rest) > 0 {
		return fmt.Errorf("%d bytes follow the JSON value that ends at byte %d: one export request is one JSON value", len(rest), end)
	}
	return nil
}
