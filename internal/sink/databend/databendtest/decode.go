package databendtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracelake/tracelake/internal/sqltext"
)

// This file is how COPY's NDJSON reader puts a JSON field into a column:
// storages/stage/src/read/row_based/formats/ndjson/block_builder.rs
// read_row (serde_json::Value, then one decoder per column) and formats
// field_decoder/json_ast.rs read_field_with_data_type, under the default
// settings (numeric_cast_option "rounding": is_rounding_mode).

// objectFields reads a JSON object's fields in their order, as
// serde_json's Value keeps them (preserve_order: an IndexMap in which a
// key given twice keeps its last value, serde_json value/de.rs
// visit_map's insert).
func objectFields(line []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, errors.New("not a JSON object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		keys, vals = append(keys, k.(string)), append(vals, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	return keys, vals, nil
}

// intRanges are the bounds of Databend's integer types (common/expression
// types/number.rs), by every name DESC or a CREATE may give them.
var intRanges = map[string][2]float64{
	"TINYINT": {math.MinInt8, math.MaxInt8}, "INT8": {math.MinInt8, math.MaxInt8},
	"SMALLINT": {math.MinInt16, math.MaxInt16}, "INT16": {math.MinInt16, math.MaxInt16},
	"INT": {math.MinInt32, math.MaxInt32}, "INTEGER": {math.MinInt32, math.MaxInt32}, "INT32": {math.MinInt32, math.MaxInt32},
	"BIGINT": {math.MinInt64, math.MaxInt64}, "INT64": {math.MinInt64, math.MaxInt64},
	"TINYINT UNSIGNED": {0, math.MaxUint8}, "UINT8": {0, math.MaxUint8},
	"SMALLINT UNSIGNED": {0, math.MaxUint16}, "UINT16": {0, math.MaxUint16},
	"INT UNSIGNED": {0, math.MaxUint32}, "UINT32": {0, math.MaxUint32},
	"BIGINT UNSIGNED": {0, math.MaxUint64}, "UINT64": {0, math.MaxUint64},
}

var (
	reDecimalType = regexp.MustCompile(`^DECIMAL\((\d+),\s*(\d+)\)$`)
	reArrayType   = regexp.MustCompile(`^ARRAY\((.+)\)$`)
	reNullable    = regexp.MustCompile(`^NULLABLE\((.+)\)$`)
	// reDecimalText is what read_decimal (expression utils/serialize.rs)
	// reads with exact = true: digits, a point, an exponent.
	reDecimalText = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)
)

// decodeField returns what a column of type typ holds for the JSON value
// v (as JSON), or Databend's decode error.
func decodeField(typ string, v json.RawMessage) (json.RawMessage, error) {
	t, notNull := splitNull(typ)
	if string(v) == "null" {
		// A column's null goes by NULL_FIELD_AS, NULL unless the
		// FILE_FORMAT names it (meta/app src/principal/file_format.rs,
		// NdJsonFileFormatParams::try_create: the default of a format
		// written in the statement is NullAs::Null, not Default's
		// FieldDefault): NULL into a nullable column, and a column that
		// is not nullable refuses it (storages/stage src/read/row_based/
		// formats/ndjson/block_builder.rs, read_row: ColumnDecodeError).
		if notNull {
			return nil, errors.New("null value is not allowed for non-nullable field, when NULL_FIELDS_AS=NULL")
		}
		return v, nil
	}
	return decodeValue(t, v)
}

