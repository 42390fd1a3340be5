package reconcile

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// The canonical form of a value, the same whichever engine it was read
// from, so that equal values hash equal across MySQL/MariaDB and DuckDB:
//
//	integers (and booleans, as 0/1)  decimal digits: 42, -7
//	decimals                         exact text, trailing zeros dropped: 10.5, -0.25, 100
//	floating point                   shortest text that reads back as the same float
//	strings, bytes                   as they are
//	timestamps                       UTC, microseconds: 2024-05-01T10:11:12.000000Z
//	dates                            2024-05-01
//	NULL                             distinct from every value (also from '')
//
// A decimal column compared with an integer one thus matches on equal
// numbers (10.00 and 10), and DECIMAL(12,2) with DECIMAL(18,4).
// Timestamps without a zone (MySQL DATETIME, DuckDB TIMESTAMP) are read as
// UTC; the source connection's time zone is set to UTC so that MySQL
// TIMESTAMP columns are too.

// kind is what a canonical value is, for ordering keys.
type kind uint8

const (
	kindNull kind = iota
	kindInt
	kindText
)

func (k kind) String() string {
	return [...]string{"NULL", "an integer", "text"}[k]
}

// value is one canonical value: an integer (ordered as a number) or text
// (ordered byte by byte).
type value struct {
	kind kind
	n    int64
	text string // the canonical text of every non-null value
}

// timestampLayout has a fixed width, so timestamps order as text.
const timestampLayout = "2006-01-02T15:04:05.000000Z"

// canonical turns a value scanned from database/sql (into an any) into its
// canonical form. dbType is the column's DatabaseTypeName; it tells
// decimals and dates apart from text and timestamps.
func canonical(v any, dbType string) (value, error) {
	dbType = strings.ToUpper(dbType)
	isDecimal := strings.HasPrefix(dbType, "DECIMAL") || strings.HasPrefix(dbType, "NUMERIC")
	switch x := v.(type) {
	case nil:
		return value{}, nil
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
		if x > math.MaxInt64 {
			return value{kind: kindText, text: strconv.FormatUint(x, 10)}, nil
		}
		return intValue(int64(x)), nil
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
		return value{kind: kindText, text: x.String()}, nil
	case float64:
		return value{kind: kindText, text: strconv.FormatFloat(x, 'g', -1, 64)}, nil
	case float32:
		return value{kind: kindText, text: strconv.FormatFloat(float64(x), 'g', -1, 32)}, nil
	case time.Time:
		if dbType == "DATE" {
			return value{kind: kindText, text: x.Format(time.DateOnly)}, nil
		}
		return value{kind: kindText, text: x.UTC().Format(timestampLayout)}, nil
	case []byte:
		return textValue(string(x), isDecimal, dbType)
	case string:
		return textValue(x, isDecimal, dbType)
	case fmt.Stringer: // DuckDB's Decimal, UUID
		return textValue(x.String(), isDecimal, dbType)
	}
	return value{}, fmt.Errorf("a value of type %T (%s) has no canonical form", v, dbType)
}

func intValue(n int64) value {
	return value{kind: kindInt, n: n, text: strconv.FormatInt(n, 10)}
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
		return value{kind: kindText, text: d}, nil
	}
	if strings.HasSuffix(dbType, "INT") {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return intValue(n), nil
		}
	}
	return value{kind: kindText, text: s}, nil
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

// compare orders canonical values: NULL first, integers as numbers, the
// rest (and an integer against text) byte by byte.
func (a value) compare(b value) int {
	switch {
	case a.kind == kindNull || b.kind == kindNull:
		return cmp.Compare(a.kind, b.kind) // kindNull is the lowest kind
	case a.kind == kindInt && b.kind == kindInt:
		return cmp.Compare(a.n, b.n)
	}
	return strings.Compare(a.text, b.text)
}

// arg is the value to pass back to a database for it: an integer as one,
// the rest as its canonical text.
func (a value) arg() any {
	switch a.kind {
	case kindNull:
		return nil
	case kindInt:
		return a.n
	}
	return a.text
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
