package databendtest

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2" // the engine of Server.SQL
)

// reWrite names the table a data-changing statement writes.
var reWrite = regexp.MustCompile(`^(?:INSERT INTO|MERGE INTO|UPDATE|DELETE FROM)\s+("[^"]+"|\S+)`)

// execute runs sql, a statement the fake does not model by pattern (a
// merge model's: INSERT … SELECT, MERGE INTO, UPDATE, DELETE), in an
// embedded DuckDB holding the tables as the session sees them (committed
// rows and its transaction's own), and writes the table it changed back:
// into the transaction, to be applied at COMMIT with everything else it
// wrote (Databend reads its own writes inside a transaction and commits
// all tables at once: tests/sqllogictests/suites/http_handler/transaction/
// txn_merge_into.test), or at once outside one. DuckDB evaluates the
// expressions, so only the SQL that both engines read alike is
// trustworthy here; the one difference the merge SQL meets is rewritten
// (variantSQL): a variant cast to a string, and TRY_CAST of a variant to
// a number, a boolean or a timestamp (variantTryCast).
func (s *Server) execute(stmt string, tx *txn) ([]string, [][]*string, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one in-memory database
	for name, t := range s.tables {
		if err := loadTable(db, name, t, visible(t, tx, name)); err != nil {
			return nil, nil, fmt.Errorf("fake: load %s into the engine: %w", name, err)
		}
	}
	rows, err := db.Query(s.variantSQL(stmt))
	if err != nil {
		return nil, nil, &codedError{CodeSemanticError, err.Error()}
	}
	cols, out, err := readResult(rows)
	if err != nil {
		return nil, nil, &codedError{CodeSemanticError, err.Error()}
	}
	m := reWrite.FindStringSubmatch(stmt)
	if m == nil {
		return cols, out, nil
	}
	name := unquote(m[1])
	if s.tables[name] == nil {
		return nil, nil, unknownTable(name)
	}
	written, err := readTable(db, name)
	if err != nil {
		return nil, nil, err
	}
	if tx == nil {
		s.tables[name].rows = written
		s.tables[name].rewrites++
		return nil, nil, nil
	}
	tx.rewrote(name, s.tables[name])
	tx.rows[name] = written
	return nil, nil, nil
}

// The rewrites of variantSQL. Databend's cast of a VARIANT to a string is
// the string itself for a JSON string, NULL for JSON null and the JSON
// text otherwise (functions/src/scalars/variant.rs, "to_string"); DuckDB's
// cast of JSON to VARCHAR keeps a string's quotes, its ->> '$' does not.
// Databend's JSON_TYPEOF is DuckDB's json_type (variant.rs registers
// "json_typeof"); of the names they answer BOOLEAN, DOUBLE, ARRAY and
// OBJECT agree, the others differ (jsonb src/constants.rs: STRING,
// INTEGER, DECIMAL, NULL_VALUE; DuckDB: VARCHAR, BIGINT, UBIGINT, NULL).
// Databend's TRY_CAST of a variant to a number, a boolean or a timestamp
// reads the JSON value as the jsonb crate does, not as DuckDB's cast of
// JSON: rewritten (variantTryCast). Everything else the merge SQL uses
// (v['key'] on a variant, NULL for a missing key; TRY_CAST of a variant
// to DECIMAL, DATE or VARCHAR; MERGE INTO, QUALIFY, IF) DuckDB reads as
// Databend does.
var (
	// v['a']['b']::VARCHAR or v['a'][0]::VARCHAR, v being a column or a
	// call without nested parentheses.
	reVariantText = regexp.MustCompile(`((?:[A-Za-z_][\w.]*|[A-Za-z_]+\([^()]*\))(?:\['[^']*'\]|\[[0-9]+\])+)::VARCHAR`)
	// TRY_CAST(v['a'] AS VARCHAR), TRY_CAST(v['a'][0] AS VARCHAR)
	reVariantTryText = regexp.MustCompile(`TRY_CAST\(((?:[A-Za-z_][\w.]*)(?:\['[^']*'\]|\[[0-9]+\])+) AS VARCHAR\)`)
	reJSONTypeof     = regexp.MustCompile(`\bJSON_TYPEOF\(`)
	// regexp_like(text, pattern), DuckDB's regexp_matches (both search
	// the text for the pattern, RE2 and Rust's regex alike for the merge's)
	reRegexpLike = regexp.MustCompile(`\bregexp_like\(`)
)

