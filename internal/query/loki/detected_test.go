package loki

import "testing"

// TestRejectLabel: labels whose values are all ids are left out of
// detected_labels; booleans and categories are kept.
func TestRejectLabel(t *testing.T) {
	set := func(vs ...string) map[string]bool {
		m := map[string]bool{}
		for _, v := range vs {
			m[v] = true
		}
		return m
	}
	for _, c := range []struct {
		values map[string]bool
		reject bool
	}{
		{set(), true},
		{set("0", "1"), false},
		{set("1", "2", "3"), true},
		{set("8c6f0e4e-2b1a-4f1e-9d7c-1c2b3a4d5e6f", "42"), true},
		{set("checkout", "42"), false},
	} {
		if got := rejectLabel(c.values); got != c.reject {
			t.Errorf("%v: reject %v, want %v", c.values, got, c.reject)
		}
	}
}
