package cdc

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A Debezium decimal's text is its unscaled value with scale digits after
// the point, so a message of a hundred bytes whose scale is huge (a
// VariableScaleDecimal's scale is any int32; a Decimal's is the schema's
// parameter) expanded to that many zeros: 2^31 of them, 2 GiB, for
// Integer.MAX_VALUE, and a 64-bit parameter looped until the process ran
// out of memory, at every restart, stalling its partition for good. No
// database Debezium reads writes such a scale: it is dead-lettered with the
// reason, without expanding it (here 2^27, which the old code grew to
// 128 MiB and more).
func TestDecimalScaleBeyondAnyDatabaseIsRefusedWithoutExpanding(t *testing.T) {
	const huge = 1 << 27
	varDec := func(scale int) string {
		return `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"id","type":"int32"},` +
			`{"field":"n","type":"struct","name":"io.debezium.data.VariableScaleDecimal","fields":[{"field":"scale","type":"int32"},{"field":"value","type":"bytes"}]}]}]},` +
			`"payload":{"before":null,"after":{"id":1,"n":{"scale":` + strconv.Itoa(scale) + `,"value":"AQ=="}},"op":"c","source":{"db":"d","table":"t"}}}`
	}
	fixed := func(scale int, array bool) string {
		typ, value := `"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"`+strconv.Itoa(scale)+`"}`, `"AQ=="`
		if array {
			typ, value = `"type":"array","items":{`+typ+`}`, `["AQ=="]`
		}
		return `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"id","type":"int32"},{"field":"n",` + typ + `}]}]},` +
			`"payload":{"before":null,"after":{"id":1,"n":` + value + `},"op":"c","source":{"db":"d","table":"t"}}}`
	}
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, value string }{
		{"VariableScaleDecimal", varDec(huge)},
		{"VariableScaleDecimal, negative scale", varDec(-huge)},
		{"Decimal", fixed(huge, false)},
		{"Decimal, negative scale", fixed(-huge, false)},
		{"array of Decimal", fixed(huge, true)},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := d.Decode(nil, "srv.d.t", nil, []byte(tc.value))
		runtime.ReadMemStats(&after)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Reason, `column "n"`) {
			t.Errorf("%s with a scale of %d: got %v, want a dead letter naming column n", tc.name, huge, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("%s with a scale of %d: decoding allocated %d bytes", tc.name, huge, grew)
		}
	}

	// A scale a database has is kept exactly: PostgreSQL's numeric holds
	// up to 16383 digits after the point.
	c, err := d.Decode(nil, "srv.d.t", nil, []byte(varDec(16383)))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"0.` + strings.Repeat("0", 16382) + `1"`; string(c[0].Columns[1].Value) != want {
		t.Errorf("scale 16383: got %.40s…, want %.40s…", c[0].Columns[1].Value, want)
	}
}

// A Kafka Connect Decimal's bytes are its unscaled value; only the schema's
// scale parameter places the point (Kafka Connect's Decimal.toLogical
// throws "Invalid Decimal schema: scale parameter not found" without it,
// Debezium's CHANGELOG, DBZ-3371). A schema without one (an SMT that
// rebuilt it, a hand-written producer) stored 123.45 as 12345: a value a
// hundred times too large, silently. It is dead-lettered with the reason.
func TestDecimalWithoutItsScaleIsDeadLettered(t *testing.T) {
	event := func(params string, array bool) string {
		typ, value := `"type":"bytes","name":"org.apache.kafka.connect.data.Decimal"`+params, `"MDk="` // 12345
		if array {
			typ, value = `"type":"array","items":{`+typ+`}`, `["MDk="]`
		}
		return `{"schema":{"type":"struct","fields":[{"field":"after","type":"struct","fields":[{"field":"id","type":"int32"},{"field":"n",` + typ + `}]}]},` +
			`"payload":{"before":null,"after":{"id":1,"n":` + value + `},"op":"c","source":{"db":"d","table":"t"}}}`
	}
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, params string
		array        bool
	}{
		{"no parameters", ``, false},
		{"parameters without scale", `,"parameters":{"connect.decimal.precision":"7"}`, false},
		{"a scale that is no integer", `,"parameters":{"scale":"two"}`, false},
		{"array items without scale", ``, true},
	} {
		got, err := d.Decode(nil, "srv.d.t", nil, []byte(event(tc.params, tc.array)))
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(e.Reason, `column "n"`) || !strings.Contains(e.Reason, "scale") {
			var v string
			if len(got) > 0 && len(got[0].Columns) > 1 {
				v = string(got[0].Columns[1].Value)
			}
			t.Errorf("%s: got %v (value %s), want a dead letter naming column n and its scale", tc.name, err, v)
		}
	}
	// With its scale, it is 123.45.
	got, err := d.Decode(nil, "srv.d.t", nil, []byte(event(`,"parameters":{"scale":"2"}`, false)))
	if err != nil {
		t.Fatal(err)
	}
	if v := string(got[0].Columns[1].Value); v != `"123.45"` {
		t.Errorf("with scale 2: %s, want \"123.45\"", v)
	}
}
