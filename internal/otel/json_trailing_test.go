package otel

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/sink"
)

// An otlp_json message is one export request. pdata's JSON unmarshalers
// read its first JSON value and ignore what follows, so a message of two
// requests (or one followed by garbage) loaded the first request's rows
// and lost the rest without a dead letter. It is not OTLP JSON: the whole
// message is dead-lettered (an error here), as any other message that is
// not OTLP of the decoder's signal and encoding.
func TestJSONMessageWithMoreAfterItsRequestIsNotOTLP(t *testing.T) {
	first := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"first"}}]}]}]}`
	second := `{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"second"}}]}]}]}`
	d, err := NewDecoder(SignalLogs, EncodingJSON, Tenancy{Default: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range []string{first + second, first + "\n" + second, first + " x", "null" + second} {
		var b sink.Batch
		n, err := d.AppendRows(&b, &kgo.Record{Topic: "k", Value: []byte(msg)})
		if err == nil || n != 0 || len(b.Rows) != 0 {
			t.Errorf("%q: %d rows, err %v; want it refused whole (dead-lettered):\n%s", msg, n, err, b.Rows)
		}
	}
	var b sink.Batch
	if n, err := d.AppendRows(&b, &kgo.Record{Topic: "k", Value: []byte(first + "\n")}); err != nil || n != 1 || !strings.Contains(string(b.Rows), "first") {
		t.Errorf("a request followed by a newline: %d rows, %v", n, err)
	}
}

// Where the first JSON value ends: quotes, escapes and brackets inside
// strings are the string's, and white space after the value is allowed.
func TestCheckOneJSONValue(t *testing.T) {
	f := func(body string, one bool) {
		t.Helper()
		if err := CheckOneJSONValue([]byte(body)); (err == nil) != one {
			t.Errorf("%q: %v, want one value: %v", body, err, one)
		}
	}
	f(`{}`, true)
	f(" \n{\"a\":[1,{\"b\":\"}]\\\"{\"}]}\r\n\t ", true)
	f(`{"a":"\\"}`, true)
	f(`"x" `, true)
	f(`null`, true)
	f(``, true)
	f(`{"a":1`, true) // does not end: pdata refuses it
	f(`{"a":"\\"}}`, false)
	f(`{"a":"}"}{}`, false)
	f(`[]x`, false)
	f(`null{}`, false)
	f(`1 2`, false)
	f(`"x"y`, false)
}
