package sqltext

import (
	"fmt"
	"strconv"
	"strings"
)

// offsetPattern matches a time of day ending in a zone offset (Z, +02,
// +02:00, +0200, +05:21:10). An offset with seconds is what ISO writers
// (Python's isoformat, Java's OffsetDateTime) give a zone's local mean
// time; DuckDB's TIMESTAMPTZ cast honours it and its TIMESTAMP cast drops
// it, as it does the others.
const offsetPattern = `:[0-9]{2}(\.[0-9]*)?\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2}(:[0-9]{2})?)?)\s*$`

// TryCast is DuckDB's TRY_CAST(src AS typ) of the text src, except that a
// timestamp with a zone offset cast to TIMESTAMP is the instant in UTC:
// DuckDB's cast drops the offset (10:00+02:00 would be stored as 10:00).
// It is read as TIMESTAMPTZ, whose offset DuckDB honours, and its epoch
// taken back as a TIMESTAMP, so the session's time zone plays no part; a
// text without an offset is cast as it is. Into a TIMESTAMPTZ, a text
// without an offset is read as UTC.
//
// Every zoneless timestamp type is so, whatever its precision or spelling
// (TIMESTAMP_S, TIMESTAMP_MS, TIMESTAMP(3), DATETIME(3), TIMESTAMP(3)
// WITHOUT TIME ZONE):
// DuckDB's cast of the text to each drops the offset as its cast to
// TIMESTAMP does. The instant is then cast to the column's type.
// TIMESTAMP_NS is not among them: DuckDB's cast to it honours the offset,
// and keeps the nanoseconds a TIMESTAMPTZ would round away.
func TryCast(src, typ string) string {
	t := strings.ToUpper(strings.Join(strings.Fields(typ), " "))
	if t == "TIMESTAMP" || t == "DATETIME" {
		return fmt.Sprintf("CASE WHEN regexp_matches(%s, %s) THEN make_timestamp(epoch_us(TRY_CAST(%s AS TIMESTAMPTZ))) ELSE TRY_CAST(%s AS TIMESTAMP) END",
			src, String(offsetPattern), src, src)
	}
	if t == "TIMESTAMPTZ" || t == "TIMESTAMP WITH TIME ZONE" {
		// Without an offset DuckDB's cast reads the text in the session's
		// time zone (the machine's, by default): read it as UTC, so the
		// same text is the same instant wherever it is merged. A text
		// naming its zone (10:00 America/New_York), which the cast to
		// TIMESTAMP refuses, is read by the cast to TIMESTAMPTZ, which
		// honours the name.
		return fmt.Sprintf("CASE WHEN regexp_matches(%s, %s) THEN TRY_CAST(%s AS %s) ELSE coalesce(timezone('UTC', TRY_CAST(%s AS TIMESTAMP)), TRY_CAST(%s AS %s)) END",
			src, String(offsetPattern), src, typ, src, src, typ)
	}
	if zonelessTimestamp(t) {
		return fmt.Sprintf("CASE WHEN regexp_matches(%s, %s) THEN TRY_CAST(make_timestamp(epoch_us(TRY_CAST(%s AS TIMESTAMPTZ))) AS %s) ELSE TRY_CAST(%s AS %s) END",
			src, String(offsetPattern), src, typ, src, typ)
	}
	return fmt.Sprintf("TRY_CAST(%s AS %s)", src, typ)
}

// zonelessTimestamp says whether t (upper case, single spaces) is a
// DuckDB timestamp type whose cast from text drops a zone offset:
// TIMESTAMP_S, _MS, _US, or TIMESTAMP or DATETIME
// (MySQL's spelling) with a precision up to 6 digits (TIMESTAMP_S, _MS or
// TIMESTAMP), each with or without WITHOUT TIME ZONE. Beyond 6 digits it
// is TIMESTAMP_NS, whose cast honours the offset and keeps nanoseconds
// that reading the text as a TIMESTAMPTZ would cut.
func zonelessTimestamp(t string) bool {
	t = strings.TrimSuffix(t, " WITHOUT TIME ZONE")
	switch t {
	case "TIMESTAMP", "DATETIME", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_US":
		return true
	}
	base, rest, ok := strings.Cut(t, "(")
	if base = strings.TrimSpace(base); !ok || (base != "TIMESTAMP" && base != "DATETIME") {
		return false
	}
	digits, ok := strings.CutSuffix(strings.TrimSpace(rest), ")")
	if !ok {
		return false
	}
	p, err := strconv.Atoi(strings.TrimSpace(digits))
	return err == nil && p <= 6
}

