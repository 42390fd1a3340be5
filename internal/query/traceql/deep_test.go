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

// A q being typed is completed as upstream's ParseLenient completes it
// (pkg/traceql/lenient_parser_test.go's shapes): a comparison with no
// value becomes true, unclosed braces are closed, the rest is kept.
func TestCompleted(t *testing.T) {
	for q, want := range map[string]string{
		`{ .foo = "bar" && name = }`:                `{ .foo = "bar" && true }`,
		`{ span.http.method = `:                     `{ true  }`,
		`{ name = || resource.service.name = "a" }`: `{ true || resource.service.name = "a" }`,
		`{ (span.a > ) && span.b = 1 }`:             `{ (true ) && span.b = 1 }`,
		`{ span.a = 1 } | count() > `:               `{ span.a = 1 } | count() > `,
		`{ span.a = "x`:                             ``,
	} {
		if got := completed(q); got != want {
			t.Errorf("completed(%q) = %q, want %q", q, got, want)
		}
	}
	if TagFilter(`{ resource.service.name = "payments" && span.http.method = }`) == nil {
		t.Error("a completed q filters nothing")
	}
}
