package reconcile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The canonical form of a value, the same whichever engine it was read
// from, so that equal values hash equal across MySQL/MariaDB and DuckDB:
//
//	integers (and booleans, as 0/1)  decimal digits: 42, -7
//	decimals                         exact text, trailing zeros dropped: 10.5, -0.25, 100
//	floating point                   shortest text that reads back as the same float, without exponent
//	strings, bytes                   as they are
//	timestamps                       UTC, microseconds: 2024-05-01T10:11:12.000000Z
//	dates                            2024-05-01
//	times of day                     10:11:12, 10:11:12.500000 (a fraction only when not zero)
//	BIT(n)                           the unsigned number its bits make (BIT(1) is 0 or 1, as a boolean)
//	JSON                             compact, objects' keys sorted, numbers as doubles
//	NULL                             distinct from every value (also from '')
//
// A decimal column compared with an integer one thus matches on equal
// numbers (10.00 and 10), DECIMAL(12,2) with DECIMAL(18,4), and a DOUBLE
// 1e7 with a DECIMAL 10000000. A text column compared with a numeric one
// (a model that keeps a number it could not type as its text) is read as
// numbers where its text is one (numberInText).
// Timestamps without a zone (MySQL DATETIME, DuckDB TIMESTAMP) are read as
// UTC; the source connection's time zone is set to UTC so that MySQL
// TIMESTAMP columns are too.

// kind is what a canonical value is, for ordering keys.
type kind uint8

const (
	kindNull kind = iota
	kindNumber
	kindText
)

func (k kind) String() string {
	return [...]string{"NULL", "a number", "text"}[k]
}

// value is one canonical value: a number (ordered as a number, whichever
// type it came as: integer, unsigned, decimal or float) or text (ordered
// byte by byte).
type value struct {
	kind kind
	n    int64    // a number that is an int64
	rat  *big.Rat // any other number (decimal, float, unsigned past int64), exactly
	text string   // the canonical text of every non-null value
	// bound is the value to pass back to a database as a key bound: the
	// number as a number, a float as the float it was read as (its
	// shortest text, read back as a double, is another number for a
	// FLOAT column: k > '0.1' selects the FLOAT 0.1 again, forever), a
	// decimal as its exact text, text as text. Float keys are read this
	// way rather than refused: a float32 widens to float64 exactly, so
	// the bound is the stored value itself and ranges neither repeat nor
	// skip a row, and tables keyed by a float do exist.
	bound any
}

// timestampLayout has a fixed width, so timestamps order as text.
const timestampLayout = "2006-01-02T15:04:05.000000Z"

// canonical turns a value scanned from database/sql (into an any) into its
// canonical form. dbType is the column's DatabaseTypeName (or the declared
// type, where the driver's does not tell); it tells decimals, dates, times,
// bits and JSON apart from text and timestamps.
func canonical(v any, dbType string) (value, error) {
	dbType = strings.ToUpper(dbType)
	isDecimal := strings.HasPrefix(dbType, "DECIMAL") || strings.HasPrefix(dbType, "NUMERIC")
	if v == nil {
		return value{}, nil
	}
	switch dbType {
	case "JSON":
		return jsonValue(v)
	case "TIME":
		return timeOfDayValue(v)
	case numberInText:
		return numberTextValue(v)
	case dateInTimestamp:
		if t, ok := v.(time.Time); ok {
			if t = t.UTC(); t.Equal(t.Truncate(24 * time.Hour)) {
				return textOnly(t.Format(time.DateOnly)), nil
			}
			return textOnly(t.Format(timestampLayout)), nil // no date: differs
		}
	case timeInMicros:
		if n, ok := v.(int64); ok {
			return textOnly(microsTime(n)), nil
		}
		if n, ok := v.(int32); ok {
			return textOnly(microsTime(int64(n))), nil
		}
	case "BIT":
		// MariaDB sends BIT(n) as n bits, big-endian, in bytes; Debezium
		// sends BIT(1) as a boolean, wider ones as bytes: the number the
		// bits make is the form both have.
		if b, ok := v.([]byte); ok && len(b) <= 8 {
			var u uint64
			for _, c := range b {
				u = u<<8 | uint64(c)
			}
			return uintValue(u), nil
		}
	}
	switch x := v.(type) {
	case int64:
		return intValue(x), nil
	case int32:
		return intValue(int64(x)), nil
	case int16:
		return intValue(int64(x)), nil
	case int8:
		return intValue(int64(x)), nil
	case int:
		return intValue(int64(x)), nil
	case uint64:
		return uintValue(x), nil
	case uint32:
		return intValue(int64(x)), nil
	case uint16:
		return intValue(int64(x)), nil
	case uint8:
		return intValue(int64(x)), nil
	case bool:
		if x {
			return intValue(1), nil
		}
		return intValue(0), nil
	case *big.Int: // DuckDB HUGEINT
		if x.IsInt64() {
			return intValue(x.Int64()), nil
		}
		return value{kind: kindNumber, rat: new(big.Rat).SetInt(x), text: x.String(), bound: x.String()}, nil
	case float64:
		return floatValue(x, 64), nil
	case float32:
		return floatValue(float64(x), 32), nil
	case time.Time:
		if dbType == "DATE" {
			return textOnly(x.Format(time.DateOnly)), nil
		}
		return textOnly(x.UTC().Format(timestampLayout)), nil
	case []byte:
		return textValue(string(x), isDecimal, dbType)
	case string:
		return textValue(x, isDecimal, dbType)
	case fmt.Stringer: // DuckDB's Decimal, UUID
		return textValue(x.String(), isDecimal, dbType)
	}
	return value{}, fmt.Errorf("a value of type %T (%s) has no canonical form", v, dbType)
}