// integerTypes are DuckDB's and Databend's integer types and their
// aliases (Databend's INT8 is DuckDB's TINYINT, DuckDB's its BIGINT:
// integers both).
var integerTypes = map[string]bool{
	"TINYINT": true, "SMALLINT": true, "INTEGER": true, "BIGINT": true, "HUGEINT": true,
	"UTINYINT": true, "USMALLINT": true, "UINTEGER": true, "UBIGINT": true, "UHUGEINT": true,
	"INT1": true, "INT2": true, "INT4": true, "INT8": true, "INT": true, "SHORT": true, "LONG": true, "SIGNED": true,
	"INT16": true, "INT32": true, "INT64": true, "UINT8": true, "UINT16": true, "UINT32": true, "UINT64": true,
}

// integerType says whether typ is one of integerTypes.
func integerType(typ string) bool {
	return integerTypes[strings.ToUpper(strings.Join(strings.Fields(typ), ""))]
}

// InfinityLost is SQL, true when cast, TRY_CAST(src AS typ) of the text
// src, is infinite though src is a number (1e400 into a DOUBLE, 1e39 into
// a FLOAT): DuckDB's cast of text to a floating type overflows to
// infinity without an error, and so does Databend's cast of a variant to
// FLOAT (variant.rs try_to_float32: to_f64, then num_traits::cast to f32,
// which saturates), a value other than was sent, so the row is refused
// instead. Their own spelling of infinity ("inf", "-Infinity") is
// infinity as sent. regexp is the dialect's regexp_matches (DuckDB) or
// regexp_like (Databend, which has no isinf: a value past the largest
// double is infinite). "" for a type that is not floating.
func InfinityLost(src, cast, typ, regexp string) string {
	switch strings.ToUpper(strings.TrimSpace(typ)) {
	case "DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8", "FLOAT32", "FLOAT64":
	default:
		return ""
	}
	if regexp == "regexp_matches" {
		return fmt.Sprintf("(isinf(%s) AND NOT regexp_matches(%s, '^[[:space:]]*[+-]?inf', 'i'))", cast, src)
	}
	return fmt.Sprintf("(ABS(%s) > 1.7976931348623157e308 AND NOT %s(%s, '^[[:space:]]*[+-]?(?i:inf)'))", cast, regexp, src)
}

// FractionLost is SQL, true when TRY_CAST(src AS typ) of the text src
// rounds a fraction away: DuckDB's cast of text to an integer type rounds
// it ('1.5' AS BIGINT is 2), as Databend's cast of a variant does, and an
// integer column (a count, a key, a version) given 1.5 holds another
// value than was sent, so the row is refused instead. A DECIMAL(p,s) is
// not checked: it rounds to its scale as SQL's assignment to a NUMERIC
// does, which is what its declared scale asks for (a cost computed in
// floating point has a long fraction; DECIMAL(12,6) keeps six digits of
// it). A number written out is rounded when a digit past its point is not
// zero (exact, whatever its size); one with an exponent when its double
// has a fraction (a double above 2^53 has none: its fraction was lost
// before any cast). regexp is the dialect's function of (text, pattern)
// true when the pattern matches: DuckDB's regexp_matches, Databend's
// regexp_like. "" when typ is not an integer type.
func FractionLost(src, typ, regexp string) string {
	if !integerType(typ) {
		return ""
	}
	// No backslash: Databend's string literals read it as an escape. The
	// LIKE before each regular expression is the cheap test that keeps it
	// off the values that cannot match (most: integers written without a
	// point), as this runs for every value of every such column a merge
	// reads; both dialects' AND skips the right side where the left is
	// false. [[:space:]] (RE2's and Rust's ASCII class) is what the casts
	// trim around a number: tabs and line ends too, not spaces alone. An
	// underscore may stand between digits: DuckDB's cast skips it ('1_0.5'
	// AS BIGINT is 11); a cast that refuses such a number is rejected
	// before this check.
	plain := fmt.Sprintf(`(%s LIKE '%%.%%' AND %s(%s, '^[[:space:]]*[+-]?[0-9_]*[.][0-9_]*[1-9][0-9_]*[[:space:]]*$'))`, src, regexp, src)
	exponent := fmt.Sprintf("(%s LIKE '%%e%%' OR %s LIKE '%%E%%')", src, src)
	d := fmt.Sprintf("abs(TRY_CAST(%s AS DOUBLE))", src)
	return fmt.Sprintf(`(%s OR %s AND %s <> floor(%s))`, plain, exponent, d, d)
}
