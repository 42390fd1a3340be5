package databend

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tracelake/tracelake/internal/envelope"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sqltext"
)

// Transform mode's checks before staging. databend-query's NDJSON reader
// (formats field_decoder/json_ast.rs) stores some values other than
// were sent, without an error COPY could report: a number with a
// fraction in an integer column is rounded (read_int under the default
// numeric_cast_option "rounding": 1.5 is stored as 2, perhaps another
// row's key), and a number with a point or an exponent (or an integer
// past 64 bits) in a DECIMAL column is multiplied as a double and truncated (expression
// utils/serialize.rs read_decimal_from_json: 0.29 into DECIMAL(10, 2) is
// 0.28, 12345.678 is 12345.67, and no precision is checked). DuckDB's
// transform dead-letters the first and rounds the second exactly at the
// scale; so does this sink: an integer that would not be stored as sent
// is dead-lettered before staging, and a decimal's number is staged as a
// string of its text, which Databend reads exactly and rounds half away
// from zero at the scale (read_decimal_with_size), as DuckDB's cast does.

// colKind is what the checks need of a column type.
type colKind int

const (
	kindOther colKind = iota
	kindInt
	kindDecimal
	kindArray // elem[0]
	kindMap   // elem[0] the values'
	kindTuple // elem, in order, named by names
	kindTimestamp
	kindDate
	kindString
	kindBool
	kindFloat32
	kindFloat64
)

// colType is a Databend column type as DESC writes it (interpreters
// util.rs generate_desc_schema: sql_name of the type without its
// NULLs; nested types as their Display in capitals: ARRAY(INT32),
// MAP(STRING, INT64), TUPLE(A INT32, B STRING), DECIMAL(10, 2)).
type colType struct {
	kind colKind
	elem []colType
	// names are a tuple's fields' names, lowercased (sqltext.RustLower)
	// as COPY matches an object's keys to them.
	names []string
	// notNull: an element's (a map's value's, a tuple's field's) type
	// declared NOT NULL, read from system.columns (applyColumnNulls).
	notNull bool
}

// userColumn is a column of the user's table: its name, lowercased as
// COPY matches fields to it (ndjson block_builder.rs, not case
// sensitive: sqltext.RustLower), and its type.
type userColumn struct {
	name string
	typ  colType
	// required: declared NOT NULL with no DEFAULT (DESC's Null NO,
	// Default NULL), not computed and not AUTOINCREMENT. COPY's
	// MISSING_FIELD_AS = FIELD_DEFAULT fills such a column of a message
	// without its field with its type's default value (0, the empty
	// string: sql binder/default_expr.rs parse_and_bind,
	// Scalar::default_value), a value the message never had, where
	// DuckDB's transform dead-letters the message (its NOT NULL
	// constraint); so does this sink.
	required bool
}

var (
	reColInt = regexp.MustCompile(`^(TINYINT|SMALLINT|INT|INTEGER|BIGINT)( UNSIGNED)?$|^U?INT(8|16|32|64)$`)
	reColDec = regexp.MustCompile(`^DECIMAL\(\d+, ?\d+\)$`)
	reColStr = regexp.MustCompile(`^(VARCHAR|STRING|TEXT)$`)
)

