package sqltext

import (
	"fmt"
	"strings"
)

// Nested reports whether typ (a DuckDB type) is a list, array, struct, map
// or union: a type whose TRY_CAST can succeed with NULL in place of the
// elements that do not cast.
func Nested(typ string) bool {
	t := strings.ToUpper(strings.TrimSpace(typ))
	for _, p := range []string{"STRUCT(", "MAP(", "UNION("} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return strings.HasSuffix(t, "]")
}

// NestedCastLost is DuckDB SQL, true when cast — TRY_CAST(src AS typ) of a
// nested typ, not NULL — holds a NULL leaf that src does not: an element
// that did not cast. TRY_CAST keeps the outer value and nulls the leaf, so
// the value alone cannot tell. The same cast with every leaf VARCHAR
// (VarcharLeaves) casts every leaf that is there, and nulls exactly the
// leaves src lacks or holds as null; more NULLs in cast than in it is a
// lost element. NULLs are counted in the values' JSON text, without its
// strings; only casts with a null at all pay for the second cast.
func NestedCastLost(cast, src, typ string) string {
	count := func(v string) string {
		bare := fmt.Sprintf(`regexp_replace(to_json(%s)::VARCHAR, '"(?:[^"\\]|\\.)*"', '', 'g')`, v)
		return fmt.Sprintf("(length(%s) - length(replace(%s, 'null', '')))", bare, bare)
	}
	return fmt.Sprintf("(contains(to_json(%s)::VARCHAR, 'null') AND %s > %s)",
		cast, count(cast), count(fmt.Sprintf("TRY_CAST(%s AS %s)", src, VarcharLeaves(typ))))
}

// NestedFractionLost is DuckDB SQL, true when cast — TRY_CAST(src AS typ)
// of a nested typ — rounded a fraction away in an integer leaf: DuckDB
// casts the JSON number 1.5 to an INTEGER element as 2, a value never
// sent. src and cast are both cast again to typ with every integer leaf
// DOUBLE (doubleLeaves): such a leaf is 1.5 from src and 2 from cast,
// while every other leaf keeps its type and casts alike from both. A leaf
// that did not cast at all differs too (NestedCastLost names that case).
// "" when typ has no integer leaf. A HUGEINT or UHUGEINT leaf is cast to
// DOUBLE through its text: DuckDB's cast of a 128-bit integer to DOUBLE
// rounds its two 64-bit halves separately, so a whole number above 2^64
// (27670116110564329473) is another DOUBLE than the same number read from
// src, and would be refused as rounded; the text reads as src's does.
// Narrower integers cast to DOUBLE exactly as their text reads, and skip
// that extra cast.
func NestedFractionLost(cast, src, typ string) string {
	d, ok := doubleLeaves(typ)
	if !ok {
		return ""
	}
	if wideLeaf(typ) {
		cast = fmt.Sprintf("TRY_CAST(%s AS %s)", cast, VarcharLeaves(typ))
	}
	return fmt.Sprintf("(TRY_CAST(%s AS %s) IS DISTINCT FROM TRY_CAST(%s AS %s))", src, d, cast, d)
}

// wideLeaf says whether the nested type typ names a 128-bit integer type
// (HUGEINT, UHUGEINT or their aliases) anywhere in it. A field whose name
// is such a word counts too: that costs one cast, never a wrong answer.
func wideLeaf(typ string) bool {
	words := strings.FieldsFunc(strings.ToUpper(typ), func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	})
	for _, w := range words {
		switch w {
		case "HUGEINT", "UHUGEINT", "INT128", "UINT128":
			return true
		}
	}
	return false
}

// doubleLeaves is the nested type typ with every integer leaf DOUBLE (map
// keys kept), and whether it had one: STRUCT(a INTEGER, b VARCHAR)[] is
// STRUCT(a DOUBLE, b VARCHAR)[].
func doubleLeaves(typ string) (string, bool) {
	t := strings.TrimSpace(typ)
	if strings.HasSuffix(t, "]") {
		if i := strings.LastIndex(t, "["); i > 0 {
			inner, ok := doubleLeaves(t[:i])
			return inner + t[i:], ok
		}
	}
	if integerType(t) {
		return "DOUBLE", true
	}
	open := strings.IndexByte(t, '(')
	if open < 0 || !strings.HasSuffix(t, ")") {
		return t, false
	}
	head, parts := strings.ToUpper(strings.TrimSpace(t[:open])), SplitTop(t[open+1:len(t)-1])
	switch head {
	case "MAP":
		if len(parts) == 2 {
			v, ok := doubleLeaves(parts[1])
			return "MAP(" + parts[0] + ", " + v + ")", ok
		}
	case "STRUCT", "UNION":
		found := false
		for i, p := range parts {
			name, rest := splitName(p)
			leaf, ok := doubleLeaves(rest)
			parts[i], found = name+" "+leaf, found || ok
		}
		return head + "(" + strings.Join(parts, ", ") + ")", found
	}
	return t, false // DECIMAL(9,2), VARCHAR(10), …
}

// VarcharLeaves is the nested type typ with every leaf type VARCHAR (map
// keys and JSON leaves kept): STRUCT(a INTEGER, b DECIMAL(9,2)[]) is STRUCT(a VARCHAR,
// b VARCHAR[]).
func VarcharLeaves(typ string) string {
	t := strings.TrimSpace(typ)
	if strings.HasSuffix(t, "]") {
		if i := strings.LastIndex(t, "["); i > 0 {
			return VarcharLeaves(t[:i]) + t[i:]
		}
	}
	if strings.EqualFold(t, "JSON") {
		return t // any JSON casts; its nulls are the source's
	}
	open := strings.IndexByte(t, '(')
	if open < 0 || !strings.HasSuffix(t, ")") {
		return "VARCHAR"
	}
	head, parts := strings.ToUpper(strings.TrimSpace(t[:open])), SplitTop(t[open+1:len(t)-1])
	switch head {
	case "MAP":
		if len(parts) == 2 {
			return "MAP(" + parts[0] + ", " + VarcharLeaves(parts[1]) + ")"
		}
	case "STRUCT", "UNION":
		for i, p := range parts {
			name, rest := splitName(p)
			parts[i] = name + " " + VarcharLeaves(rest)
		}
		return head + "(" + strings.Join(parts, ", ") + ")"
	}
	return "VARCHAR" // DECIMAL(9,2), VARCHAR(10), …
}

// SplitTop splits s at the commas outside parentheses and quotes (a
// nested type's fields, in DuckDB's or Databend's notation).
func SplitTop(s string) []string {
	var parts []string
	depth, quoted, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

// splitName splits a struct field "name TYPE" (name possibly quoted).
func splitName(f string) (name, typ string) {
	if strings.HasPrefix(f, `"`) {
		for i := 1; i < len(f); i++ {
			if f[i] == '"' {
				if i+1 < len(f) && f[i+1] == '"' {
					i++
					continue
				}
				return f[:i+1], strings.TrimSpace(f[i+1:])
			}
		}
	}
	name, typ, _ = strings.Cut(f, " ")
	return name, strings.TrimSpace(typ)
}