func textOnly(s string) value { return value{kind: kindText, text: s, bound: s} }

// uintValue is an unsigned integer: past int64 it is still a number,
// ordered after every signed one.
func uintValue(u uint64) value {
	if u <= math.MaxInt64 {
		return intValue(int64(u))
	}
	return value{kind: kindNumber, rat: new(big.Rat).SetUint64(u), text: strconv.FormatUint(u, 10), bound: u}
}

// floatValue is a float of bits 32 or 64: ordered as the exact number it
// is, hashed as its shortest text written without an exponent and without
// a negative zero — the text a decimal or an integer of that value has
// (1e7 is 10000000). NaN and infinities are no number: text.
func floatValue(f float64, bits int) value {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return textOnly(strconv.FormatFloat(f, 'g', -1, bits))
	}
	if f == 0 {
		f = 0 // -0 is 0, as a decimal's -0.00
	}
	return value{kind: kindNumber, rat: new(big.Rat).SetFloat64(f), text: strconv.FormatFloat(f, 'f', -1, bits), bound: f}
}

// numberInText is the type a text column is read as when the other side's
// column is numeric (CompareStreams): its values that are numbers
// compare as numbers, the rest as text.
const numberInText = "TRACELAKE NUMBER IN TEXT" // upper case: canonical compares upper-cased names

// dateInTimestamp is the type a timestamp column is read as when the
// other side's is a DATE (change capture holds a date as a timestamp at
// its midnight, UTC): a midnight is the date, any other time stays a
// timestamp, which differs from every date.
const dateInTimestamp = "TRACELAKE DATE IN TIMESTAMP"

// timeInMicros is the type an integer column is read as when the other
// side's is a TIME (change capture holds a TIME as its µs, negative ones
// too: MySQL's TIME spans ±838:59:59): the text of the time the µs make,
// as a TIME's canonical form is.
const timeInMicros = "TRACELAKE TIME IN MICROSECONDS"

// microsTime writes us µs as MySQL writes a TIME: [-]HH:MM:SS (hours of
// two digits or more), then .ffffff where the fraction is not zero, as
// timeOfDayValue gives the source's.
func microsTime(us int64) string {
	sign := ""
	u := uint64(us)
	if us < 0 {
		sign, u = "-", uint64(-(us+1))+1
	}
	secs, frac := u/1_000_000, u%1_000_000
	s := fmt.Sprintf("%s%02d:%02d:%02d", sign, secs/3600, secs/60%60, secs%60)
	if frac != 0 {
		s += fmt.Sprintf(".%06d", frac)
	}
	return s
}

