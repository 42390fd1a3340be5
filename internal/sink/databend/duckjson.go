package databend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// duckJSONText is the text DuckDB's transform stores for the JSON value v
// in a VARCHAR column (json_extract_string, which writes the value as its
// yyjson reader read it): no whitespace; members in their order, a key
// given twice kept twice; strings escaped as yyjson escapes them; an
// integer of 64 bits as its digits ("-0" as "0"), a wider one and a number
// out of a double's range as written (yyjson's bignum as raw); any other
// number as the double it reads as, in yyjson's form (yyjsonFloat).
func duckJSONText(v []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var b strings.Builder
	// open holds, per open object or array, whether a member was written
	// and, for an object, whether the next string is a key.
	type level struct {
		object, any, value bool
	}
	var open []level
	sep := func() {
		if len(open) == 0 {
			return
		}
		l := &open[len(open)-1]
		switch {
		case l.object && l.value:
			b.WriteByte(':')
		case l.any:
			b.WriteByte(',')
		}
		l.any = true
		if l.object {
			l.value = !l.value
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read JSON: %w", err)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				sep()
				open = append(open, level{object: t == '{'})
			default:
				open = open[:len(open)-1]
			}
			b.WriteByte(byte(t))
		case string:
			sep()
			writeYYJSONString(&b, t)
		case json.Number:
			sep()
			b.WriteString(yyjsonNumber(string(t)))
		case bool:
			sep()
			b.WriteString(strconv.FormatBool(t))
		case nil:
			sep()
			b.WriteString("null")
		}
	}
	if len(open) != 0 {
		return "", errors.New("read JSON: unterminated")
	}
	return b.String(), nil
}

// writeYYJSONString writes s quoted as yyjson writes a string by default:
// '"' and '\\' escaped, \b \f \n \r \t short, the other control characters
// as \u00XX in capitals, everything else (/, DEL, U+2028, any UTF-8) as it
// is.
func writeYYJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04X`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// yyjsonNumber is the JSON number n as DuckDB's JSON reader gives it back.
func yyjsonNumber(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		if i, ok := new(big.Int).SetString(n, 10); ok && (i.IsInt64() || i.IsUint64()) {
			return i.String()
		}
		return n // past 64 bits: kept raw
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) {
		return n // out of a double's range: kept raw
	}
	return yyjsonFloat(f)
}

// yyjsonFloat is a finite double as yyjson writes it (write_f64_raw:
// ECMAScript's Number::toString, but with the sign of -0.0 kept, a point
// kept on a whole number, and no '+' in the exponent): the shortest
// digits that read back as f, positionally when the decimal exponent is
// within -6..=20, else as d.ddde±X.
func yyjsonFloat(f float64) string { return shortestFloat(f, -6, 20, "") }

// serdeNumber is the JSON number n as COPY writes it into a string column
// (json_ast.rs read_string: serde_json's Number Display, serde_json
// without arbitrary_precision): an integer that is an i64 or a u64 as its
// digits; any other number (a point, an exponent, past 64 bits, and "-0",
// which serde_json reads as the double -0.0) as that double in zmij's
// form (serdeFloat); "" for one serde_json refuses (out of a double's
// range).
func serdeNumber(n string) string {
	negativeZero := strings.HasPrefix(n, "-") && strings.Trim(n[1:], "0") == ""
	if !strings.ContainsAny(n, ".eE") && !negativeZero {
		if i, ok := new(big.Int).SetString(n, 10); ok && (i.IsInt64() || i.IsUint64()) {
			return i.String()
		}
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil || math.IsInf(f, 0) {
		return ""
	}
	return serdeFloat(f)
}

// serdeFloat is a finite double as serde_json 1.0.149 writes it (zmij's
// format_finite, databend-query's Cargo.lock): the shortest digits that
// read back as f, positionally when the decimal exponent is within
// -5..=15 (".0" after a whole number), else as d.ddde+X or d.ddde-X.
func serdeFloat(f float64) string { return shortestFloat(f, -5, 15, "+") }

// shortestFloat writes the finite double f with the shortest digits that
// read back as f: positionally when its decimal exponent is within
// lo..=hi (".0" after a whole number, "-0.0" for negative zero), else as
// d.ddde-X, or d.ddde<plus>X for a positive exponent.
func shortestFloat(f float64, lo, hi int, plus string) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	n := len(digits)
	switch {
	case e < lo || e > hi:
		out := digits[:1]
		if n > 1 {
			out += "." + digits[1:]
		}
		if e >= 0 {
			return sign + out + "e" + plus + strconv.Itoa(e)
		}
		return sign + out + "e-" + strconv.Itoa(-e)
	case n-1 <= e:
		return sign + digits + strings.Repeat("0", e-(n-1)) + ".0"
	case e >= 0:
		return sign + digits[:e+1] + "." + digits[e+1:]
	default:
		return sign + "0." + strings.Repeat("0", -e-1) + digits
	}
}

// duckCastBool is DuckDB's cast of text to BOOLEAN as TRY_CAST makes it
// (cast_operators.hpp TryCastStringBool, strict false): t, y, 1, yes and
// true are true, f, n, 0, no and false are false, ASCII letters in any
// case (std::tolower: sqltext.DuckDBFold), nothing around them; false for
// any other text.
func duckCastBool(text string) (value, ok bool) {
	switch sqltext.DuckDBFold(text) {
	case "t", "y", "1", "yes", "true":
		return true, true
	case "f", "n", "0", "no", "false":
		return false, true
	}
	return false, false
}
