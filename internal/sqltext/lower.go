package sqltext

import (
	"strings"
	"unicode"
)

// RustLower is Rust's str::to_lowercase, by which Databend's COPY matches
// an NDJSON field to a column (ndjson block_builder.rs normalize_field_name and
// object_values_by_key lower both): Go's strings.ToLower but for the two
// mappings it does not share, İ to i and a combining dot above (Unicode's
// SpecialCasing; Go takes the simple mapping to i) and Σ to ς at a word's
// end (final sigma: after a cased letter, not before one, case-ignorable
// characters skipped).
func RustLower(s string) string {
	if !strings.ContainsAny(s, "\u0130\u03a3") {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		switch r {
		case '\u0130':
			b.WriteString("i\u0307")
		case '\u03a3':
			if casedAcross(rs[:i], true) && !casedAcross(rs[i+1:], false) {
				b.WriteRune('\u03c2')
			} else {
				b.WriteRune('\u03c3')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// casedAcross is Rust's case_ignorable_then_cased: whether the first
// character of rs (from its end if back) that is not case-ignorable is
// cased.
func casedAcross(rs []rune, back bool) bool {
	for j := range rs {
		r := rs[j]
		if back {
			r = rs[len(rs)-1-j]
		}
		if caseIgnorable(r) {
			continue
		}
		return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
			unicode.In(r, unicode.Other_Lowercase, unicode.Other_Uppercase)
	}
	return false
}

// caseIgnorable is Unicode's Case_Ignorable: marks, format characters,
// modifier letters and symbols, and the word-internal punctuation
// (Word_Break MidLetter, MidNumLet, Single_Quote).
func caseIgnorable(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk) ||
		strings.ContainsRune("'.:\u00b7\u0387\u055f\u05f4\u2018\u2019\u2024\u2027\ufe13\ufe52\ufe55\uff07\uff0e\uff1a", r)
}

// DuckDBFold is a column name as DuckDB compares names: ASCII letters in
// lower case, every other character as it is. DuckDB takes "é" and "É"
// (or the Kelvin sign's "K" and "k") for two columns of one table, where
// Go's strings.ToLower makes them one name.
func DuckDBFold(name string) string {
	for i := 0; i < len(name); i++ {
		if 'A' <= name[i] && name[i] <= 'Z' {
			return strings.Map(func(r rune) rune {
				if 'A' <= r && r <= 'Z' {
					return r + 'a' - 'A'
				}
				return r
			}, name)
		}
	}
	return name // no copy when there is no ASCII capital
}