// parseColType reads a DESC type; a type it does not know needs no check.
func parseColType(s string) colType {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, " NOT NULL"), " NULL")
	if inner, ok := wrapped(s, "NULLABLE"); ok {
		return parseColType(inner)
	}
	switch {
	case reColInt.MatchString(s):
		return colType{kind: kindInt}
	case reColDec.MatchString(s):
		return colType{kind: kindDecimal}
	case s == "TIMESTAMP" || s == "DATETIME":
		return colType{kind: kindTimestamp}
	case s == "DATE":
		return colType{kind: kindDate}
	case reColStr.MatchString(s):
		return colType{kind: kindString}
	case s == "BOOLEAN" || s == "BOOL":
		return colType{kind: kindBool}
	case s == "FLOAT" || s == "FLOAT32":
		return colType{kind: kindFloat32}
	case s == "DOUBLE" || s == "FLOAT64":
		return colType{kind: kindFloat64}
	}
	if inner, ok := wrapped(s, "ARRAY"); ok {
		return colType{kind: kindArray, elem: []colType{parseColType(inner)}}
	}
	if inner, ok := wrapped(s, "MAP"); ok {
		if parts := sqltext.SplitTop(inner); len(parts) == 2 {
			return colType{kind: kindMap, elem: []colType{parseColType(parts[1])}}
		}
	}
	if inner, ok := wrapped(s, "TUPLE"); ok {
		t := colType{kind: kindTuple}
		for i, f := range sqltext.SplitTop(inner) {
			// A field is "NAME TYPE" (DESC names a tuple's fields 1, 2, …
			// when it was declared without names: resolve_type_name).
			name := strconv.Itoa(i + 1)
			if n, typ, ok := strings.Cut(strings.TrimSpace(f), " "); ok && !strings.Contains(n, "(") {
				name, f = strings.Trim(n, "\"`"), typ
			}
			t.names = append(t.names, sqltext.RustLower(name))
			t.elem = append(t.elem, parseColType(f))
		}
		return t
	}
	return colType{}
}

// wrapped returns the inside of NAME(…).
func wrapped(s, name string) (string, bool) {
	if !strings.HasPrefix(s, name+"(") || !strings.HasSuffix(s, ")") {
		return "", false
	}
	return s[len(name)+1 : len(s)-1], true
}

// wrappedType is the nullability of a type's levels, read from its
// wrapped_display.
type wrappedType struct {
	nullable bool
	elem     []wrappedType
}

// parseWrapped reads a wrapped_display (expression schema.rs):
// Nullable(T), Array(T), Map(K, V) (elem: the value's), Tuple(T, …)
// without names; any other type is a leaf.
func parseWrapped(s string) wrappedType {
	s = strings.ToUpper(strings.TrimSpace(s))
	if inner, ok := wrapped(s, "NULLABLE"); ok {
		w := parseWrapped(inner)
		w.nullable = true
		return w
	}
	if inner, ok := wrapped(s, "ARRAY"); ok {
		return wrappedType{elem: []wrappedType{parseWrapped(inner)}}
	}
	if inner, ok := wrapped(s, "MAP"); ok {
		if parts := sqltext.SplitTop(inner); len(parts) == 2 {
			return wrappedType{elem: []wrappedType{parseWrapped(parts[1])}}
		}
	}
	if inner, ok := wrapped(s, "TUPLE"); ok {
		var w wrappedType
		for _, f := range sqltext.SplitTop(inner) {
			w.elem = append(w.elem, parseWrapped(f))
		}
		return w
	}
	return wrappedType{}
}

// applyColumnNulls marks the elements of cols' types declared NOT NULL,
// from system.columns' rows (name, type). A column it lacks keeps its
// elements nullable, as ARRAY(STRING) makes them.
func applyColumnNulls(cols []userColumn, res *result) {
	for _, row := range res.Rows {
		if len(row) < 2 || row[0] == nil || row[1] == nil {
			continue
		}
		if c := findColumn(cols, sqltext.RustLower(*row[0])); c != nil {
			c.typ.applyNulls(parseWrapped(*row[1]))
		}
	}
}

func (t *colType) applyNulls(w wrappedType) {
	if len(w.elem) != len(t.elem) {
		return
	}
	for i := range t.elem {
		t.elem[i].notNull = !w.elem[i].nullable
		t.elem[i].applyNulls(w.elem[i])
	}
}

// readUserColumns reads the user's table's columns from its DESC.
func readUserColumns(res *result) []userColumn {
	var cols []userColumn
	for _, row := range res.Rows {
		if len(row) < 2 || row[0] == nil || row[1] == nil {
			continue
		}
		c := userColumn{name: sqltext.RustLower(*row[0]), typ: parseColType(*row[1])}
		// Field, Type, Null, Default, Extra (interpreters util.rs
		// generate_desc_schema): Default is NULL without a default
		// expression, Extra names a computed column, which COPY does
		// not fill from the message.
		c.required = len(row) >= 5 && row[2] != nil && *row[2] == "NO" && row[3] != nil && *row[3] == "NULL" &&
			(row[4] == nil || *row[4] == "")
		cols = append(cols, c)
	}
	return cols
}

