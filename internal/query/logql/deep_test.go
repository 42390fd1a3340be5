package logql

import (
	"strings"
	"testing"
)

// TestDeepNestingIsRefused: a query of millions of parentheses, signs or
// label filter groups (a form-encoded POST to /loki/api/v1/query carries
// up to 10 MB) is a parse error, not a recursion that grows the stack
// past Go's limit: that is a fatal error, which ends the whole process.
func TestDeepNestingIsRefused(t *testing.T) {
	const n = 4 << 20
	for _, q := range []string{
		strings.Repeat("(", n) + "vector(1)" + strings.Repeat(")", n),
		strings.Repeat("-", n) + "vector(1)",
		`{a="b"} | ` + strings.Repeat("(", n) + `x="y"` + strings.Repeat(")", n),
	} {
		if _, err := Parse(q); err == nil {
			t.Errorf("%.12s… of %d bytes parsed", q, len(q))
		}
	}
	if _, err := Parse(strings.Repeat("(", 100) + `sum(count_over_time({a="b"} | (x="y" or (z="w"))[1m]))` + strings.Repeat(")", 100)); err != nil {
		t.Errorf("a query nesting 100 levels: %v", err)
	}
}
