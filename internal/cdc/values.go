package cdc

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/tracelake/tracelake/internal/schema"
)

// Values are written as internal/schema's NDJSON holds them. A value that
// is already that text (a string, an integer) is the record's own bytes;
// the others (decimals from bytes, timestamps from text) are written to the
// change's arena and placed by settle.

var (
	jsonTrue  = []byte("true")
	jsonFalse = []byte("false")
)

// put writes a value to the change's arena.
func (c *Change) put(col *Column, v []byte) {
	col.from = int32(len(c.arena))
	c.arena = append(c.arena, v...)
	col.to = int32(len(c.arena))
}

// putInt writes an integer value to the change's arena.
func (c *Change) putInt(col *Column, v int64) {
	col.from = int32(len(c.arena))
	c.arena = strconv.AppendInt(c.arena, v, 10)
	col.to = int32(len(c.arena))
}

// settle points the arena values of cols into the arena, now that it is
// complete.
func (c *Change) settle(cols []Column) {
	for i := range cols {
		if col := &cols[i]; col.to > col.from {
			col.Value = c.arena[col.from:col.to:col.to]
		}
	}
}

// isInteger says whether v is a JSON number without fraction or exponent.
func isInteger(v []byte) bool {
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 1 && v[0] == '0' {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isNumber says whether v is a JSON number.
func isNumber(v []byte) bool {
	if len(v) == 0 || v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	return validJSON(v)
}

// isDecimal says whether v is a JSON number without exponent: exact
// decimal text.
func isDecimal(v []byte) bool {
	for _, c := range v {
		if c == 'e' || c == 'E' {
			return false
		}
	}
	return isNumber(v)
}

// infer types a value of a source without types (Debezium without
// schemas, Maxwell), conservatively: an integral number within int64 is
// Int64, any other number Decimal (its exact text, an exponent written
// out: appendPlainDecimal), or Float64 where that text would be longer than any
// database's decimal; a string String; true/false Bool; an object or
// array JSON; null String. A Decimal is written quoted to the arena.
//
// A number with an exponent is no sign of a double: Maxwell writes a
// FLOAT's or DOUBLE's value with Java's Float.toString or Double.toString
// (FloatColumnDef keeps ColumnDef.asJSON's value, which Jackson's
// JsonGenerator.writeNumber writes so), with an exponent from 10^7 up and
// below 10^-3 (1.0E7, 1.0E-4) and without one between (12.5), and a
// DECIMAL's with BigDecimal.toString (1.00E-7 below 10^-6 at a large
// scale); Kafka Connect's JsonConverter writes a float64 as Jackson does.
// Typed Float64, one column's values made it DOUBLE or text by the first
// seen, and the others were dead-lettered (neither holds the other).
func (c *Change) infer(col *Column, v []byte) {
	col.Type, col.Value = schema.String, nil
	switch {
	case isNull(v):
	case v[0] == '"':
		col.Value = v
	case v[0] == 't' || v[0] == 'f':
		col.Type, col.Value = schema.Bool, v
	case v[0] == '{' || v[0] == '[':
		col.Type, col.Value = schema.JSON, v
	case isInteger(v):
		if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			col.Type, col.Value = schema.Int64, v
			return
		}
		// Beyond 64 bits (a MySQL BIGINT UNSIGNED above 2^63): still an
		// integer, a DECIMAL(20,0) or of its digits, which a BIGINT
		// column widens to keeping numbers numbers. As a decimal of
		// unknown precision (text) it was refused in a key column of
		// numbers, and every change of its row dead-lettered.
		col.Type = schema.Decimal
		if digits := len(bytes.TrimPrefix(v, []byte("-"))); digits <= maxIntegerDigits {
			col.Precision = max(unsignedBigintDigits, digits)
		}
		c.putQuoted(col, v)
	case isDecimal(v):
		col.Type = schema.Decimal
		c.putQuoted(col, v)
	case isNumber(v):
		from := len(c.arena)
		var ok bool
		if c.arena, ok = appendPlainDecimal(append(c.arena, '"'), v); !ok {
			c.arena = c.arena[:from]
			col.Type, col.Value = schema.Float64, v
			return
		}
		c.arena = append(c.arena, '"')
		col.Type, col.from, col.to = schema.Decimal, int32(from), int32(len(c.arena))
	default:
		col.Type, col.Value = schema.Float64, v
	}
}

const (
	// unsignedBigintDigits are the digits of MySQL's largest integer,
	// BIGINT UNSIGNED (18446744073709551615).
	unsignedBigintDigits = 20
	// maxIntegerDigits are the most a DECIMAL holds (DuckDB's, Databend's).
	maxIntegerDigits = 38
)

// appendPlainDecimal appends the JSON number v (with an exponent) as
// decimal text without one, every digit of v kept: 12345678.9 for
// 1.23456789E7, 0.000010 for 1.0E-5, 10000000 for 1.0E7. False when the
// exponent moves the point more than maxDecimalScale places (no database's
// decimal is that long; a double's at most 324).
func appendPlainDecimal(dst, v []byte) ([]byte, bool) {
	mantissa, exp, _ := bytes.Cut(v, []byte{'e'})
	if len(exp) == 0 {
		mantissa, exp, _ = bytes.Cut(v, []byte{'E'})
	}
	shift, err := strconv.Atoi(string(bytes.TrimPrefix(exp, []byte{'+'})))
	if err != nil || shift > maxDecimalScale || shift < -maxDecimalScale {
		return dst, false
	}
	if mantissa[0] == '-' {
		dst = append(dst, '-')
		mantissa = mantissa[1:]
	}
	whole, frac, _ := bytes.Cut(mantissa, []byte{'.'})
	digits := append(slices.Clip(whole), frac...) // JSON: whole is "0" or has no leading zero
	point := len(whole) + shift
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		dst = append(dst, bytes.Repeat([]byte{'0'}, -point)...)
		return append(dst, digits...), true
	case point >= len(digits):
		digits = append(digits, bytes.Repeat([]byte{'0'}, point-len(digits))...)
		frac = nil
	default:
		digits, frac = digits[:point], digits[point:]
	}
	// A whole part of more than one digit starts with no zero: "0.5E1" is
	// 5, not 05.
	for len(digits) > 1 && digits[0] == '0' {
		digits = digits[1:]
	}
	dst = append(dst, digits...)
	if len(frac) > 0 {
		dst = append(append(dst, '.'), frac...)
	}
	return dst, true
}