// autoIncremented clears required of each column the table's CREATE
// (SHOW CREATE TABLE's second column) declares AUTOINCREMENT (or
// IDENTITY, written the same way): DESC and system.columns show no sign
// of it. SHOW CREATE TABLE writes a column as "  name TYPE[ DEFAULT …][
// AS (…) …][ AUTOINCREMENT (start, step) ORDER|NOORDER][ COMMENT '…']",
// the columns joined by ",\n" (interpreter_table_show_create.rs
// show_create_table_query; schema.rs AutoIncrementExpr::to_sql_string),
// so the keyword is looked for in each column's own definition, outside
// its name and any quoted text: a column named autoincrement_note or a
// COMMENT saying AUTOINCREMENT is no AUTOINCREMENT column, and the
// table's other NOT NULL columns are checked as in any table.
func autoIncremented(cols []userColumn, res *result) {
	for _, row := range res.Rows {
		if len(row) < 2 || row[1] == nil {
			continue
		}
		for _, def := range createDefs(*row[1]) {
			name, rest := createDefName(def)
			if name == "" || !hasKeyword(rest, "AUTOINCREMENT") {
				continue
			}
			name = sqltext.RustLower(name)
			for i := range cols {
				if cols[i].name == name {
					cols[i].required = false
				}
			}
		}
	}
}

// quotedEnd returns the index just past the quoted text of s starting at
// i (s[i] is its quote, ' " or `; a doubled quote or, in a string, a
// backslash escapes one).
func quotedEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q == '\'':
			j++
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j++
		case s[j] == q:
			return j + 1
		}
	}
	return len(s)
}

// createDefs splits a CREATE TABLE's parenthesized definitions (columns,
// then indexes) at their top-level commas.
func createDefs(create string) []string {
	var defs []string
	depth, start := 0, -1
	for i := 0; i < len(create); i++ {
		switch c := create[i]; c {
		case '\'', '"', '`':
			i = quotedEnd(create, i) - 1
		case '(':
			if depth++; depth == 1 {
				start = i + 1
			}
		case ')':
			if depth--; depth == 0 {
				return append(defs, create[start:i])
			}
		case ',':
			if depth == 1 {
				defs = append(defs, create[start:i])
				start = i + 1
			}
		}
	}
	return nil
}

// createDefName returns a definition's first identifier, unquoted, and
// the text after it.
func createDefName(def string) (string, string) {
	def = strings.TrimLeft(def, " \t\r\n")
	if def == "" {
		return "", ""
	}
	if q := def[0]; q == '`' || q == '"' {
		end := quotedEnd(def, 0)
		inner := def[1:max(end-1, 1)]
		return strings.ReplaceAll(inner, string([]byte{q, q}), string(q)), def[end:]
	}
	end := strings.IndexAny(def, " \t\r\n")
	if end < 0 {
		return def, ""
	}
	return def[:end], def[end:]
}

// hasKeyword says whether s holds the word kw (any case) outside quoted
// text.
func hasKeyword(s, kw string) bool {
	word := func(c byte) bool {
		return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\'' || s[i] == '"' || s[i] == '`':
			i = quotedEnd(s, i) - 1
		case word(s[i]):
			j := i
			for j < len(s) && word(s[j]) {
				j++
			}
			if strings.EqualFold(s[i:j], kw) {
				return true
			}
			i = j - 1
		}
	}
	return false
}

// anyRequired says whether a column of cols must be given (required).
func anyRequired(cols []userColumn) bool {
	for _, c := range cols {
		if c.required {
			return true
		}
	}
	return false
}