// numberPattern is a decimal number as text, with an exponent or not.
var numberPattern = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$`)

// numberTextValue is text that may be a number (numberInText): a number
// written as decimal digits, with an exponent or not ("10.50", "1e+07"),
// is that number; other text stays text.
func numberTextValue(v any) (value, error) {
	s, ok := v.(string)
	if b, isBytes := v.([]byte); isBytes {
		s, ok = string(b), true
	}
	if !ok {
		return canonical(v, "")
	}
	if !numberPattern.MatchString(s) {
		return textOnly(s), nil
	}
	return textValue(plainDecimal(s), true, "")
}

// plainDecimal writes a number of numberPattern without its exponent:
// "1.5e3" is "1500", "25e-8" is "0.00000025".
func plainDecimal(s string) string {
	mant, exp, found := strings.Cut(strings.ToLower(s), "e")
	if !found {
		return s
	}
	e, _ := strconv.Atoi(exp) // at most three digits: numberPattern
	sign := ""
	if mant != "" && (mant[0] == '-' || mant[0] == '+') {
		sign, mant = mant[:1], mant[1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	digits, point := whole+frac, len(whole)+e
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits))
	}
	return sign + digits[:point] + "." + digits[point:]
}

// jsonValue is a JSON document written compactly with its objects' keys
// sorted, so that the same document hashes equal whichever spacing and key
// order it was stored with. MySQL's driver sends the text ([]byte);
// DuckDB's sends it decoded (numbers as float64, a JSON string as a Go
// string), so the text is decoded the same way first: numbers compare as
// doubles.
func jsonValue(v any) (value, error) {
	if text, ok := v.([]byte); ok {
		if err := json.Unmarshal(text, &v); err != nil {
			return value{}, fmt.Errorf("JSON column: %w", err)
		}
	}
	b, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		return value{}, fmt.Errorf("JSON column: %w", err)
	}
	return textOnly(string(b)), nil
}

// timeOfDayValue is a TIME as HH:MM:SS, with .ffffff only when there is a
// fraction: MySQL's drivers send the text ("10:11:12", "10:11:12.500"),
// DuckDB's a time.Time on 0001-01-01. MySQL's TIME also holds negative
// times and hours past 23: those keep their hours as written.
func timeOfDayValue(v any) (value, error) {
	switch x := v.(type) {
	case time.Time:
		s := x.Format("15:04:05")
		if us := x.Nanosecond() / 1000; us != 0 {
			s += fmt.Sprintf(".%06d", us)
		}
		return textOnly(s), nil
	case []byte:
		v = string(x)
	}
	s, ok := v.(string)
	if !ok {
		return value{}, fmt.Errorf("a TIME value of type %T has no canonical form", v)
	}
	hms, frac, _ := strings.Cut(s, ".")
	if strings.Trim(frac, "0123456789") != "" || len(frac) > 6 {
		return value{}, fmt.Errorf("%q is not a time of day", s)
	}
	if strings.Trim(frac, "0") != "" {
		hms += "." + frac + strings.Repeat("0", 6-len(frac))
	}
	return textOnly(hms), nil
}

func intValue(n int64) value {
	return value{kind: kindNumber, n: n, text: strconv.FormatInt(n, 10), bound: n}
}

// textValue is text, or a number the driver sent as text: MySQL's drivers
// send DECIMAL as text (and integers too in the text protocol of old
// versions).
func textValue(s string, isDecimal bool, dbType string) (value, error) {
	if isDecimal {
		d, err := canonicalDecimal(s)
		if err != nil {
			return value{}, err
		}
		if n, err := strconv.ParseInt(d, 10, 64); err == nil {
			return intValue(n), nil
		}
		r, _ := new(big.Rat).SetString(d) // d is a plain decimal
		// The exact text goes back as the bound: the database reads it
		// as the decimal it is.
		return value{kind: kindNumber, rat: r, text: d, bound: d}, nil
	}
	if strings.HasSuffix(dbType, "INT") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return intValue(n), nil
		}
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return uintValue(u), nil
		}
	}
	return textOnly(s), nil
}

// canonicalDecimal writes an exact decimal without a plus sign, leading
// zeros, trailing fractional zeros or a negative zero: "-010.500" is
// "-10.5", "0.00" is "0".
func canonicalDecimal(s string) (string, error) {
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	whole, frac, _ := strings.Cut(digits, ".")
	if whole == "" && frac == "" || strings.Trim(whole, "0123456789") != "" || strings.Trim(frac, "0123456789") != "" {
		return "", fmt.Errorf("%q is not a decimal number", s)
	}
	whole = strings.TrimLeft(whole, "0")
	frac = strings.TrimRight(frac, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg && out != "0" {
		out = "-" + out
	}
	return out, nil
}

// compare orders canonical values: NULL first, numbers as numbers (as the
// databases order a numeric key), the rest (and a number against text)
// byte by byte.
func (a value) compare(b value) int {
	switch {
	case a.kind == kindNull || b.kind == kindNull:
		return cmp.Compare(a.kind, b.kind) // kindNull is the lowest kind
	case a.kind == kindNumber && b.kind == kindNumber:
		if a.rat == nil && b.rat == nil {
			return cmp.Compare(a.n, b.n)
		}
		return a.exact().Cmp(b.exact())
	}
	return strings.Compare(a.text, b.text)
}

// exact is a number as a big.Rat.
func (a value) exact() *big.Rat {
	if a.rat != nil {
		return a.rat
	}
	return new(big.Rat).SetInt64(a.n)
}

// arg is the value to pass back to a database for it (see value.bound).
func (a value) arg() any {
	return a.bound
}

// appendHashed appends the value to a row's hashed bytes: NULL as one
// byte, other values as a marker, their length and their text, so that no
// two different rows make the same bytes.
func (a value) appendHashed(dst []byte) []byte {
	if a.kind == kindNull {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendUvarint(dst, uint64(len(a.text)))
	return append(dst, a.text...)
}

// compareKeys orders two keys column by column.
func compareKeys(a, b []value) int {
	for i := range a {
		if c := a[i].compare(b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// keyText shows a key as the report does: its columns' text, ", " between.
func keyText(k []value) string {
	var b bytes.Buffer
	for i, v := range k {
		if i > 0 {
			b.WriteString(", ")
		}
		if v.kind == kindNull {
			b.WriteString("NULL")
		} else {
			b.WriteString(v.text)
		}
	}
	return b.String()
}