// putDecimalNumber writes the JSON number v as a JSON string of its exact
// decimal text (a Decimal, as putDecimal writes one); false when it has
// none (appendDecimalNumber).
func (c *Change) putDecimalNumber(col *Column, v []byte) bool {
	from := len(c.arena)
	var ok bool
	if c.arena, ok = appendDecimalNumber(append(c.arena, '"'), v); !ok {
		c.arena = c.arena[:from]
		return false
	}
	c.arena = append(c.arena, '"')
	col.from, col.to = int32(from), int32(len(c.arena))
	return true
}

// appendDecimalNumber appends the JSON number v as decimal text without an
// exponent, every digit kept: as it is, or written out (appendPlainDecimal:
// Jackson writes a BigDecimal as BigDecimal.toString does, 1E-8 for
// 0.00000001).
func appendDecimalNumber(dst, v []byte) ([]byte, bool) {
	if isDecimal(v) {
		return append(dst, v...), true
	}
	return appendPlainDecimal(dst, v)
}

// putQuoted writes v as a JSON string (v needs no escape: a number).
func (c *Change) putQuoted(col *Column, v []byte) {
	col.from = int32(len(c.arena))
	c.arena = append(append(append(c.arena, '"'), v...), '"')
	col.to = int32(len(c.arena))
}

// putDecimal writes the decimal whose unscaled value is the big-endian
// two's-complement integer u, with scale digits after the point, as a JSON
// string of its exact text (Kafka Connect's Decimal).
func (c *Change) putDecimal(col *Column, u []byte, scale int) {
	col.from = int32(len(c.arena))
	c.arena = append(c.arena, '"')
	c.arena = appendDecimal(c.arena, u, scale)
	c.arena = append(c.arena, '"')
	col.to = int32(len(c.arena))
}