// stageableObject returns the object as it is to be staged and whether
// that is not line, or why it must be dead-lettered instead: a field
// of a column given twice (COPY takes the last, DuckDB's transform the
// first), or a value that Databend would store as another one.
func stageableObject(line []byte, cols []userColumn) ([]byte, bool, string) {
	var seen map[*userColumn]bool
	var out []byte
	last, reason := 0, "" // line[:last] is in out when out is not nil
	ok := eachMember(line, func(rawKey, v []byte, at int) bool {
		col, k := columnOf(cols, rawKey)
		if col == nil {
			return true // COPY ignores it
		}
		if seen[col] {
			reason = fmt.Sprintf("field %q is given twice (in any case): Databend's COPY takes its last value, DuckDB's transform its first", k)
			return false
		}
		if seen == nil {
			seen = make(map[*userColumn]bool, len(cols))
		}
		seen[col] = true
		fixed, why := stageableValue(v, col.typ)
		if why != "" {
			reason = fmt.Sprintf("field %q: %s", k, why)
			return false
		}
		if fixed != nil {
			if out == nil {
				out = make([]byte, 0, len(line)+8)
			}
			out = append(append(out, line[last:at]...), fixed...)
			last = at + len(v)
		}
		return true
	})
	if reason == "" && ok {
		for i := range cols {
			if c := &cols[i]; c.required && !seen[c] {
				reason = fmt.Sprintf("column %q is NOT NULL without a DEFAULT and the message has no field for it: Databend would store its type's default value, where DuckDB's transform dead-letters it", c.name)
				break
			}
		}
	}
	switch {
	case reason != "":
		return nil, false, reason
	case !ok || out == nil:
		return line, false, "" // as it is; not an object: COPY's error says so
	}
	return append(out, line[last:]...), true, ""
}

// eachMember calls f with each member of the JSON object b, in order: its
// key as written (quotes and escapes included), its value and where the
// value starts in b, until f returns false. It walks the text in place,
// as envelope's scanner does (b was checked as JSON when decoded), and
// reports false where b is not an object it could walk to its end.
func eachMember(b []byte, f func(rawKey, v []byte, at int) bool) bool {
	i := envelope.SkipJSONSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = envelope.SkipJSONSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) && b[i] == '"' {
		keyEnd := envelope.JSONStringEnd(b, i)
		colon := envelope.SkipJSONSpace(b, keyEnd)
		if colon >= len(b) || b[colon] != ':' {
			return false
		}
		at := envelope.SkipJSONSpace(b, colon+1)
		if at >= len(b) {
			return false
		}
		end := envelope.JSONValueEnd(b, at)
		if !f(b[i:keyEnd], b[at:end], at) {
			return true
		}
		i = envelope.SkipJSONSpace(b, end)
		switch {
		case i < len(b) && b[i] == ',':
			i = envelope.SkipJSONSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return true
		default:
			return false
		}
	}
	return false
}

// columnOf returns the column a member's key (as written, quoted) names,
// matched as COPY matches it, and the key decoded.
func columnOf(cols []userColumn, rawKey []byte) (*userColumn, string) {
	var k string
	if bytes.IndexByte(rawKey, '\\') < 0 {
		k = string(rawKey[1 : len(rawKey)-1])
	} else if json.Unmarshal(rawKey, &k) != nil {
		return nil, ""
	}
	return findColumn(cols, sqltext.RustLower(k)), k
}

func findColumn(cols []userColumn, key string) *userColumn {
	for i := range cols {
		if cols[i].name == key {
			return &cols[i]
		}
	}
	return nil
}

