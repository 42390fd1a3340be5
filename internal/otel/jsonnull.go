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
// member whose value is null, which is what the mapping says it means,
// but for those pdata reads as a value (keepsNull). Elements of arrays
// stay as they are (null is no element of a repeated field in the
// mapping: pdata judges them). It reads the body once, at any depth: a
// null nested as deep as pdata's protobuf decoder takes (kvlists some 30
// deep) is read as one nested less, and a body nested deeper costs one
// pass, not one per level.

var jsonNull = []byte("null")

// withoutNulls returns b with its null object members left out; b itself
// when it holds none, or when it is not JSON of the structure looked for
// (its syntax is pdata's to judge).
func withoutNulls(b []byte) []byte {
	if !bytes.Contains(b, jsonNull) {
		return b
	}
	out, ok := appendWithoutNulls(make([]byte, 0, len(b)), b)
	if !ok {
		return b
	}
	return out
}

// appendWithoutNulls appends the JSON text b with its objects' null
// members left out, in one pass, without the white space between its
// tokens (but for a member's, between its key and its value); ok is false
// where its structure is not JSON's.
func appendWithoutNulls(out, b []byte) (_ []byte, ok bool) {
	const (
		atValue  = iota // a value starts at i
		atMember        // a member starts at i, in an object
		atAfter         // a value ended before i
	)
	// open holds the containers open at i: an object's whether a member
	// was written in it yet.
	type container struct{ object, written bool }
	var open []container
	state := atValue
	for i := 0; ; {
		i = envelope.SkipJSONSpace(b, i)
		switch state {
		case atValue:
			if i >= len(b) {
				return nil, false
			}
			switch c := b[i]; c {
			case '{', '[':
				closer := byte('}')
				if c == '[' {
					closer = ']'
				}
				out = append(out, c)
				if j := envelope.SkipJSONSpace(b, i+1); j < len(b) && b[j] == closer {
					out = append(out, closer)
					i, state = j+1, atAfter
					continue
				}
				open = append(open, container{object: c == '{'})
				i++
				if c == '{' {
					state = atMember
				}
			default:
				end := envelope.JSONValueEnd(b, i)
				if end == i {
					return nil, false
				}
				out = append(out, b[i:end]...)
				i, state = end, atAfter
			}
		case atMember:
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
			keyEnd := envelope.JSONStringEnd(b, i)
			colon := envelope.SkipJSONSpace(b, keyEnd)
			if colon >= len(b) || b[colon] != ':' {
				return nil, false
			}
			v := envelope.SkipJSONSpace(b, colon+1)
			if v >= len(b) {
				return nil, false
			}
			if end := v + len(jsonNull); b[v] == 'n' && isNull(b, v) && !keepsNull(b[i:keyEnd]) {
				// Left out: a comma and a member follow, or the
				// object's end.
				switch k := envelope.SkipJSONSpace(b, end); {
				case k < len(b) && b[k] == ',':
					i = k + 1
				case k < len(b) && b[k] == '}':
					out = append(out, '}')
					open = open[:len(open)-1]
					i, state = k+1, atAfter
				default:
					return nil, false
				}
				continue
			}
			top := &open[len(open)-1]
			if top.written {
				out = append(out, ',')
			}
			top.written = true
			out = append(out, b[i:v]...)
			i, state = v, atValue
		case atAfter:
			if len(open) == 0 {
				return out, i == len(b)
			}
			if i >= len(b) {
				return nil, false
			}
			top := open[len(open)-1]
			switch {
			case b[i] == ',' && top.object:
				i, state = i+1, atMember
			case b[i] == ',':
				out = append(out, ',')
				i, state = i+1, atValue
			case b[i] == '}' && top.object, b[i] == ']' && !top.object:
				out = append(out, b[i])
				open = open[:len(open)-1]
				i++
			default:
				return nil, false
			}
		}
	}
}

// isNull says whether the literal null starts at b[v] (and ends there).
func isNull(b []byte, v int) bool {
	end := v + len(jsonNull)
	if end > len(b) || !bytes.Equal(b[v:end], jsonNull) {
		return false
	}
	return end == len(b) || envelope.JSONValueEnd(b, end) == end
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