// appendDecimal appends the exact text of the decimal whose unscaled value
// is the big-endian two's-complement integer u, with scale digits after the
// point: -0.05 for u 0xfb and scale 2.
func appendDecimal(dst, u []byte, scale int) []byte {
	var digits []byte
	var scratch [24]byte
	neg := len(u) > 0 && u[0]&0x80 != 0
	if len(u) <= 8 {
		var v int64
		if neg {
			v = -1
		}
		for _, b := range u {
			v = v<<8 | int64(b)
		}
		mag := uint64(v)
		if neg {
			mag = -mag
		}
		digits = strconv.AppendUint(scratch[:0], mag, 10)
	} else {
		n := new(big.Int).SetBytes(u)
		if neg {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(u))))
			n.Neg(n)
		}
		digits = n.Append(scratch[:0], 10)
	}
	if neg {
		dst = append(dst, '-')
	}
	switch {
	case scale <= 0:
		dst = append(dst, digits...)
		for range -scale {
			dst = append(dst, '0')
		}
	case len(digits) > scale:
		dst = append(dst, digits[:len(digits)-scale]...)
		dst = append(append(dst, '.'), digits[len(digits)-scale:]...)
	default:
		dst = append(dst, '0', '.')
		for range scale - len(digits) {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	}
	return dst
}

// decodeBase64 decodes a JSON string of standard base64 (how Kafka
// Connect's JsonConverter writes bytes) into dst.
func decodeBase64(dst, v []byte) ([]byte, bool) {
	if !isString(v) {
		return nil, false
	}
	s := v[1 : len(v)-1]
	out, err := base64.StdEncoding.AppendDecode(dst[:0], s)
	return out, err == nil
}

// Microseconds per unit of time.
const (
	usPerMs  = 1000
	usPerDay = 86_400_000_000
)

// floorDiv divides rounding down, so an instant before the epoch in ns
// lands on the µs that holds it.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// mulExact multiplies, false on overflow.
func mulExact(a, b int64) (int64, bool) {
	if a == 0 {
		return 0, true
	}
	p := a * b
	if p/a != b || (a == -1 && b == math.MinInt64) {
		return 0, false
	}
	return p, true
}

