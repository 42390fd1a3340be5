package tenancy

import (
	"strings"
	"testing"
)

// Tenant ids follow Mimir's rules, so ids that work there work here.
func TestCheckTenant(t *testing.T) {
	for _, c := range []struct {
		tenant string
		ok     bool
	}{
		{"team-a", true},
		{"A.b_c!-*'()9", true},
		{strings.Repeat("x", 150), true},
		{strings.Repeat("x", 151), false},
		{"", false},
		{".", false},
		{"..", false},
		{"...", true},
		{"a/b", false},
		{"a b", false},
		{"a|b", false}, // Mimir's several tenants: not one id
		{"a=b", false}, // so a tokens file's fields cannot be tenants
		{"é", false},
	} {
		if err := CheckTenant(c.tenant); (err == nil) != c.ok {
			t.Errorf("CheckTenant(%q) = %v, want ok %v", c.tenant, err, c.ok)
		}
	}
}