func (s *Server) variantSQL(stmt string) string {
	stmt = duckdbLiterals(stmt)
	stmt = reVariantText.ReplaceAllString(stmt, `(($1)->>'$$')`)
	// CAST(col AS VARCHAR) of a column that is VARIANT in every table
	// that has it (the fake knows the types; DuckDB's cast would keep a
	// string's quotes).
	kinds := map[string]bool{} // column name: VARIANT everywhere
	for _, t := range s.tables {
		for i, c := range t.cols {
			v := engineType(t.types[i]) == "JSON"
			if seen, ok := kinds[c]; !ok || seen {
				kinds[c] = v
			}
		}
	}
	var names []string
	for c, v := range kinds {
		if v {
			names = append(names, regexp.QuoteMeta(quoteIdent(c)))
		}
	}
	if len(names) > 0 {
		re := regexp.MustCompile(`CAST\(((?:\w+\.)?(?:` + strings.Join(names, "|") + `)) AS VARCHAR\)`)
		stmt = re.ReplaceAllString(stmt, `(($1)->>'$$')`)
	}
	stmt = reVariantTryText.ReplaceAllString(stmt, `(($1)->>'$$')`)
	stmt = reVariantTryCast.ReplaceAllStringFunc(stmt, func(m string) string {
		sub := reVariantTryCast.FindStringSubmatch(m)
		if cast := variantTryCast(sub[1], sub[2]); cast != "" {
			return cast
		}
		return m
	})
	stmt = reRegexpLike.ReplaceAllString(stmt, "regexp_matches(")
	return reJSONTypeof.ReplaceAllString(stmt, "json_type(")
}

// TRY_CAST(v['a'][0] AS TYPE) of a variant path to a type with arguments
// or none.
var reVariantTryCast = regexp.MustCompile(`TRY_CAST\(([A-Za-z_][\w.]*(?:\['(?:[^']|'')*'\]|\[[0-9]+\])+) AS ([A-Za-z_][A-Za-z0-9_]*(?:\([0-9, ]+\))?)\)`)

// rustFloat is what Rust's str::parse::<f64> reads (core num/dec2flt): a
// sign, digits with an optional point and exponent, inf, infinity or nan
// in any case; no spaces, no underscores, no hexadecimal.
const rustFloat = `(?i)[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?|inf|infinity|nan)`