// stageableValue returns v rewritten for its column type (nil: as it
// is), or why Databend would not store it as sent.
func stageableValue(v json.RawMessage, t colType) (json.RawMessage, string) {
	switch t.kind {
	case kindInt:
		return nil, integerLost(v)
	case kindTimestamp, kindDate:
		return nil, clamped(v, t.kind)
	case kindFloat32, kindFloat64:
		if len(v) > 0 && v[0] == '"' {
			return floatFromString(v, t.kind)
		}
		if t.kind == kindFloat32 {
			return nil, float32Overflow(v)
		}
	case kindDecimal:
		if isFloatText(v) || wideInteger(v) {
			b, _ := json.Marshal(string(v))
			return b, ""
		}
	case kindBool:
		// COPY takes a JSON boolean alone (json_ast.rs read_bool:
		// "Incorrect boolean value"); DuckDB's transform casts the
		// field's text (TRY_CAST: TryCastStringBool, not strict), so
		// "true", "t", "yes", 1 and 0 fill the column there. Staged as
		// the boolean DuckDB makes of it, Databend stores it too; what
		// DuckDB's cast refuses is left to COPY, which refuses it.
		var text string
		switch {
		case len(v) > 0 && v[0] == '"':
			if json.Unmarshal(v, &text) != nil {
				return nil, ""
			}
		case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
			text = yyjsonNumber(string(v))
		default:
			return nil, ""
		}
		if b, ok := duckCastBool(text); ok {
			return json.RawMessage(strconv.FormatBool(b)), ""
		}
	case kindString:
		// COPY writes a number into a string column as serde_json's
		// Number (json_ast.rs read_string: an integer past i64 and u64
		// is an f64 there, "1.2345678901234568e+22"; 1e22 is "1e+22")
		// and refuses an object or an array ("must be string"), where
		// DuckDB's transform stores the text its JSON reader writes
		// (json_extract_string): the digits, "1e22", the object's JSON.
		// Staged as a string of that text, Databend stores it too. A
		// number both write alike (7, 1.5) is staged as it is, so that
		// a column whose type the user changed while tracelake runs
		// (read at the next start) takes it as before.
		if len(v) == 0 || !(v[0] == '{' || v[0] == '[' || v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			return nil, ""
		}
		if shortInteger(v) {
			return nil, "" // both write its digits: no decoder on the hot path
		}
		text, err := duckJSONText(v)
		if err != nil {
			return nil, "" // not JSON COPY reads: its own error
		}
		if v[0] != '{' && v[0] != '[' && serdeNumber(string(v)) == text {
			return nil, ""
		}
		b, _ := json.Marshal(text)
		return b, ""
	case kindArray:
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) != nil {
			return nil, ""
		}
		return stageableElems(elems, func(int) colType { return t.elem[0] }, func(e []json.RawMessage) ([]byte, error) { return json.Marshal(e) })
	case kindMap:
		return stageableMembers(v, func(int, string) colType { return t.elem[0] })
	case kindTuple:
		if len(v) > 0 && v[0] == '[' {
			var elems []json.RawMessage
			if json.Unmarshal(v, &elems) != nil || len(elems) != len(t.elem) {
				return nil, "" // COPY's error says so
			}
			return stageableElems(elems, func(i int) colType { return t.elem[i] }, func(e []json.RawMessage) ([]byte, error) { return json.Marshal(e) })
		}
		// An object's members are read by name: each field takes the
		// member whose key is its name in any case (json_ast.rs
		// read_tuple, object_value, since databend#19916; before, by
		// position). A member of no field's name is not read, and
		// another count of members, or a field without one, is COPY's
		// error.
		return stageableMembers(v, func(_ int, key string) colType {
			if j := slices.Index(t.names, sqltext.RustLower(key)); j >= 0 {
				return t.elem[j]
			}
			return colType{}
		})
	}
	return nil, ""
}

// stageableElems checks each element against its type and, if one was
// rewritten, encodes them all again with join.
func stageableElems(elems []json.RawMessage, typ func(int) colType, join func([]json.RawMessage) ([]byte, error)) (json.RawMessage, string) {
	changed := false
	for i, e := range elems {
		et := typ(i)
		if et.kind == kindBool {
			// DuckDB casts a JSON element to BOOLEAN otherwise than a
			// column's text (a number by its value: 2 and 1.0 are
			// true), which is not reproduced: left to COPY.
			et = colType{}
		}
		if et.notNull && et.kind == kindString && string(e) == "null" {
			// An element declared NOT NULL holds no NULL, and COPY does
			// not refuse one: read_field_with_data_type hands it to
			// read_string, which writes the text "null" (json_ast.rs).
			// DuckDB's transform stores a NULL element.
			return nil, fmt.Sprintf("element %d is null, and the column's elements are declared NOT NULL: COPY would store the text \"null\" (read_string), where DuckDB's transform stores NULL", i+1)
		}
		if (et.kind == kindFloat32 || et.kind == kindFloat64) && len(e) > 0 && e[0] == '"' {
			// DuckDB casts a JSON string element to a float otherwise
			// than a column's text ("1_000" refused, "1e400" stored as
			// infinity), which is not reproduced: left to COPY, which
			// refuses it (read_float).
			continue
		}
		fixed, reason := stageableValue(e, et)
		if reason != "" {
			return nil, fmt.Sprintf("element %d: %s", i+1, reason)
		}
		if fixed != nil {
			elems[i], changed = fixed, true
		}
	}
	if !changed {
		return nil, ""
	}
	b, err := join(elems)
	if err != nil {
		return nil, ""
	}
	return b, ""
}