// decodeElem is decodeField for a value inside a column (an array's
// element): its type is nullable unless written NOT NULL (sql planner
// semantic/types.rs resolve_type_name wraps every level of a column's
// type in Nullable unless NOT NULL is given, under the default
// ddl_column_type_nullable = 1, settings_default.rs; ARRAY(STRING) NOT
// NULL removes the outer Nullable alone). A null into a nullable type is
// NULL (json_ast.rs read_nullable); into one that is not, it reaches the
// type's own reader (read_field_with_data_type): read_string writes the
// text "null", read_variant stores JSON null, and every other reader
// refuses it.
func decodeElem(typ string, v json.RawMessage) (json.RawMessage, error) {
	t, notNull := splitNull(typ)
	if string(v) != "null" {
		return decodeValue(t, v)
	}
	if !notNull {
		return v, nil // read_nullable
	}
	switch {
	case t == "VARCHAR" || t == "STRING" || t == "TEXT":
		return json.RawMessage(`"null"`), nil // read_string: Value::Null => "null"
	case t == "VARIANT" || t == "JSON":
		return v, nil // read_variant: jsonb null
	case intRanges[t] != [2]float64{} || t == "FLOAT" || t == "DOUBLE" || t == "FLOAT32" || t == "FLOAT64":
		return nil, errors.New("Incorrect json value, must be number")
	case t == "BOOLEAN" || t == "BOOL":
		return nil, errors.New("Incorrect boolean value")
	case reDecimalType.MatchString(t):
		return nil, errors.New("Incorrect json value for decimal")
	case t == "DATE":
		return nil, errors.New("Incorrect date value")
	case t == "TIMESTAMP" || t == "DATETIME":
		return nil, errors.New("Incorrect timestamp value")
	case reArrayType.MatchString(t):
		return nil, errors.New("Incorrect json value, must be array")
	}
	return nil, fmt.Errorf("Incorrect json value for %s", t)
}

// splitNull reads a type as a CREATE writes it ("T NOT NULL", "T NULL",
// "NULLABLE(T)"), in capitals with single spaces: T, and whether it was
// declared NOT NULL.
func splitNull(typ string) (string, bool) {
	t := strings.ToUpper(strings.Join(strings.Fields(typ), " "))
	if inner, ok := strings.CutSuffix(t, " NOT NULL"); ok {
		return inner, true
	}
	t = strings.TrimSuffix(t, " NULL")
	if m := reNullable.FindStringSubmatch(t); m != nil {
		t = m[1]
	}
	return t, false
}