// variantTryCast is DuckDB SQL giving what Databend's TRY_CAST of the
// variant v to typ gives, for the types whose cast from a variant DuckDB's
// TRY_CAST of JSON does not read as Databend does; "" to keep DuckDB's.
// Databend casts a variant with the jsonb crate (functions/src/scalars/
// variant.rs registers try_to_<number>, try_to_boolean and
// try_to_timestamp on RawJsonb's to_i64, to_f64, to_bool and
// cast_to_timestamp; jsonb src/functions/scalar.rs, src/number.rs):
//   - an integer: a JSON boolean is 1 or 0; a number is rounded to the
//     nearest integer, halves away from zero (number.rs round_float_to_int,
//     round_decimal_i128); a string is an integer as Rust's parse::<i64>
//     reads it, else a float as parse::<f64> reads it, rounded
//     (scalar.rs parse_string_to_i64); nothing else casts;
//   - a float: a boolean is 1 or 0, a number its value, a string what
//     parse::<f64> reads (no spaces: " 12 " does not cast);
//   - a boolean: a JSON boolean, or the strings true/yes and false/no in
//     any case (scalar.rs to_bool); a number does not cast;
//   - a timestamp: a string only (variant.rs cast_to_timestamp: any other
//     JSON type is InvalidJsonType), read by string_to_timestamp, which
//     honours a zone offset (the instant), else in the session's time
//     zone (UTC here).
func variantTryCast(v, typ string) string {
	s := "((" + v + ")->>'$')"
	kind := "json_type(" + v + ")"
	switch t := strings.ToUpper(typ); t {
	case "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "INT8", "INT16", "INT32", "INT64",
		"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UINT8", "UINT16", "UINT32", "UINT64":
		return fmt.Sprintf(`(CASE %[1]s WHEN 'BOOLEAN' THEN TRY_CAST(CASE WHEN TRY_CAST(%[2]s AS BOOLEAN) THEN 1 ELSE 0 END AS %[3]s)
 WHEN 'BIGINT' THEN TRY_CAST(%[4]s AS %[3]s) WHEN 'UBIGINT' THEN TRY_CAST(%[4]s AS %[3]s)
 WHEN 'DOUBLE' THEN TRY_CAST(round(TRY_CAST(%[4]s AS DOUBLE)) AS %[3]s)
 WHEN 'VARCHAR' THEN CASE WHEN regexp_full_match(%[4]s, '[+-]?[0-9]+') THEN TRY_CAST(%[4]s AS %[3]s)
   WHEN regexp_full_match(%[4]s, %[5]s) AND isfinite(TRY_CAST(%[4]s AS DOUBLE)) THEN TRY_CAST(round(TRY_CAST(%[4]s AS DOUBLE)) AS %[3]s) END END)`,
			kind, v, typ, s, quoteString(rustFloat))
	case "DOUBLE", "FLOAT", "REAL", "FLOAT64", "FLOAT32":
		return fmt.Sprintf(`(CASE %[1]s WHEN 'BOOLEAN' THEN CASE WHEN TRY_CAST(%[2]s AS BOOLEAN) THEN 1 ELSE 0 END::%[3]s
 WHEN 'BIGINT' THEN TRY_CAST(%[4]s AS %[3]s) WHEN 'UBIGINT' THEN TRY_CAST(%[4]s AS %[3]s) WHEN 'DOUBLE' THEN TRY_CAST(%[4]s AS %[3]s)
 WHEN 'VARCHAR' THEN CASE WHEN regexp_full_match(%[4]s, %[5]s) THEN TRY_CAST(%[4]s AS %[3]s) END END)`,
			kind, v, typ, s, quoteString(rustFloat))
	case "BOOLEAN", "BOOL":
		return fmt.Sprintf(`(CASE %[1]s WHEN 'BOOLEAN' THEN TRY_CAST(%[2]s AS BOOLEAN)
 WHEN 'VARCHAR' THEN CASE WHEN lower(%[3]s) IN ('true', 'yes') THEN true WHEN lower(%[3]s) IN ('false', 'no') THEN false END END)`,
			kind, v, s)
	case "TIMESTAMP", "DATETIME":
		return fmt.Sprintf(`(CASE WHEN %[1]s = 'VARCHAR' THEN CASE WHEN regexp_matches(%[2]s, %[3]s) THEN make_timestamp(epoch_us(TRY_CAST(%[2]s AS TIMESTAMPTZ)))
 WHEN NOT regexp_matches(lower(%[2]s), 'inf') THEN TRY_CAST(%[2]s AS TIMESTAMP) END END)`,
			kind, s, quoteString(`:[0-9]{2}(\.[0-9]*)?\s*([zZ]|[+-][0-9]{2}(:?[0-9]{2})?)\s*$`))
	}
	return ""
}

// engineType is DuckDB's type for a Databend column type.
func engineType(typ string) string {
	switch t := strings.ToUpper(typ); {
	case t == "VARIANT" || t == "JSON":
		return "JSON"
	case t == "STRING":
		return "VARCHAR"
	default:
		return typ
	}
}

// loadTable creates table name in db and inserts rows.
func loadTable(db *sql.DB, name string, t *table, rows []Row) error {
	defs := make([]string, len(t.cols))
	for i, c := range t.cols {
		defs[i] = quoteIdent(c) + " " + engineType(t.types[i])
	}
	if _, err := db.Exec(fmt.Sprintf("CREATE TABLE %s (%s)", quoteIdent(name), strings.Join(defs, ", "))); err != nil {
		return err
	}
	const chunk = 500
	for start := 0; start < len(rows); start += chunk {
		var b strings.Builder
		fmt.Fprintf(&b, "INSERT INTO %s VALUES ", quoteIdent(name))
		for i, r := range rows[start:min(start+chunk, len(rows))] {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j, c := range t.cols {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(literal(r[c], engineType(t.types[j])))
			}
			b.WriteByte(')')
		}
		if _, err := db.Exec(b.String()); err != nil {
			return err
		}
	}
	return nil
}

// literal is a stored value as a SQL literal of type typ. Timestamps are
// stored as the rows carried them: microseconds since the epoch (how
// Databend's NDJSON reader takes an integer) or text.
func literal(v json.RawMessage, typ string) string {
	text := strings.TrimSpace(string(v))
	if text == "" || text == "null" {
		return "NULL"
	}
	if typ == "JSON" {
		return quoteString(text) + "::JSON"
	}
	switch text[0] {
	case '"':
		var s string
		_ = json.Unmarshal(v, &s)
		if strings.EqualFold(typ, "TIMESTAMP") {
			return quoteString(s) + "::TIMESTAMP"
		}
		return quoteString(s)
	case '{', '[':
		return quoteString(text)
	}
	if strings.EqualFold(typ, "TIMESTAMP") {
		return "make_timestamp(" + text + "::BIGINT)"
	}
	return text // a number, true or false
}

