package otel

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// A null nested deeper than 64 JSON levels, but within what pdata's
// protobuf decoder takes (as the receivers check), is read as its default
// like one nested less: a log body or attribute of nested maps.
func TestPrepareJSONNullDeepInAcceptedNesting(t *testing.T) {
	const levels = 20 // 60 of pdata's recursion limit of 100
	v := `{"doubleValue":null}`
	for range levels {
		v = `{"kvlistValue":{"values":[{"key":"k","value":` + v + `}]}}`
	}
	body := nullSpanHead + `{"key":"deep","value":` + v + `}` + nullSpanTail
	td, err := jsonTraces{}.UnmarshalTraces([]byte(body))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	proto, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if err := ptraceotlp.NewExportRequest().UnmarshalProto(proto); err != nil {
		t.Fatalf("nesting past pdata's protobuf limit, the test is wrong: %v", err)
	}
	if !strings.Contains(body, "null") {
		t.Fatal("no null")
	}
}

// withoutNulls reads a body once at any depth, and leaves a body whose
// structure is not JSON's as it came, for pdata to refuse.
func TestWithoutNullsDeepAndInvalid(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, 500) + `{"b":null,"c":1}` + strings.Repeat(`]}`, 500)
	want := strings.Repeat(`{"a":[`, 500) + `{"c":1}` + strings.Repeat(`]}`, 500)
	if got := string(withoutNulls([]byte(deep))); got != want {
		t.Errorf("500 deep: got %.80s…", got)
	}
	for _, in := range []string{`{"a":null,}`, `{"a":1,"b":null,}`, `[1,,null]`, `{"a":null "b":1}`, `{"a":[null}`, `{"a":null}}`, `{"a" null}`, `{,"a":null}`} {
		if got := string(withoutNulls([]byte(in))); got != in {
			t.Errorf("%s: got %s, want it as it came", in, got)
		}
	}
}

// Strings holding quotes, backslashes and null are read as strings; a key
// named null is a key.
func TestWithoutNullsEscapes(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"k":"x\\\"null\\","n":null}`, `{"k":"x\\\"null\\"}`},
		{`{"null":null,"a\"":"\\","b\\":null}`, `{"a\"":"\\"}`},
		{`{"a":"\"},\"b\":null"}`, `{"a":"\"},\"b\":null"}`},
		{`{"a":[null,{"b":null}]}`, `{"a":[null,{}]}`},
	} {
		if got := string(withoutNulls([]byte(c.in))); got != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
}
