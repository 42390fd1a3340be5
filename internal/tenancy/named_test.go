package tenancy

import (
	"errors"
	"net/http"
	"testing"
)

// Named takes one value, trimmed, and refuses several or an empty one
// as Invalid; no value names none.
func TestNamedTakesOneValue(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   string
		refuse bool
	}{
		{"none", nil, "", false},
		{"one", []string{"team-a"}, "team-a", false},
		{"one, padded", []string{" team-a\t"}, "team-a", false},
		{"inner space kept for CheckTenant", []string{"a b"}, "a b", false},
		{"several tenants", []string{"a|b"}, "a|b", false}, // the Resolver's to refuse
		{"two", []string{"a", "b"}, "", true},
		{"the same twice", []string{"a", "a"}, "", true},
		{"empty", []string{""}, "", true},
		{"blank", []string{" \t "}, "", true},
		{"empty, then one", []string{"", "a"}, "", true},
	} {
		got, err := Named(Header, c.values)
		var e *Error
		switch {
		case c.refuse && (!errors.As(err, &e) || e.Kind != Invalid):
			t.Errorf("%s: %q, %v; want refused Invalid", c.name, got, err)
		case !c.refuse && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	// HTTP header names are case-insensitive: two spellings are one header.
	h := http.Header{}
	h.Add("x-scope-orgid", "a")
	h.Add("X-SCOPE-ORGID", "b")
	if got, err := NamedInHTTP(h); err == nil {
		t.Errorf("X-Scope-OrgID as two spellings: %q, want refused", got)
	}
	if got, err := NamedInMetadata(map[string][]string{"x-scope-orgid": {"a"}}); err != nil || got != "a" {
		t.Errorf("metadata: %q, %v; want a", got, err)
	}
}