// reNonFinite finds the non-finite numbers to_json writes bare, after a
// member's colon or an element's comma or bracket.
var reNonFinite = regexp.MustCompile(`([:,\[]\s*)(-?Infinity|NaN)\b`)

// readTable reads a table's rows back as the fake stores them.
func readTable(db *sql.DB, name string) ([]Row, error) {
	rows, err := db.Query(fmt.Sprintf("SELECT to_json(t)::VARCHAR FROM %s AS t", quoteIdent(name)))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		var r Row
		if err := json.Unmarshal([]byte(text), &r); err != nil {
			// A FLOAT or DOUBLE holding infinity or NaN, which
			// to_json writes bare: stored as the string "inf",
			// "-inf" or "nan", which the engine reads back.
			if err2 := json.Unmarshal(reNonFinite.ReplaceAll([]byte(text), []byte(`$1"$2"`)), &r); err2 != nil {
				return nil, err
			}
			for k, v := range r {
				switch string(v) {
				case `"Infinity"`:
					r[k] = json.RawMessage(`"inf"`)
				case `"-Infinity"`:
					r[k] = json.RawMessage(`"-inf"`)
				case `"NaN"`:
					r[k] = json.RawMessage(`"nan"`)
				}
			}
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// readResult reads a query's result as text, as the HTTP handler answers.
func readResult(rows *sql.Rows) ([]string, [][]*string, error) {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, nil, err
	}
	var out [][]*string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		row := make([]*string, len(cols))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
			case time.Time:
				row[i] = str(v.UTC().Format("2006-01-02 15:04:05.000000"))
			case []byte:
				row[i] = str(string(v))
			default:
				row[i] = str(fmt.Sprint(v))
			}
		}
		out = append(out, row)
	}
	return cols, out, rows.Err()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// duckdbLiterals rewrites the statement's string literals as Databend
// reads them into DuckDB's literals of the same text. Databend's lexer
// takes a backslash and the character after it as one (a quote after it
// does not end the literal) and unescapes \b \f \n \r \t \' \" \\
// \uXXXX \xXX and octal, keeping the backslash before any other character
// (ast/src/parser/token.rs LiteralString, ast/src/ast/quote.rs
// QuotedString::from_str); DuckDB keeps every backslash as it is.
func duckdbLiterals(stmt string) string {
	var b strings.Builder
	for i := 0; i < len(stmt); {
		switch c := stmt[i]; c {
		case '"': // a quoted identifier, "" inside it
			j := i + 1
			for j < len(stmt) && (stmt[j] != '"' || j+1 < len(stmt) && stmt[j+1] == '"') {
				if stmt[j] == '"' {
					j++
				}
				j++
			}
			end := min(j+1, len(stmt))
			b.WriteString(stmt[i:end])
			i = end
		case '\'':
			var lit strings.Builder
			j := i + 1
			for j < len(stmt) {
				if stmt[j] == '\\' && j+1 < len(stmt) {
					j = unescapeOne(stmt, j+1, &lit)
					continue
				}
				if stmt[j] == '\'' {
					if j+1 < len(stmt) && stmt[j+1] == '\'' {
						lit.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				lit.WriteByte(stmt[j])
				j++
			}
			b.WriteString(quoteString(lit.String()))
			i = j + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// unescapeOne writes the character the escape at stmt[i:] (past its
// backslash) stands for, as quote.rs QuotedString::from_str does, and
// returns the index past it.
func unescapeOne(stmt string, i int, out *strings.Builder) int {
	simple := map[byte]rune{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', '\'': '\'', '"': '"', '\\': '\\'}
	c := stmt[i]
	if r, ok := simple[c]; ok {
		out.WriteRune(r)
		return i + 1
	}
	digits := func(from, n, base int) (int, int) {
		v, j := 0, from
		for ; j < len(stmt) && j < from+n; j++ {
			d, err := strconv.ParseInt(stmt[j:j+1], base, 8)
			if err != nil {
				break
			}
			v = v*base + int(d)
		}
		return v, j
	}
	switch {
	case c == 'u':
		v, j := digits(i+1, 4, 16)
		out.WriteRune(rune(v))
		return j
	case c == 'x':
		v, j := digits(i+1, 2, 16)
		out.WriteRune(rune(v))
		return j
	case c >= '0' && c <= '7':
		v, j := digits(i, len(stmt), 8)
		out.WriteRune(rune(v))
		return j
	}
	out.WriteByte('\\')
	out.WriteByte(c)
	return i + 1
}