// descType is a type as DESC shows it: without the NULLs of any level
// (interpreters util.rs generate_desc_schema: the type's
// remove_recursive_nullable, then sql_name), so DESC cannot tell
// ARRAY(STRING) from ARRAY(STRING NOT NULL).
func descType(typ string) string {
	t, _ := splitNull(typ)
	for {
		i := strings.Index(t, "NULLABLE(")
		if i < 0 {
			break
		}
		depth, j := 0, i+len("NULLABLE")
		for ; j < len(t); j++ {
			if t[j] == '(' {
				depth++
			} else if t[j] == ')' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		if j == len(t) {
			break
		}
		t = t[:i] + t[i+len("NULLABLE("):j] + t[j+1:]
	}
	return reInnerNull.ReplaceAllString(t, "")
}

// wrappedDisplay is a column type as system.columns' type shows it
// (expression schema.rs TableDataType::wrapped_display): Nullable(…)
// around each level that is nullable (every one not declared NOT NULL,
// but a map's key: resolve_type_name), Array(…), Map(K, V), Tuple(…)
// without the fields' names, and the other types as their Display
// (utils/display.rs: String, Int64, Decimal(10, 2)).
func wrappedDisplay(typ string) string {
	t, notNull := splitNull(typ)
	var body string
	if m := reArrayType.FindStringSubmatch(t); m != nil {
		body = "Array(" + wrappedDisplay(m[1]) + ")"
	} else if inner, ok := strings.CutPrefix(t, "MAP("); ok && strings.HasSuffix(t, ")") {
		kv := sqltext.SplitTop(strings.TrimSuffix(inner, ")"))
		k, _ := splitNull(kv[0])
		body = "Map(" + baseDisplay(k) + ", " + wrappedDisplay(kv[len(kv)-1]) + ")"
	} else if inner, ok := strings.CutPrefix(t, "TUPLE("); ok && strings.HasSuffix(t, ")") {
		var fields []string
		for _, f := range sqltext.SplitTop(strings.TrimSuffix(inner, ")")) {
			f = strings.TrimSpace(f)
			// "NAME TYPE", or an unnamed field's "TYPE".
			if n, rest, ok := strings.Cut(f, " "); ok && !strings.Contains(n, "(") && !strings.HasPrefix(rest, "NULL") && !strings.HasPrefix(rest, "NOT NULL") {
				f = rest
			}
			fields = append(fields, wrappedDisplay(f))
		}
		body = "Tuple(" + strings.Join(fields, ", ") + ")"
	} else {
		body = baseDisplay(t)
	}
	if notNull {
		return body
	}
	return "Nullable(" + body + ")"
}

// baseDisplay is a scalar type's Display (utils/display.rs).
func baseDisplay(t string) string {
	switch t {
	case "VARCHAR", "STRING", "TEXT":
		return "String"
	case "BOOLEAN", "BOOL":
		return "Boolean"
	case "TINYINT", "INT8":
		return "Int8"
	case "SMALLINT", "INT16":
		return "Int16"
	case "INT", "INTEGER", "INT32":
		return "Int32"
	case "BIGINT", "INT64":
		return "Int64"
	case "TINYINT UNSIGNED", "UINT8":
		return "UInt8"
	case "SMALLINT UNSIGNED", "UINT16":
		return "UInt16"
	case "INT UNSIGNED", "UINT32":
		return "UInt32"
	case "BIGINT UNSIGNED", "UINT64":
		return "UInt64"
	case "FLOAT", "FLOAT32", "REAL":
		return "Float32"
	case "DOUBLE", "FLOAT64":
		return "Float64"
	case "TIMESTAMP", "DATETIME":
		return "Timestamp"
	case "DATE":
		return "Date"
	case "VARIANT", "JSON":
		return "Variant"
	}
	if m := reDecimalType.FindStringSubmatch(t); m != nil {
		return "Decimal(" + m[1] + ", " + m[2] + ")"
	}
	return t
}

// reInnerNull is a NULL or NOT NULL inside a nested type.
var reInnerNull = regexp.MustCompile(` (NOT )?NULL\b`)

// decodeValue is what a column of type t (no NULLs) holds for the JSON
// value v, not null.
func decodeValue(t string, v json.RawMessage) (json.RawMessage, error) {
	if r, ok := intRanges[t]; ok {
		return readInt(v, r)
	}
	if m := reDecimalType.FindStringSubmatch(t); m != nil {
		p, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		return readDecimal(v, p, s)
	}
	if m := reArrayType.FindStringSubmatch(t); m != nil {
		return readArray(v, m[1])
	}
	if inner, ok := strings.CutPrefix(t, "TUPLE("); ok && strings.HasSuffix(t, ")") {
		return readTuple(v, strings.TrimSuffix(inner, ")"))
	}
	switch t {
	case "FLOAT", "DOUBLE", "FLOAT32", "FLOAT64":
		// read_float: a JSON number, nothing else ("NaN" is a string).
		if v[0] == '"' || !isNumber(v) {
			return nil, errors.New("Incorrect json value, must be number")
		}
		if t == "FLOAT" || t == "FLOAT32" {
			// as_f64, then num_traits::cast to f32: `f as f32`, which
			// saturates a finite double past f32's range to infinity
			// (num-traits impl_to_primitive_float_to_float), stored so.
			if f, err := strconv.ParseFloat(string(v), 64); err == nil && math.IsInf(float64(float32(f)), 0) {
				if f < 0 {
					return json.RawMessage(`"-inf"`), nil
				}
				return json.RawMessage(`"inf"`), nil
			}
		}
		// arbitrary_precision: as_f64 is the text parsed, none if not
		// finite (serde_json number.rs), refused (json_ast.rs
		// read_float: "Incorrect json number").
		if pastDouble(string(v)) {
			return nil, fmt.Errorf("Incorrect json number %s", v)
		}
	case "VARIANT", "JSON":
		return variantOf(v), nil
	case "BOOLEAN", "BOOL":
		// read_bool: true or false only.
		if string(v) != "true" && string(v) != "false" {
			return nil, errors.New("Incorrect boolean value")
		}
	case "VARCHAR", "STRING", "TEXT":
		return readString(v)
	case "TIMESTAMP", "DATETIME":
		return readTimestamp(v)
	case "DATE":
		return readDate(v)
	}
	return v, nil // VARIANT and the types no test loads: as sent
}

// isNumber says whether v is a JSON number.
func isNumber(v json.RawMessage) bool {
	var n json.Number
	return json.Unmarshal(v, &n) == nil && v[0] != '"'
}

// readInt is read_int / read_uint: an integer written without a point or
// an exponent that as_i64 (a signed column) or as_u64 (an unsigned one)
// takes is cast to the column's type, an error out of its range; any
// other number is serde_json's f64, rounded (is_rounding_mode) and then
// cast: 1.5 is stored as 2, 1e2 as 100, -9223372036854775809 (past i64,
// a double) as -9223372036854775808. Anything but a number is refused, a
// string of digits too.
func readInt(v json.RawMessage, r [2]float64) (json.RawMessage, error) {
	if !isNumber(v) {
		return nil, errors.New("Incorrect json value, must be number")
	}
	if n, ok := new(big.Int).SetString(string(v), 10); ok && (r[0] < 0 && n.IsInt64() || r[0] == 0 && n.Sign() >= 0 && n.IsUint64()) {
		// The bounds exactly: a double holds MaxInt64 and MaxUint64
		// only rounded up.
		hi := new(big.Int)
		switch r[1] {
		case math.MaxInt64:
			hi.SetInt64(math.MaxInt64)
		case math.MaxUint64:
			hi.SetUint64(math.MaxUint64)
		default:
			hi.SetInt64(int64(r[1]))
		}
		if n.Cmp(big.NewInt(int64(r[0]))) < 0 || n.Cmp(hi) > 0 {
			return nil, fmt.Errorf("Incorrect json number %s", v)
		}
		return v, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return nil, fmt.Errorf("Incorrect json number %s", v)
	}
	// Rust's f64::round: half away from zero, as math.Round. num_traits'
	// cast refuses a value outside the type's range.
	f = math.Round(f)
	if f < r[0] || f > r[1] || (r[1] == math.MaxInt64 && f >= math.MaxInt64) || (r[1] == math.MaxUint64 && f >= math.MaxUint64) {
		return nil, fmt.Errorf("Incorrect json number %s", v)
	}
	return json.RawMessage(new(big.Float).SetFloat64(f).Text('f', 0)), nil
}

// readDecimal is expression utils/serialize.rs read_decimal_from_json: an
// integer (i64 or u64) is scaled, with_size refusing it past the
// precision; another number is the f64 times 10^scale cast to the
// integer (Decimal::from_float: `value as i64`, truncated toward zero,
// no precision check), so 0.29 into DECIMAL(10, 2) is 0.28 and 12345.678
// is 12345.67; a string is read exactly by read_decimal_with_size and
// rounded half away from zero at the scale ("12345.678" is 12345.68).
// The column holds the value's text with scale places, as a JSON string
// (as HTTP results write a decimal, and as the rest of the fake reads it).
func readDecimal(v json.RawMessage, p, s int) (json.RawMessage, error) {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(p)), nil)
	var n *big.Int
	switch {
	case v[0] == '"':
		var text string
		_ = json.Unmarshal(v, &text)
		if !reDecimalText.MatchString(text) {
			return nil, errors.New("bad decimal literal: unexpected char")
		}
		r, _ := new(big.Rat).SetString(text)
		n = roundHalfAway(new(big.Rat).Mul(r, new(big.Rat).SetInt(scale)))
	case !isNumber(v):
		return nil, errors.New("Incorrect json value for decimal")
	default:
		if i, ok := new(big.Int).SetString(string(v), 10); ok && fitsI64OrU64(i) {
			n = i.Mul(i, scale)
			break
		}
		f, _ := strconv.ParseFloat(string(v), 64)
		n, _ = new(big.Float).SetFloat64(math.Trunc(f * math.Pow(10, float64(s)))).Int(nil)
		return json.RawMessage(decimalString(n, s)), nil // from_float: no precision check
	}
	if new(big.Int).Abs(n).Cmp(limit) >= 0 {
		return nil, errors.New("Decimal overflow")
	}
	return json.RawMessage(decimalString(n, s)), nil
}