// stageableMembers checks the values of a JSON object (a map's, a tuple's
// fields) against the types typ gives their places and keys.
func stageableMembers(v json.RawMessage, typ func(i int, key string) colType) (json.RawMessage, string) {
	dec := json.NewDecoder(bytes.NewReader(v))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, ""
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, ""
		}
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return nil, ""
		}
		keys, vals = append(keys, k.(string)), append(vals, m)
	}
	return stageableElems(vals, func(i int) colType { return typ(i, keys[i]) }, func(e []json.RawMessage) ([]byte, error) {
		out := []byte{'{'}
		for i, k := range keys {
			if i > 0 {
				out = append(out, ',')
			}
			kb, _ := json.Marshal(k)
			out = append(append(append(out, kb...), ':'), e[i]...)
		}
		return append(out, '}'), nil
	})
}

// isFloatText says whether the JSON number v is one serde_json reads as a
// double: written with a point or an exponent.
func isFloatText(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) && bytes.ContainsAny(v, ".eE")
}

// wideInteger says whether v is an integer's digits past i64 and u64,
// which serde_json reads as a double.
func wideInteger(v json.RawMessage) bool {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return false
	}
	i, ok := new(big.Int).SetString(string(v), 10)
	return ok && !i.IsInt64() && !i.IsUint64()
}

