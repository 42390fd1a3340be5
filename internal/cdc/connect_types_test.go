package cdc

import (
	"strings"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
)

// Kafka Connect's JsonConverter names a FLOAT32 field's type "float" and a
// FLOAT64's "double" in the schema it writes beside the payload (connect/json
// JsonSchema.FLOAT_TYPE_NAME and DOUBLE_TYPE_NAME in apache/kafka; Schema.Type's
// own names, float32 and float64, are not what it writes). Debezium gives a
// PostgreSQL real a FLOAT32 and a double precision (and MySQL's FLOAT, DOUBLE
// and REAL) a FLOAT64 (the connectors' documentation, "Basic types"). Such a
// column is a DOUBLE of the changelog, its null too: read as an unknown type,
// every change with a number in it was dead-lettered and a null made the
// column text.
func TestDebeziumFloatAndDoubleAreNumbers(t *testing.T) {
	fields := []string{
		`{"type":"float","optional":true,"field":"ratio"}`,
		`{"type":"double","optional":true,"field":"weight"}`,
		`{"type":"double","optional":true,"field":"missing"}`,
		`{"type":"double","optional":true,"field":"nan"}`,
	}
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, `"ratio":0.5,"weight":1.0E10,"missing":null,"nan":"NaN"`)))
	if err != nil {
		t.Fatalf("a change with a real and a double precision column: %v", err)
	}
	want := map[string]string{"ratio": "0.5", "weight": "1.0E10", "missing": "null", "nan": `"NaN"`}
	values := columnValues(&got[0])
	for _, col := range got[0].Columns {
		w, ok := want[col.Name]
		if !ok {
			continue
		}
		if col.Type != schema.Float64 {
			t.Errorf("%s is a %s column, want Float64", col.Name, typeNames[col.Type])
		}
		if values[col.Name] != w {
			t.Errorf("%s = %s, want %s", col.Name, values[col.Name], w)
		}
	}
	// A string where a double goes is still refused.
	bad := pgMessage(fields, `"ratio":"half","weight":1,"missing":null,"nan":null`)
	if _, err := d.Decode(nil, "srv.public.t", nil, []byte(bad)); err == nil || !strings.Contains(err.Error(), "ratio") {
		t.Errorf(`"half" in a float column: %v, want an error naming ratio`, err)
	}
}
