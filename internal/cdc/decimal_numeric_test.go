package cdc

import (
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
)

// Kafka Connect's JsonConverter with decimal.format=NUMERIC (KIP-481,
// Kafka 2.4; JsonConverterConfig.DECIMAL_FORMAT_CONFIG, default BASE64)
// writes an org.apache.kafka.connect.data.Decimal as a JSON number, its
// BigDecimal as Jackson writes it (BigDecimal.toString: 1E-8 for
// 0.00000001 at scale 8), where its default is the base64 of the unscaled
// bytes; the schema is the same. Either is the decimal: a number was
// refused as "not a value of" the Decimal, and every change of a table
// with a DECIMAL or NUMERIC column dead-lettered. So was a numeric[]'s.
func TestDebeziumDecimalAsAJSONNumber(t *testing.T) {
	dec := func(name string, scale string) string {
		return `{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,` +
			`"parameters":{"scale":"` + scale + `","connect.decimal.precision":"20"},"field":"` + name + `"}`
	}
	fields := []string{dec("price", "2"), dec("tiny", "8"), dec("neg", "2"),
		`{"type":"array","optional":true,"items":{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},"field":"prices"}`}
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, `"price":12.30,"tiny":1E-8,"neg":-0.05,"prices":[12.34,null,-1.00]`)))
	if err != nil {
		t.Fatalf("decimals as JSON numbers: %v", err)
	}
	want := map[string]string{"price": `"12.30"`, "tiny": `"0.00000001"`, "neg": `"-0.05"`, "prices": `[12.34,null,-1.00]`}
	values := columnValues(&got[0])
	for _, col := range got[0].Columns {
		w, ok := want[col.Name]
		if !ok {
			continue
		}
		if values[col.Name] != w {
			t.Errorf("%s = %s, want %s", col.Name, values[col.Name], w)
		}
		if col.Name != "prices" && col.Type != schema.Decimal {
			t.Errorf("%s is a %s column, want Decimal", col.Name, typeNames[col.Type])
		}
	}
	// true where a decimal goes is still refused.
	if _, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, `"price":true,"tiny":null,"neg":null,"prices":null`))); err == nil {
		t.Errorf("true in a Decimal column: no error")
	}
}