// fitsI64OrU64 says whether serde_json reads the integer as an i64 or a
// u64 rather than an f64.
func fitsI64OrU64(i *big.Int) bool {
	return i.IsInt64() || i.IsUint64()
}

// roundHalfAway rounds r to an integer, half away from zero.
func roundHalfAway(r *big.Rat) *big.Int {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if new(big.Int).Mul(new(big.Int).Abs(m), big.NewInt(2)).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(int64(r.Num().Sign())))
	}
	return q
}

// decimalString writes n / 10^s with s places, as a JSON string.
func decimalString(n *big.Int, s int) string {
	return strconv.Quote(new(big.Rat).SetFrac(n, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)).FloatString(s))
}

// readArray is read_array: a JSON array, each element read as the
// element type, one bad element failing the row.
func readArray(v json.RawMessage, elem string) (json.RawMessage, error) {
	var elems []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &elems) != nil {
		return nil, errors.New("Incorrect json value, must be array")
	}
	out := make([]json.RawMessage, len(elems))
	for i, e := range elems {
		d, err := decodeElem(elem, e)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// tupleFields reads a TUPLE's fields ("NAME TYPE", or "TYPE" unnamed,
// named by its place from 1: resolve_type_name).
func tupleFields(inner string) (names, types []string) {
	for i, f := range sqltext.SplitTop(inner) {
		f = strings.TrimSpace(f)
		name, typ := strconv.Itoa(i+1), f
		if n, rest, ok := strings.Cut(f, " "); ok && !strings.Contains(n, "(") && !strings.HasPrefix(rest, "NULL") && !strings.HasPrefix(rest, "NOT NULL") {
			name, typ = unquote(n), rest
		}
		names, types = append(names, name), append(types, typ)
	}
	return names, types
}

// readTuple is read_tuple (json_ast.rs, since databend#19916 "resolve
// ndjson tuple fields by name"): an object gives each field the value of
// the first of its keys (serde_json's map: a key given twice once, with
// its last value) equal to the field's name in any case (object_value,
// ident_case_sensitive false), its count of keys the count of fields, a
// field without a key refused; an array gives them by place. The column
// holds the fields' values as a JSON array, in the fields' order.
func readTuple(v json.RawMessage, inner string) (json.RawMessage, error) {
	names, types := tupleFields(inner)
	var vals []json.RawMessage
	switch v[0] {
	case '{':
		keys, kv, err := objectFields(v)
		if err != nil {
			return nil, err
		}
		var uniq []string
		last := map[string]json.RawMessage{}
		for i, k := range keys {
			if _, ok := last[k]; !ok {
				uniq = append(uniq, k)
			}
			last[k] = kv[i]
		}
		if len(uniq) != len(names) {
			return nil, fmt.Errorf("Incorrect json value, expect %d values, but get %d values", len(names), len(uniq))
		}
		for _, n := range names {
			i := slices.IndexFunc(uniq, func(k string) bool { return sqltext.RustLower(k) == sqltext.RustLower(n) })
			if i < 0 {
				return nil, fmt.Errorf("Incorrect json value for tuple, missing field %s", strings.ToLower(n))
			}
			vals = append(vals, last[uniq[i]])
		}
	case '[':
		if err := json.Unmarshal(v, &vals); err != nil {
			return nil, err
		}
		if len(vals) != len(names) {
			return nil, fmt.Errorf("Incorrect json value, expect %d values, but get %d values", len(names), len(vals))
		}
	default:
		return nil, errors.New("Incorrect json value for tuple, must be object or array")
	}
	out := make([]json.RawMessage, len(vals))
	for i, e := range vals {
		d, err := decodeElem(types[i], e)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// readString is read_string: a string as it is, true and false and a
// number as their text, an array or object refused. A number is
// serde_json's Number written by its Display (serde_json 1.0.149 in
// databend-query's Cargo.lock, without arbitrary_precision): an integer
// that is an i64 or a u64 as its digits, any other (a point, an exponent,
// an integer past 64 bits) as the f64 it was parsed to, in zmij's
// shortest form (serdeFloat), so 12345678901234567890123 is stored as
// "1.2345678901234568e+22".
func readString(v json.RawMessage) (json.RawMessage, error) {
	switch {
	case v[0] == '"':
		return v, nil
	case v[0] == '[' || v[0] == '{':
		return nil, errors.New("Incorrect json value, must be string")
	case isNumber(v):
		// serde_json reads "-0" as the double -0.0 (de.rs parse_number:
		// a negative zero is no i64), written "-0.0".
		if i, ok := new(big.Int).SetString(string(v), 10); ok && fitsI64OrU64(i) && !(v[0] == '-' && i.Sign() == 0) {
			break
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return nil, fmt.Errorf("Incorrect json number %s", v) // serde_json: number out of range
		}
		b, _ := json.Marshal(serdeFloat(f))
		return b, nil
	}
	b, _ := json.Marshal(string(v))
	return b, nil
}

// serdeFloat is a finite f64 as serde_json's Number Display writes it
// (zmij's format_finite): the shortest digits that read back as f, laid
// out positionally when the decimal exponent is within -5..=15 (with
// ".0" after a whole number), else as d.ddde+X or d.ddde-X.
func serdeFloat(f float64) string {
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
	sci := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(sci, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(exp)
	n := len(digits)
	switch {
	case e < -5 || e > 15:
		out := digits[:1]
		if n > 1 {
			out += "." + digits[1:]
		}
		if e >= 0 {
			return sign + out + "e+" + strconv.Itoa(e)
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

// Databend's DATE range in days from 1970-01-01 (types/date.rs DATE_MIN,
// DATE_MAX).
const (
	dateMin = -719162
	dateMax = 2932896
)

// readDate is read_date: an integer (i64) is days, out of range the least
// date (clamp_date); a number with a fraction is refused. The column
// holds the days; a string is kept as sent (the fake parses none).
func readDate(v json.RawMessage) (json.RawMessage, error) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		if n < dateMin || n > dateMax {
			n = dateMin
		}
		return json.RawMessage(strconv.FormatInt(n, 10)), nil
	}
	if v[0] != '"' {
		return nil, errors.New("Incorrect date value")
	}
	return v, nil
}

// readTimestamp is read_timestamp: an integer (i64) by its magnitude
// (int64ToTimestamp), a string with its offset as that instant (common/io
// cursor_read_datetime_ext.rs read_text_to_datetime), a number with a
// fraction refused. The column holds the microseconds.
func readTimestamp(v json.RawMessage) (json.RawMessage, error) {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return json.RawMessage(strconv.FormatInt(int64ToTimestamp(n), 10)), nil
	}
	if isNumber(v) {
		return nil, errors.New("Incorrect timestamp value, must be i64")
	}
	if v[0] != '"' {
		return nil, errors.New("Incorrect timestamp value")
	}
	if ts, err := time.Parse(time.RFC3339Nano, jsonString(v)); err == nil {
		return json.RawMessage(strconv.FormatInt(ts.UnixMicro(), 10)), nil
	}
	return v, nil // other forms: as sent (the fake parses no more)
}

// pastDouble says whether the JSON number n is past a double's range:
// Rust's f64 parse gives an infinity, which serde_json's as_f64 (with
// arbitrary_precision) filters out.
func pastDouble(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	return err != nil && math.IsInf(f, 0)
}

// variantOf is what COPY stores into a VARIANT for the JSON value v:
// jsonb::Value::from (jsonb src/from.rs) makes a number that is no u64,
// i64, i128 or u128 and whose as_f64 is none (past a double's range)
// null ("If the value is NaN or Infinity, fallback to NULL"); the rest as
// sent.
func variantOf(v json.RawMessage) json.RawMessage {
	var out []byte
	last := 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(v) && strings.IndexByte("+-.eE0123456789", v[j]) >= 0 {
				j++
			}
			if pastDouble(string(v[i:j])) {
				out = append(append(out, v[last:i]...), "null"...)
				last = j
			}
			i = j - 1
		}
	}
	if out == nil {
		return v
	}
	return append(out, v[last:]...)
}
