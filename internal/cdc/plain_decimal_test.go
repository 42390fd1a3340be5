package cdc

import (
	"strings"
	"testing"
)

// A number with an exponent is written out as decimal text, every digit
// kept, as BigDecimal.toPlainString would; an exponent beyond any
// database's decimal is not.
func TestAppendPlainDecimal(t *testing.T) {
	for in, want := range map[string]string{
		"1.23456789E7":           "12345678.9",
		"1.0E7":                  "10000000",
		"1.0E-5":                 "0.000010",
		"-1.5E-4":                "-0.00015",
		"1.00E-7":                "0.000000100",
		"5e-1":                   "0.5",
		"0.5E1":                  "5",
		"0.05e+1":                "0.5",
		"12.5e0":                 "12.5",
		"-9E2":                   "-900",
		"1.7976931348623157E308": "17976931348623157" + strings.Repeat("0", 292),
	} {
		got, ok := appendPlainDecimal(nil, []byte(in))
		if !ok || string(got) != want {
			t.Errorf("%s: got %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"1e16384", "1e-16384", "1e99999999999999999999"} {
		if got, ok := appendPlainDecimal(nil, []byte(in)); ok {
			t.Errorf("%s: got %q, want refused", in, got)
		}
	}
}