// shortInteger says whether v is an integer of at most 18 digits written
// without a point or an exponent, other than -0: an i64 that serde_json
// and DuckDB's JSON reader both write as its digits.
func shortInteger(v json.RawMessage) bool {
	d := v
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || (d[0] == '0' && len(v) != 1) {
		return false // "-0" (serde_json's -0.0), "01" (not JSON)
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// float32Overflow says why a number into a FLOAT column (or element) is
// dead-lettered, "" when it is not: COPY reads it as an f64 and read_float
// (json_ast.rs) casts that to f32 with num_traits, `f as f32`, which
// saturates a double past f32's range (1e39) to infinity, stored without
// an error; DuckDB's transform dead-letters it (its cast would store
// infinity too; TRY_CAST of [1e39] to FLOAT[] nulls the element). A
// double rounds to f32 infinity from 2^128 - 2^103 on (half an ulp past
// the largest f32, ties to even). A number past a double's range is
// left to COPY, whose JSON parser refuses it.
func float32Overflow(v json.RawMessage) string {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return ""
	}
	if len(v) < 39 && bytes.IndexAny(v, "eE") < 0 {
		return "" // below 1e38 without an exponent: no parse on the hot path
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.Abs(f) < 0x1p128-0x1p103 {
		return ""
	}
	return fmt.Sprintf("%s is past FLOAT's range: COPY would store infinity (read_float casts the double to f32), and DuckDB's transform dead-letters it", v)
}

// floatFromString is the JSON string v into a FLOAT (kindFloat32) or
// DOUBLE column as it is to be staged, or why it is dead-lettered. COPY
// takes a JSON number alone there (json_ast.rs read_float: "Incorrect
// json value, must be number"), where DuckDB's transform casts the
// string's text (duckCastFloat): staged as the number DuckDB's cast
// makes of it, Databend stores it too. What the cast refuses is left to
// COPY, which refuses it as well; NaN and infinity, which DuckDB stores,
// have no JSON number for COPY to read.
func floatFromString(v json.RawMessage, kind colKind) (json.RawMessage, string) {
	var text string
	if json.Unmarshal(v, &text) != nil {
		return nil, ""
	}
	bits, typ := 64, "DOUBLE"
	if kind == kindFloat32 {
		bits, typ = 32, "FLOAT"
	}
	f, res := duckCastFloat(text, bits)
	switch res {
	case castRefused:
		return nil, ""
	case castSpecial:
		return nil, fmt.Sprintf("%s is %v to DuckDB's cast, which Databend's COPY cannot load into a %s column: it reads a JSON number alone (read_float), and JSON has none for it", v, f, typ)
	case castOverflow:
		return nil, fmt.Sprintf("%s is past %s's range: DuckDB's cast would store infinity, and its transform dead-letters it", v, typ)
	}
	// The shortest digits of the double: serde_json reads them back as
	// it (as f32, the double holds the float exactly: `as f32` keeps it).
	return json.RawMessage(yyjsonFloat(f)), ""
}

type castResult int

const (
	castRefused  castResult = iota
	castFinite              // a finite number
	castSpecial             // NaN or infinity, from their text
	castOverflow            // a number past the type's range
)

// reDuckFloat is a number as DuckDB's fast_float reads it (after the
// sign): digits with a point somewhere, or a point and digits, then an
// exponent; DuckDB's fork takes one '_' between two digits ("1_000",
// "1e1_0").
var reDuckFloat = regexp.MustCompile(`^([0-9]+(_[0-9]+)*(\.([0-9]+(_[0-9]+)*)?)?|\.[0-9]+(_[0-9]+)*)([eE][+-]?[0-9]+(_[0-9]+)*)?$`)

// reDuckNaN is NaN as fast_float reads it: nan, or nan(chars).
var reDuckNaN = regexp.MustCompile(`^nan(\([0-9a-z_]*\))?$`)

// duckCastFloat is DuckDB's cast of text to DOUBLE (bits 64) or FLOAT
// (bits 32) as TRY_CAST makes it (cast_operators.cpp TryDoubleCast,
// strict false): spaces skipped before and after, one '+' skipped, then
// fast_float's from_chars, correctly rounded to the type: an optional
// '-', then inf, infinity or nan in any ASCII case, or a number
// (reDuckFloat). A number past the type's range reads as infinity
// (castOverflow). A form it is not sure of is refused.
func duckCastFloat(text string, bits int) (float64, castResult) {
	const space = " \t\n\v\f\r"
	s := strings.Trim(text, space)
	if s == "" {
		return 0, castRefused
	}
	s = strings.TrimPrefix(s, "+")
	sign, body := "", s
	if strings.HasPrefix(body, "-") {
		sign, body = "-", body[1:]
	}
	switch folded := sqltext.DuckDBFold(body); {
	case (folded == "inf" || folded == "infinity") && sign == "-":
		return math.Inf(-1), castSpecial
	case folded == "inf" || folded == "infinity":
		return math.Inf(1), castSpecial
	case reDuckNaN.MatchString(folded):
		return math.NaN(), castSpecial
	}
	if !reDuckFloat.MatchString(body) {
		return 0, castRefused
	}
	f, err := strconv.ParseFloat(sign+strings.ReplaceAll(body, "_", ""), bits)
	switch {
	case err == nil:
		return f, castFinite
	case math.IsInf(f, 0):
		return f, castOverflow
	}
	return 0, castRefused
}

// Databend's ranges (expression types/date.rs DATE_MIN and DATE_MAX in
// days, types/timestamp.rs TIMESTAMP_MIN and TIMESTAMP_MAX in
// microseconds: 0001-01-01 to 9999-12-31).
const (
	dateMin      = -719162
	dateMax      = 2932896
	timestampMin = -62135596800000000
	timestampMax = 253402300799999999
)

// clamped says why an integer into a DATE or TIMESTAMP column would be
// stored as 0001-01-01 ("" when it is in range, or not an integer):
// COPY reads it as days (read_date, clamp_date) or, by its size, as
// seconds, milliseconds or microseconds (read_timestamp,
// int64_to_timestamp), and stores one out of range as the least value
// without an error.
func clamped(v json.RawMessage, kind colKind) string {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return "" // not an i64: COPY refuses it, or reads a string
	}
	if kind == kindDate {
		if n < dateMin || n > dateMax {
			return fmt.Sprintf("%d days is out of Databend's DATE range and would be stored as 0001-01-01", n)
		}
		return ""
	}
	micros := n // as int64_to_timestamp reads it
	switch {
	case -31536000000 < n && n < 31536000000:
		micros = n * 1_000_000
	case -31536000000000 < n && n < 31536000000000:
		micros = n * 1_000
	}
	if micros < timestampMin || micros > timestampMax {
		return fmt.Sprintf("%d is out of Databend's TIMESTAMP range and would be stored as 0001-01-01 00:00:00", n)
	}
	return ""
}

// integerLost says how Databend's integer column would store the number
// v otherwise than sent ("" when it stores it exactly or refuses it): a
// number serde_json reads as a double (written with a point or an
// exponent, or an integer past i64 and u64) is rounded (read_int), and a
// double holds integers above 2^53 only approximately.
func integerLost(v json.RawMessage) string {
	if !isFloatText(v) && !wideInteger(v) {
		return "" // an integer's digits (i64 or u64) or not a number
	}
	exact, ok := new(big.Rat).SetString(string(v))
	if !ok {
		return ""
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return "" // out of a double's range: Databend refuses it
	}
	stored, _ := new(big.Float).SetFloat64(math.Round(f)).Rat(nil)
	if stored.Cmp(exact) == 0 {
		return ""
	}
	return fmt.Sprintf("%s into an integer column would be stored as %s (Databend rounds a number with a fraction)", v, stored.FloatString(0))
}

// checkTransformRows moves the objects of k that cannot be staged as they
// are to the dead-letter rows (appended to dlq, each counted in ranges:
// one record less, one dead letter more) and rewrites those that must be
// staged otherwise, keeping them as sent for their dead letters. It
// returns the dead-letter rows and the ranges.
func checkTransformRows(k *keptFile, cols []userColumn, dlq []byte, ranges []sink.Range) ([]byte, []sink.Range, error) {
	if len(cols) == 0 {
		return dlq, ranges, nil
	}
	lines, sent := make([][]byte, 0, len(k.lines)), make([][]byte, 0, len(k.lines))
	coords := make([]coord, 0, len(k.coords))
	rewritten := false
	for i, l := range k.lines {
		staged, changed, reason := stageableObject(l, cols)
		if reason == "" {
			lines, sent, coords = append(lines, staged), append(sent, l), append(coords, k.coords[i])
			rewritten = rewritten || changed
			continue
		}
		c := k.coords[i]
		value := base64.StdEncoding.EncodeToString(l)
		row, err := json.Marshal(envelope.DLQRow{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset, Key: c.Key, Value: &value,
			Error: reason, Stage: envelope.StageLoad, Headers: c.Headers, CreateTime: c.CreateTime})
		if err != nil {
			return nil, nil, fmt.Errorf("dead letter of offset %d: %w", c.Offset, err)
		}
		dlq = append(append(dlq, row...), '\n')
		ranges = movedToDLQ(ranges, sink.TopicPartition{Topic: c.Topic, Partition: c.Partition})
	}
	if len(lines) == len(k.lines) && !rewritten {
		return dlq, ranges, nil
	}
	k.lines, k.coords, k.data = lines, coords, sink.JoinLines(lines)
	if rewritten {
		k.sent = sent
	}
	return dlq, ranges, nil
}

// movedToDLQ counts one of tp's records as a dead letter instead of a
// row; ranges is copied, as the batch's are the pipeline's.
func movedToDLQ(ranges []sink.Range, tp sink.TopicPartition) []sink.Range {
	out := make([]sink.Range, len(ranges))
	copy(out, ranges)
	for i := range out {
		if out[i].TopicPartition == tp {
			out[i].Records--
			out[i].DLQ++
		}
	}
	return out
}
