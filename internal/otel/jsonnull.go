package otel

import (
	"bytes"
	"encoding/json"

	"github.com/tracelake/tracelake/internal/envelope"
)

// OTLP/JSON is the Protobuf JSON mapping, in which null is a value of
// every field, read as the field's default. pdata's JSON unmarshalers
// refuse it where they want a string, a number or an object (an id, a
// time, a resource, a status): a valid request from a sender that writes
// an unset field as null was refused whole (400, which clients do not
// retry) and its items dropped. withoutNulls leaves out every object
// member whose value is null, which is what the mapping says it means.
// Elements of arrays stay as they are (null is no element of a repeated
// field in the mapping: pdata judges them), and so does everything
// nested deeper than maxNullDepth (its own checks refuse such nesting
// anyway).

const maxNullDepth = 64

var jsonNull = []byte("null")

// withoutNulls returns b with its null object members left out; b itself
// when it holds none, or when it is not JSON of the structure looked for
// (its syntax is pdata's to judge).
func withoutNulls(b []byte) []byte {
	if !bytes.Contains(b, jsonNull) {
		return b
	}
	i := envelope.SkipJSONSpace(b, 0)
	if i == len(b) {
		return b
	}
	out, ok := appendWithoutNulls(make([]byte, 0, len(b)), b, i, envelope.JSONValueEnd(b, i), 0)
	if !ok {
		return b
	}
	return out
}

// appendWithoutNulls appends the value b[start:end] with its objects'
// null members left out; ok is false where its structure is not JSON's.
func appendWithoutNulls(out, b []byte, start, end, depth int) ([]byte, bool) {
	if depth >= maxNullDepth || !bytes.Contains(b[start:end], jsonNull) {
		return append(out, b[start:end]...), true
	}
	switch b[start] {
	case '{':
		members, ok := objectMembers(b, start)
		if !ok {
			return nil, false
		}
		out = append(out, '{')
		first := true
		for _, m := range members {
			if bytes.Equal(b[m.value:m.end], jsonNull) && !keepsNull(b[m.start:m.key]) {
				continue
			}
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, b[m.start:m.value]...)
			if out, ok = appendWithoutNulls(out, b, m.value, m.end, depth+1); !ok {
				return nil, false
			}
		}
		return append(out, '}'), true
	case '[':
		elems, ok := arrayElements(b, start)
		if !ok {
			return nil, false
		}
		out = append(out, '[')
		for i, e := range elems {
			if i > 0 {
				out = append(out, ',')
			}
			if out, ok = appendWithoutNulls(out, b, e.start, e.end, depth+1); !ok {
				return nil, false
			}
		}
		return append(out, ']'), true
	}
	return append(out, b[start:end]...), true
}

// pdataReadsNull are the fields whose null pdata reads as a value, not as
// absent: an AnyValue's stringValue (an empty string), arrayValue and
// kvlistValue (an empty list, map). The Collector's receiver stores such
// an attribute or body with that value, and so did tracelake before nulls
// were left out: they are kept, so that every request pdata takes is read
// as it reads it. (A Metric's gauge, sum, … null is a typed metric without
// points, which stores no row either way: left out.)
var pdataReadsNull = map[string]bool{
	"stringValue": true, "string_value": true,
	"arrayValue": true, "array_value": true,
	"kvlistValue": true, "kvlist_value": true,
}

// keepsNull says whether a member with the JSON string key (its quotes
// included) and the value null is kept: where pdata reads the null as a
// value, and where the key is no valid JSON string (a bad escape, a
// control character), which pdata refuses and leaving it out would hide.
func keepsNull(key []byte) bool {
	k := key[1 : len(key)-1]
	plain := true
	for _, c := range k {
		if c == '\\' || c < 0x20 {
			plain = false
			break
		}
	}
	if !plain {
		var decoded string
		if err := json.Unmarshal(key, &decoded); err != nil {
			return true
		}
		k = []byte(decoded)
	}
	return pdataReadsNull[string(k)]
}
