package otel

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tracelake/tracelake/internal/envelope"
)

// row writes one NDJSON object field by field.
type row struct {
	b     []byte
	first bool
	// limit, when not 0, is the length of b past which the rows of a
	// message stop being written (full): a message's rows repeat its
	// resource's and scope's attributes, so they can be any multiple of
	// its size (Decoder.WithMaxRowBytes).
	limit int
	// measuring drops each row as it ends, counting its bytes in
	// measured (RowsOver): a message's rows measured without holding
	// them.
	measuring bool
	measured  int
}

// full reports whether the rows written reached the limit: the message's
// writers write no more rows.
func (w *row) full() bool { return w.limit > 0 && w.measured+len(w.b) > w.limit }

func (w *row) begin() { w.b = append(w.b, '{'); w.first = true }

func (w *row) end() {
	w.b = append(w.b, "}\n"...)
	if w.measuring {
		w.measured += len(w.b)
		w.b = w.b[:0]
	}
}

// key writes the name of the next field. It works on a local copy of the
// buffer: appending through w.b made the compiler load and store the slice
// at every append (keys were ~7% of a span's decode in a profile; this made
// the decode 1.4% faster).
func (w *row) key(name string) {
	b := w.b
	if w.first {
		b = append(b, '"')
	} else {
		b = append(b, ',', '"')
	}
	b = append(b, name...)
	w.b = append(b, '"', ':')
	w.first = false
}

func (w *row) str(name, v string) { w.key(name); w.b = appendText(w.b, v) }

func (w *row) int(name string, v int64) { w.key(name); w.b = strconv.AppendInt(w.b, v, 10) }

func (w *row) null(name string) { w.key(name); w.b = append(w.b, "null"...) }

// nanos writes an OTLP time (unsigned nanoseconds) as a column of
// int64 nanoseconds, held at int64's end past it (2262-04-11), as a
// metric point's times are (row.uint): never wrapped to a time before
// 1970. The time's microsecond column holds it exactly.
func (w *row) nanos(name string, t pcommon.Timestamp) { w.uint(name, uint64(t)) }

// spanDuration is end - start in nanoseconds, false when either is unset (0):
// a span sent without its end has no duration, not minus its start. A
// span that ends before it starts (a skewed clock) has a negative one;
// past int64 it is clamped (timestamps are uint64, their difference can
// exceed it).
func spanDuration(start, end pcommon.Timestamp) (int64, bool) {
	if start == 0 || end == 0 {
		return 0, false
	}
	if end >= start {
		return int64(min(uint64(end-start), math.MaxInt64)), true
	}
	return -int64(min(uint64(start-end), math.MaxInt64)), true
}

// time writes t as microseconds since the epoch; OTLP's 0 (unset) is null.
func (w *row) time(name string, t pcommon.Timestamp) {
	w.key(name)
	if t == 0 {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = strconv.AppendUint(w.b, uint64(t)/1000, 10)
}

// id writes an id as lowercase hex, or null when it is all zero (absent).
func (w *row) id(name string, id []byte) {
	w.key(name)
	if isZero(id) {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '"')
	w.b = hex.AppendEncode(w.b, id)
	w.b = append(w.b, '"')
}

func (w *row) attrs(name string, m pcommon.Map) { w.key(name); w.b = appendMap(w.b, m) }

// raw writes JSON encoded before.
func (w *row) raw(name string, json []byte) { w.key(name); w.b = append(w.b, json...) }

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// appendText appends s as a JSON string. OTLP strings should be UTF-8 but
// the protobuf decoder does not check: invalid bytes become U+FFFD rather
// than failing the load of every row beside them.
func appendText(dst []byte, s string) []byte {
	// Most attribute keys and values are printable ASCII: one pass finds
	// that, and they are copied as they are.
	i := envelope.Verbatim(s, true)
	if i == len(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	if !utf8.ValidString(s[i:]) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return envelope.AppendString(dst, s)
}

// appendMap appends an attribute map as a JSON object. A key repeated in
// the message (OTLP forbids it; decoders keep both) is written once, the
// first value, so the object stays valid for every JSON reader.
func appendMap(dst []byte, m pcommon.Map) []byte {
	dst = append(dst, '{')
	var small [16]string // keys written so far, while few
	written := small[:0]
	var many map[string]struct{}
	m.Range(func(k string, v pcommon.Value) bool {
		if repeated(k, written, &many) {
			return true
		}
		if len(written) > 0 || many != nil {
			dst = append(dst, ',')
		}
		if many == nil && len(written) == len(small) {
			many = make(map[string]struct{}, m.Len())
			for _, w := range written {
				many[w] = struct{}{}
			}
		}
		if many != nil {
			many[k] = struct{}{}
		} else {
			written = append(written, k)
		}
		dst = appendText(dst, k)
		dst = append(dst, ':')
		dst = appendValue(dst, v)
		return true
	})
	return append(dst, '}')
}

// repeated reports whether k was written already: among the few keys
// written, or in many once there are more.
func repeated(k string, written []string, many *map[string]struct{}) bool {
	if *many != nil {
		_, ok := (*many)[k]
		return ok
	}
	for _, w := range written {
		if w == k {
			return true
		}
	}
	return false
}

// appendValue appends an AnyValue as JSON with its type kept: ints as
// integers (exact to 64 bits), doubles as numbers with a fraction or an
// exponent (appendDouble; NaN and the infinities,
// which JSON lacks, as the strings "NaN", "Infinity", "-Infinity"), bytes
// as base64 strings, empty as null.
func appendValue(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendText(dst, v.Str())
	case pcommon.ValueTypeInt:
		return strconv.AppendInt(dst, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		return appendDouble(dst, v.Double())
	case pcommon.ValueTypeBool:
		return strconv.AppendBool(dst, v.Bool())
	case pcommon.ValueTypeMap:
		return appendMap(dst, v.Map())
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = append(dst, '[')
		for i := range s.Len() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, s.At(i))
		}
		return append(dst, ']')
	case pcommon.ValueTypeBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v.Bytes().AsRaw())
		return append(dst, '"')
	default:
		return append(dst, "null"...)
	}
}

