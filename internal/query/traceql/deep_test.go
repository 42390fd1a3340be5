package traceql

import (
	"strings"
	"testing"
)

// TestDeepNestingIsRefused: a query of a million opening parentheses
// or negations (a GET of a megabyte, which Go's server reads) is a parse
// error, not a recursion that grows the stack past Go's limit: that is a
// fatal error, which ends the whole process.
func TestDeepNestingIsRefused(t *testing.T) {
	for _, q := range []string{strings.Repeat("(", 1<<20), "{ " + strings.Repeat("(", 1<<20), "{ " + strings.Repeat("!", 1<<20) + ".a }"} {
		if _, err := Parse(q); err == nil {
			t.Errorf("%.10s… of %d bytes parsed", q, len(q))
		}
	}
	if _, err := Parse(strings.Repeat("(", 50) + "{ " + strings.Repeat("(", 50) + ".a = 1" + strings.Repeat(")", 50) + " }" + strings.Repeat(")", 50)); err != nil {
		t.Errorf("a query nesting 100 levels: %v", err)
	}
}
