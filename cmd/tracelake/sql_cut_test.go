package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A cell cut at 120 bytes is cut between characters: cut inside one, the
// line printed held the first bytes of a character alone, which is not
// UTF-8 (and no character of the value).
func TestFormatCellCutsBetweenCharacters(t *testing.T) {
	for _, v := range []string{strings.Repeat("é", 100), strings.Repeat("x", 116) + "€€€", strings.Repeat("😀", 40)} {
		got := formatCell(v)
		if !utf8.ValidString(got) {
			t.Errorf("formatCell(%q...) = %q: not UTF-8", v[:8], got)
		}
		if len(got) > 120 || !strings.HasSuffix(got, "...") || !strings.HasPrefix(v, strings.TrimSuffix(got, "...")) {
			t.Errorf("formatCell(%q...) = %q, want at most 120 bytes: a prefix of the value and ...", v[:8], got)
		}
	}
}