// appendDouble writes a double so that every reader takes it for one,
// never for an int: with a fraction or an exponent always (2.0, -0.0,
// 1e21). JSON itself has one number type, but DuckDB's json_type, Go's
// and Databend's parsers (serde_json, then jsonb's From<&serde_json::Value>:
// databendlabs/databend src/query/formats/src/field_decoder/json_ast.rs
// read_variant, databendlabs/jsonb src/from.rs) all read a number
// without either as an integer, so a whole double written as 2 came back
// an int attribute. The text is the one DuckDB's JSON (yyjson) stores
// (the shortest digits, fixed notation for 1e-6 <= |f| < 1e21 with .0
// when whole, else an exponent without + or leading zeros), so a JSON
// column holds the same text on every sink (Iceberg keeps it as written).
func appendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
		// Go writes the exponent signed and of two digits at least
		// (1e+21, 1e-07): drop the + and the leading zero.
		e := bytes.LastIndexByte(dst, 'e')
		exp, _ := strconv.Atoi(string(dst[e+1:]))
		return strconv.AppendInt(dst[:e+1], int64(exp), 10)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, 64)
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, ".0"...)
	}
	return dst
}

// appendTime appends t as an RFC 3339 UTC string with nanoseconds, for
// times inside JSON columns (span events, exemplars); 0 is null. OTLP's
// times are nanoseconds and the Tempo API answers an event's time from
// this text, as Tempo answers it, exact: with microseconds (until
// 2026-12-07) it was another time than sent.
func appendTime(dst []byte, t pcommon.Timestamp) []byte {
	if t == 0 {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = envelope.AppendUTC(dst, uint64(t)/1e9, uint64(t)%1e9, 9)
	return append(dst, '"')
}

// AttributesFromJSON reads an attributes column back into a map, in the
// column's order (the attributes' order as received, which decides which
// of two attributes escaping to one Prometheus label wins): integers as
// ints, other numbers as doubles, strings, bools, arrays and maps as they
// are (bytes stay base64 strings, NaN and the infinities strings). A key
// written twice keeps its last value.
func AttributesFromJSON(data []byte) (pcommon.Map, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	m := pcommon.NewMap()
	if tok, err := d.Token(); err != nil {
		return m, fmt.Errorf("attributes are not a JSON object: %w", err)
	} else if tok != json.Delim('{') {
		return m, fmt.Errorf("attributes are not a JSON object: %v", tok)
	}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return m, fmt.Errorf("attributes are not a JSON object: %w", err)
		}
		var raw any
		if err := d.Decode(&raw); err != nil {
			return m, fmt.Errorf("attributes are not a JSON object: %w", err)
		}
		k, _ := tok.(string)
		if err := m.PutEmpty(k).FromRaw(withNumbers(raw)); err != nil { // PutEmpty clears a key given twice
			return m, err
		}
	}
	if _, err := d.Token(); err != nil {
		return m, fmt.Errorf("attributes are not a JSON object: %w", err)
	}
	return m, nil
}

// ValueFromJSON reads one JSON value of an attributes column (as
// AttributesFromJSON reads each of an object's): integers as ints, other
// numbers as doubles, strings, bools, arrays and maps as they are, null
// empty.
func ValueFromJSON(data []byte) (pcommon.Value, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return pcommon.NewValueEmpty(), fmt.Errorf("attribute value is not JSON: %w", err)
	}
	v := pcommon.NewValueEmpty()
	if err := v.FromRaw(withNumbers(raw)); err != nil {
		return v, fmt.Errorf("attribute value: %w", err)
	}
	return v, nil
}

// withNumbers turns the json.Numbers of v into int64 or float64.
func withNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	case []any:
		for i := range v {
			v[i] = withNumbers(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = withNumbers(v[k])
		}
	}
	return v
}
