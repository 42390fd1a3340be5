package tenancy

import (
	"errors"
	"fmt"
	"strconv"
)

// maxTenantLength and the characters allowed are Grafana Mimir's rules for
// tenant ids (grafana/dskit tenant/tenant.go: ValidTenantID), so ids that
// work there work here.
const maxTenantLength = 150

// CheckTenant says why t is not a valid tenant id, or nil. Mimir's
// several-tenant form a|b is not one: | is refused like any other
// character outside the set.
func CheckTenant(t string) error {
	switch {
	case t == "":
		return errors.New("empty tenant id")
	case len(t) > maxTenantLength:
		return fmt.Errorf("tenant id of %d bytes: at most %d", len(t), maxTenantLength)
	case t == "." || t == "..":
		return fmt.Errorf("tenant id %q is not allowed", t)
	}
	for i := range len(t) {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || isTenantPunct(c)) {
			return fmt.Errorf("tenant id %s has %q at byte %d: want letters, digits and !-_.*'()", strconv.Quote(t), c, i)
		}
	}
	return nil
}

func isTenantPunct(c byte) bool {
	switch c {
	case '!', '-', '_', '.', '*', '\'', '(', ')':
		return true
	}
	return false
}
