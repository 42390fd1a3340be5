package sqltext

import "testing"

// RustLower lowers as Rust's str::to_lowercase (Databend's COPY matching
// fields to columns), where Go's strings.ToLower differs: İ, final Σ.
func TestRustLower(t *testing.T) {
	for in, want := range map[string]string{
		"ID":    "id",
		"İD":    "i\u0307d",
		"ΟΔΟΣ":  "οδος",
		"ΣΑ":    "σα",
		"Σ":     "σ",
		"AΣ.":   "aς.",
		"AΣ'B":  "aσ'b",
		"Ärger": "ärger",
	} {
		if got := RustLower(in); got != want {
			t.Errorf("RustLower(%q) = %q, want %q", in, got, want)
		}
	}
}
