package otel

import "testing"

// withoutNulls leaves out the object members whose value is null, at any
// depth, and nothing else: not null elements of arrays, not strings
// spelling null; a body it cannot read is left as it came, for pdata.
func TestWithoutNulls(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":null}`, `{}`},
		{` { "a" : null , "b" : 1 , "c":null } `, `{"b" : 1}`},
		{`{"a":{"b":null,"c":[{"d":null,"e":"null"},null]}}`, `{"a":{"c":[{"e":"null"},null]}}`},
		{`{"null":"null","n":nullx}`, `{"null":"null","n":nullx}`},
		{`{"a":[1,2],"s":"x"}`, `{"a":[1,2],"s":"x"}`},
		{`{"a":null`, `{"a":null`},
		{`[null]`, `[null]`},
		{`null`, `null`},
	} {
		if got := string(withoutNulls([]byte(c.in))); got != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}
