package cdc

import (
	"strconv"
	"testing"

	"github.com/tracelake/tracelake/internal/schema"
)

// A BIT(n) of more than one bit comes from Debezium as io.debezium.data.Bits:
// bytes, its bits little-endian, sized to n (the length parameter), which the
// JsonConverter writes as base64 (MySQL connector documentation, "Basic
// types": BIT(>1); JdbcValueConverters.convertBits reverses the driver's
// big-endian bytes and pads them; PostgreSQL's bit varying(n) gives only the
// bytes its set bits need, PostgresValueConverter.convertBits). It is the
// unsigned number its bits make, as the source's BIT is and as Canal's
// changes of the same column load (a BIGINT, and beyond it a BIT(64)'s
// DECIMAL(20,0)); kept as the base64 text the model held "BQ==" where the
// source holds b'101', which reconcile --source reports different in
// every row.
func TestDebeziumBitsAreTheirNumber(t *testing.T) {
	bits := func(name string, n int) string {
		return `{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","version":1,"parameters":{"length":"` +
			strconv.Itoa(n) + `"},"field":"` + name + `"}`
	}
	fields := []string{bits("b3", 3), bits("b16", 16), bits("b64", 64), bits("varbit", 33), bits("none", 8)}
	// b'101', 0x0102, 2^64-1, b'101' in a bit varying(33), NULL.
	row := `"b3":"BQ==","b16":"AgE=","b64":"//////////8=","varbit":"BQ==","none":null`
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, row)))
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		typ       schema.Type
		precision int
		value     string
	}
	wants := map[string]want{
		"b3":     {schema.Int64, 0, "5"},
		"b16":    {schema.Int64, 0, "258"},
		"b64":    {schema.Decimal, 20, `"18446744073709551615"`},
		"varbit": {schema.Int64, 0, "5"},
		"none":   {schema.Int64, 0, "null"},
	}
	values := columnValues(&got[0])
	for _, col := range got[0].Columns {
		w, ok := wants[col.Name]
		if !ok {
			continue
		}
		if col.Type != w.typ || col.Precision != w.precision || col.Scale != 0 || values[col.Name] != w.value {
			t.Errorf("%s: %s(%d,%d) %s, want %s(%d,0) %s", col.Name, typeNames[col.Type], col.Precision, col.Scale,
				values[col.Name], typeNames[w.typ], w.precision, w.value)
		}
	}
	// Bytes that are no base64, or more than a 64-bit number holds, are
	// refused.
	for _, bad := range []string{`"b3":"?","b16":null,"b64":null,"varbit":null,"none":null`,
		`"b3":"AQIDBAUGBwgJ","b16":null,"b64":null,"varbit":null,"none":null`} {
		if _, err := d.Decode(nil, "srv.public.t", nil, []byte(pgMessage(fields, bad))); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
