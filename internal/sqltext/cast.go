package sqltext

import (
	"fmt"
	"strings"
)

// offsetPattern matches a time of day ending in a zone offset (Z, +02,
// +02:00, +0200).
const offsetPattern = `:[0-9]{2}(\.[0-9]*)?\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)\s*$`

// TryCast is DuckDB's TRY_CAST(src AS typ) of the text src, except that a
// timestamp with a zone offset cast to TIMESTAMP is the instant in UTC:
// DuckDB's cast drops the offset (10:00+02:00 would be stored as 10:00).
// It is read as TIMESTAMPTZ, whose offset DuckDB honours, and its epoch
// taken back as a TIMESTAMP, so the session's time zone plays no part; a
// text without an offset is cast as it is.
func TryCast(src, typ string) string {
	t := strings.ToUpper(strings.TrimSpace(typ))
	if t != "TIMESTAMP" && t != "DATETIME" {
		return fmt.Sprintf("TRY_CAST(%s AS %s)", src, typ)
	}
	return fmt.Sprintf("CASE WHEN regexp_matches(%s, %s) THEN make_timestamp(epoch_us(TRY_CAST(%s AS TIMESTAMPTZ))) ELSE TRY_CAST(%s AS TIMESTAMP) END",
		src, String(offsetPattern), src, src)
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

// exactScale is the count of fraction digits an exact numeric type holds:
// 0 for an integer type, s for DECIMAL(p,s) or NUMERIC(p,s) (DuckDB's
// default DECIMAL is (18,3)); false for any other type.
func exactScale(typ string) (int, bool) {
	_, s, ok := exactDigits(typ)
	return s, ok
}

// exactDigits are the digits p and the fraction digits s of an exact
// numeric type (p is 0 for an integer type, whose digits vary); false for
// any other type.
func exactDigits(typ string) (p, s int, ok bool) {
	t := strings.ToUpper(strings.Join(strings.Fields(typ), ""))
	if integerTypes[t] {
		return 0, 0, true
	}
	args, ok := strings.CutPrefix(t, "DECIMAL")
	if !ok {
		if args, ok = strings.CutPrefix(t, "NUMERIC"); !ok {
			return 0, 0, false
		}
	}
	if args == "" {
		return 18, 3, true
	}
	if _, err := fmt.Sscanf(args, "(%d,%d)", &p, &s); err == nil {
		return p, s, true
	}
	if _, err := fmt.Sscanf(args, "(%d)", &p); err == nil {
		return p, 0, true
	}
	return 0, 0, false
}

// FractionLost is SQL, true when TRY_CAST(src AS typ) of the text src
// rounds it: DuckDB's cast of text to an integer or DECIMAL type rounds
// the fraction digits the type does not hold ('1.5' AS BIGINT is 2), as
// Databend's cast of a variant does, where a value that does not fit
// should be refused, not changed. A number written out is rounded when a
// digit past the type's scale is not zero (exact, whatever its size); one
// with an exponent, into an integer type, when its double has a fraction
// (a double above 2^53 has none: its fraction was lost before any cast);
// into a DECIMAL(p,s), when its cast to a DECIMAL of 38 digits and as
// many fraction digits as its value leaves differs from its cast to
// DECIMAL(p,s) (decimalExponentLost; both casts read the exponent
// exactly: a digit past the 38th is not seen). regexp is the
// dialect's function of (text, pattern) true when the pattern matches:
// DuckDB's regexp_matches, Databend's regexp_like. "" when typ is neither
// an integer nor a DECIMAL type: no cast to it rounds a number.
func FractionLost(src, typ, regexp string) string {
	precision, scale, ok := exactDigits(typ)
	if !ok {
		return ""
	}
	// An underscore may stand between digits: DuckDB's cast skips it
	// ('1_0.5' AS BIGINT is 11), so the digits held are counted without
	// it. A cast that refuses such a number is rejected before this check.
	digits := "[0-9_]*"
	if scale > 0 {
		digits = fmt.Sprintf("(_*[0-9]){%d}[0-9_]*", scale)
	}
	// No backslash: Databend's string literals read it as an escape. The
	// LIKE before each regular expression is the cheap test that keeps it
	// off the values that cannot match (most: integers written without a
	// point), as this runs for every value of every such column a merge
	// reads; both dialects' AND skips the right side where the left is
	// false.
	// [[:space:]] (RE2's and Rust's ASCII class) is what the casts trim
	// around a number: tabs and line ends too, not spaces alone.
	plain := fmt.Sprintf(`(%s LIKE '%%.%%' AND %s(%s, '^[[:space:]]*[+-]?[0-9_]*[.]%s[1-9][0-9_]*[[:space:]]*$'))`, src, regexp, src, digits)
	exponent := fmt.Sprintf("(%s LIKE '%%e%%' OR %s LIKE '%%E%%')", src, src)
	if scale > 0 {
		lost := decimalExponentLost(src, typ, precision, scale)
		if lost == "" {
			return plain // no DECIMAL holds more of its fraction
		}
		return fmt.Sprintf(`(%s OR %s AND %s)`, plain, exponent, lost)
	}
	d := fmt.Sprintf("abs(TRY_CAST(%s AS DOUBLE))", src)
	return fmt.Sprintf(`(%s OR %s AND %s <> floor(%s))`, plain, exponent, d, d)
}

// decimalExponentLost is SQL, true when the number with an exponent src
// has a fraction digit past scale that is not zero: its cast to the
// DECIMAL(38, 38-k) of a value below 10^k, exact to every digit of 38 the
// value's k integer digits leave to its fraction, differs from its cast to
// typ, DECIMAL(precision, scale). One cast to the DECIMAL of typ's integer
// digits would leave a DECIMAL(38,2) no more fraction than typ holds, and
// any column a fraction past 38-(precision-scale) digits (1e-30 in a
// DECIMAL(18,2)): a type has one scale, so there is one branch per count of
// integer digits, chosen by the value typ rounds src to (below 10^k, src
// rounded finer is too); a value below 1 is given one integer digit too.
// "" when no DECIMAL holds more fraction than typ.
func decimalExponentLost(src, typ string, precision, scale int) string {
	rounded := fmt.Sprintf("TRY_CAST(%s AS %s)", src, typ)
	var b strings.Builder
	// From one integer digit: DuckDB's cast of a number with an exponent
	// to DECIMAL(38,38) fails ('1e-20' is NULL), where DECIMAL(38,37)'s
	// reads it.
	for k := 1; k <= max(precision-scale, 1) && maxDecimalDigits-k > scale; k++ {
		fmt.Fprintf(&b, " WHEN abs(%s) < 1e%d THEN TRY_CAST(%s AS DECIMAL(%d,%d)) <> %s",
			rounded, k, src, maxDecimalDigits, maxDecimalDigits-k, rounded)
	}
	if b.Len() == 0 {
		return ""
	}
	return "CASE" + b.String() + " END"
}

// maxDecimalDigits are the most digits a DECIMAL has (DuckDB's and
// Databend's DECIMAL(38,s)).
const maxDecimalDigits = 38