func digitsOf(b []byte, n int) (int, bool) {
	if len(b) < n {
		return 0, false
	}
	v := 0
	for _, c := range b[:n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// parseDateTime reads a date with an optional time of day, fraction and
// zone: YYYY-MM-DD[(T| )HH:MM:SS[.f…]][Z|±HH[:MM]], as MySQL writes
// DATETIME and Debezium ZonedTimestamp, IsoDate (2017-09-15Z) and
// IsoTimestamp. The year is four digits, or a sign and four or more as
// java.time's ISO formats write a year past 9999 or before 1 (+10000,
// -0001: year 0 is 1 BC). Without a zone the time is UTC (MySQL's
// DATETIME has none; Debezium reads it as UTC too). It returns µs since
// the epoch, false past the range of an int64; zero is true for MySQL's
// zero date 0000-00-00, which is no instant (Debezium makes it null).
func parseDateTime(b []byte) (us int64, zero, ok bool) {
	signed, neg := len(b) > 0 && (b[0] == '+' || b[0] == '-'), len(b) > 0 && b[0] == '-'
	if signed {
		b = b[1:]
	}
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	if n < 4 || n > 4 && !signed || n > 9 {
		return 0, false, false
	}
	y, _ := digitsOf(b, n)
	if neg {
		y = -y
	}
	b = b[n-4:] // as if the year were four digits
	if len(b) < 10 || b[4] != '-' || b[7] != '-' {
		return 0, false, false
	}
	mo, ok2 := digitsOf(b[5:], 2)
	d, ok3 := digitsOf(b[8:], 2)
	if !ok2 || !ok3 {
		return 0, false, false
	}
	if y == 0 && mo == 0 && d == 0 && !signed {
		return 0, true, true
	}
	if mo < 1 || mo > 12 || d < 1 || d > 31 {
		return 0, false, false
	}
	b = b[10:]
	var hh, mm, ss int
	var frac int64
	if len(b) > 0 && (b[0] == 'T' || b[0] == ' ') {
		var clockOK bool
		if hh, mm, ss, frac, b, clockOK = parseClock(b[1:]); !clockOK || hh > 23 {
			return 0, false, false
		}
	}
	offset := 0
	switch {
	case len(b) == 0:
	case len(b) == 1 && b[0] == 'Z':
	case b[0] == '+' || b[0] == '-':
		oh, okh := digitsOf(b[1:], 2)
		rest := b[3:]
		if len(rest) > 0 && rest[0] == ':' {
			rest = rest[1:]
		}
		om := 0
		okm := true
		if len(rest) > 0 {
			om, okm = digitsOf(rest, 2)
			okm = okm && len(rest) == 2
		}
		if !okh || !okm {
			return 0, false, false
		}
		offset = (oh*60 + om) * 60
		if b[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false, false
	}
	t := time.Date(y, time.Month(mo), d, hh, mm, ss, 0, time.UTC)
	if t.Day() != d {
		return 0, false, false // 2024-02-30
	}
	us, ok = mulExact(t.Unix()-int64(offset), 1_000_000)
	if !ok || us > math.MaxInt64-frac {
		return 0, false, false
	}
	return us + frac, false, true
}

// parseClock reads HH:MM:SS[.f…] (HH may have more digits and b a leading
// -: MySQL's TIME spans ±838 hours) and returns what follows it; frac is
// in µs, digits past the sixth dropped.
func parseClock(b []byte) (hh, mm, ss int, frac int64, rest []byte, ok bool) {
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		n++
	}
	hh, ok1 := digitsOf(b, n)
	if !ok1 || n < 2 || n > 3 || len(b) < n+6 || b[n] != ':' || b[n+3] != ':' {
		return 0, 0, 0, 0, nil, false
	}
	mm, ok2 := digitsOf(b[n+1:], 2)
	ss, ok3 := digitsOf(b[n+4:], 2)
	if !ok2 || !ok3 || mm > 59 || ss > 59 {
		return 0, 0, 0, 0, nil, false
	}
	b = b[n+6:]
	if len(b) > 0 && b[0] == '.' {
		i := 1
		scale := int64(100_000)
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			frac += int64(b[i]-'0') * scale
			scale /= 10
		}
		if i == 1 {
			return 0, 0, 0, 0, nil, false
		}
		b = b[i:]
	}
	return hh, mm, ss, frac, b, true
}

// parseTimeOfDay reads MySQL's TIME text as µs (negative for a negative
// TIME).
func parseTimeOfDay(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	hh, mm, ss, frac, rest, ok := parseClock(b)
	if !ok || len(rest) != 0 {
		return 0, false
	}
	us := (int64(hh)*3600+int64(mm)*60+int64(ss))*1_000_000 + frac
	if neg {
		us = -us
	}
	return us, true
}

// parseISOTime reads Debezium's IsoTime, a time of day at UTC as
// java.time's ISO_OFFSET_TIME writes it (HH:MM:SS[.f…]Z, seconds always
// written), as µs since midnight.
func parseISOTime(b []byte) (int64, bool) {
	hh, mm, ss, frac, rest, ok := parseClock(b)
	if !ok || len(b) < 3 || b[2] != ':' || hh > 23 || string(rest) != "Z" {
		return 0, false
	}
	return (int64(hh)*3600+int64(mm)*60+int64(ss))*1_000_000 + frac, true
}

// putJSONText writes the JSON document held in JSON string v (Debezium's
// io.debezium.data.Json, MySQL's json column in Canal), or nothing for
// the document null (" null" as PostgreSQL's json keeps its text): SQL's
// null, as the column's null; false if v is not a string holding valid
// JSON.
func (c *Change) putJSONText(col *Column, v []byte) bool {
	if !isString(v) {
		return false
	}
	from := len(c.arena)
	out, grown := unquote(c.arena, v)
	doc := out
	if grown {
		doc = out[from:]
	}
	if !validJSON(doc) {
		return false
	}
	if bytes.Equal(bytes.TrimSpace(doc), []byte("null")) {
		return true // the arena keeps nothing of it
	}
	if !grown {
		col.Value = doc
		return true
	}
	c.arena = out
	col.from, col.to = int32(from), int32(len(out))
	return true
}

// The range of a Timestamp (µs since the epoch) a changelog table holds:
// DuckDB's TIMESTAMP, 290309 BC to 294247 AD (make_timestamp refuses the
// rest).
const (
	minTimestamp = -9223372022400000000
	maxTimestamp = math.MaxInt64 - 1
)

// Fits says why the column's value does not fit its type as a changelog
// table holds it, nil when it does or is null: text that is not UTF-8 or
// holds half a surrogate pair (\ud800), which DuckDB's JSON reader
// refuses in any column, an Int32 beyond 32 bits,
// an Int64 beyond 64 (Canal's int(11) of 3000000000, a Debezium int32
// of more), a Timestamp out of range, a Float64 beyond a double, or a
// Decimal of known precision (1 to 38: a DECIMAL(p,s) column) with more
// integer or fraction digits than it holds. The decoders check a value's
// text, not its size; such a value, written as it is, would fail the
// load of every table in it at each retry, or (a fraction) be rounded.
func (c *Column) Fits() error {
	v := c.Value
	if v == nil {
		return nil
	}
	// Valid JSON to Go, but DuckDB's JSON reader refuses the line.
	if !utf8.Valid(v) {
		return errorString(strconv.QuoteToASCII(clip(v)) + " is not UTF-8 text")
	}
	if bytes.IndexByte(v, '\\') >= 0 && hasLoneSurrogate(v) {
		return errorString(clip(v) + " holds a \\u escape of half a UTF-16 surrogate pair, which is no character")
	}
	switch c.Type {
	case schema.Int32, schema.Int64:
		return fitsInteger(v, c.Type)
	case schema.Timestamp:
		us, err := strconv.ParseInt(string(v), 10, 64)
		if us == schema.TimestampInfinity || us == schema.TimestampNegativeInfinity {
			break // PostgreSQL's infinities, which the changelog keeps
		}
		if err != nil || us < minTimestamp || us > maxTimestamp {
			return errorString(clip(v) + " µs since 1970 is out of the range of a timestamp")
		}
	case schema.Float64:
		if !isString(v) { // "NaN", "Infinity", "-Infinity"
			if _, err := strconv.ParseFloat(string(v), 64); err != nil {
				return errorString(clip(v) + " is out of the range of a double")
			}
		}
	case schema.Decimal:
		if c.Precision < 1 || c.Precision > 38 || c.Scale < 0 || c.Scale > c.Precision {
			return nil // kept as its exact text
		}
		whole, frac := decimalDigits(v)
		if whole > c.Precision-c.Scale || frac > c.Scale {
			return errorString(fmt.Sprintf("%s has more digits than DECIMAL(%d,%d) holds", clip(v), c.Precision, c.Scale))
		}
	}
	return nil
}

// fitsInteger says why the text v is no value of the integer type typ
// (Int32 or Int64): a number with a fraction or exponent, which the
// column's cast would round (1.5 into 2), or one beyond its range.
func fitsInteger(v []byte, typ schema.Type) error {
	bits := 64
	if typ == schema.Int32 {
		bits = 32
	}
	if _, err := strconv.ParseInt(string(v), 10, bits); err == nil {
		return nil
	}
	if isNumber(v) && !isInteger(v) {
		return errorString(clip(v) + " is not an integer: an integer column would round it")
	}
	return errorString(fmt.Sprintf("%s is out of the range of a %d-bit integer", clip(v), bits))
}

// hasLoneSurrogate says whether JSON text v holds a \u escape of a
// surrogate (D800-DFFF) that is not a high one followed by a low one.
func hasLoneSurrogate(v []byte) bool {
	for i := 0; i+1 < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		if v[i+1] != 'u' || i+6 > len(v) {
			i++ // \" \\ \n …: the escaped byte is not an escape
			continue
		}
		r := hex4(v[i+2:])
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return true // a low half first
		case r >= 0xd800 && r <= 0xdbff:
			if i+12 > len(v) || v[i+6] != '\\' || v[i+7] != 'u' {
				return true
			}
			if low := hex4(v[i+8:]); low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

// decimalDigits counts the significant integer and fraction digits of a
// decimal's text (quoted or not, signed or not): leading zeros of the
// integer part and trailing zeros of the fraction do not count.
func decimalDigits(v []byte) (whole, frac int) {
	if isString(v) {
		v = v[1 : len(v)-1]
	}
	if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
		v = v[1:]
	}
	intPart, fracPart, _ := bytes.Cut(v, []byte{'.'})
	intPart = bytes.TrimLeft(intPart, "0")
	fracPart = bytes.TrimRight(fracPart, "0")
	return len(intPart), len(fracPart)
}
