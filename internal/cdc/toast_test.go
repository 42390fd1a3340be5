package cdc

import (
	"strings"
	"testing"
)

// toastForms are the forms of Debezium's default placeholder for a value
// it did not read, by PostgreSQL type (UnchangedToastedPlaceholder), with
// the field schema of each: an integer[], bigint[] or date[] value is a
// list of the placeholder's bytes as numbers, a bytea[] a list of its
// bytes, a uuid[] a list of its name-based UUID, an hstore a map of it to
// itself (or that map's JSON text). Taken for a value, a model would hold
// [95,95,100,…] for an array the update did not change.
var toastForms = []struct{ name, typ, value string }{
	{"text", `{"type":"string"}`, `"__debezium_unavailable_value"`},
	{"jsonb", `{"type":"string","name":"io.debezium.data.Json"}`, `"__debezium_unavailable_value"`},
	{"bytea base64", `{"type":"bytes"}`, `"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="`},
	{"text[]", `{"type":"array","items":{"type":"string","optional":true}}`, `["__debezium_unavailable_value"]`},
	{"integer[]", `{"type":"array","items":{"type":"int32","optional":true}}`, `[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,101]`},
	{"date[]", `{"type":"array","items":{"type":"int32","optional":true,"name":"io.debezium.time.Date"}}`, `[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,101]`},
	{"bytea[]", `{"type":"array","items":{"type":"bytes","optional":true}}`, `["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="]`},
	{"uuid[]", `{"type":"array","items":{"type":"string","optional":true,"name":"io.debezium.data.Uuid"}}`, `["b68a35a7-17ad-35b3-af2a-ae46edb4545a"]`},
	{"hstore map", `{"type":"map","keys":{"type":"string"},"values":{"type":"string","optional":true}}`, `{"__debezium_unavailable_value":"__debezium_unavailable_value"}`},
	{"hstore json", `{"type":"string","name":"io.debezium.data.Json"}`, `"{\"__debezium_unavailable_value\":\"__debezium_unavailable_value\"}"`},
}

// toastEvent is a Debezium PostgreSQL change of public.t (key id) whose
// column doc holds value, of field type typ, with the schema wrapper or
// without; the row is the before image of a delete.
func toastEvent(op, typ, value string, schemas bool) (key, event string) {
	row := `{"id":1,"v":"x","doc":` + value + `}`
	before, after := "null", row
	if op == "d" {
		before, after = row, "null"
	}
	payload := `{"before":` + before + `,"after":` + after + `,"op":"` + op + `","source":{"db":"postgres","schema":"public","table":"t","lsn":7}}`
	key = `{"id":1}`
	if !schemas {
		return key, payload
	}
	doc := strings.Replace(typ, `{`, `{"field":"doc","optional":true,`, 1)
	st := `{"type":"struct","optional":true,"fields":[{"field":"id","type":"int32"},{"field":"v","type":"string","optional":true},` + doc + `]`
	return `{"schema":{"type":"struct","fields":[{"field":"id","type":"int32"}]},"payload":` + key + `}`,
		`{"schema":{"type":"struct","fields":[` + st + `,"field":"before"},` + st + `,"field":"after"}]},"payload":` + payload + `}`
}

// An update, a create (of an update that changed the primary key) or a
// delete whose column holds the placeholder in any of its forms decodes,
// the column's value unknown (nil, not the placeholder's text) and the
// others as sent; a snapshot read holding it is refused: it selects
// every value, and no earlier change gives it.
func TestUnavailableValueOfAnUpdateIsNotRead(t *testing.T) {
	for _, tc := range toastForms {
		for _, schemas := range []bool{false, true} {
			for _, op := range []string{"u", "d", "c", "r"} {
				d, err := NewDecoder(Options{Format: FormatDebezium})
				if err != nil {
					t.Fatal(err)
				}
				key, value := toastEvent(op, tc.typ, tc.value, schemas)
				got, err := d.Decode(nil, "srv.public.t", []byte(key), []byte(value))
				where := tc.name + " op " + op
				if schemas {
					where += " with schemas"
				}
				if op == "r" {
					if !refusedAsPlaceholder(err) {
						t.Errorf("%s: got %s, %v; want the placeholder refused", where, render(got), err)
					}
					continue
				}
				if err != nil || len(got) != 1 {
					t.Errorf("%s: got %d changes, %v; want the change", where, len(got), err)
					continue
				}
				doc := column(got[0].Columns, "doc")
				if doc == nil || doc.Value != nil || !doc.Unavailable {
					t.Errorf("%s: doc is %s, want it unread, with no value", where, render(got))
				}
				if v := column(got[0].Columns, "v"); v == nil || string(v.Value) != `"x"` {
					t.Errorf("%s: v is %s, want \"x\"", where, render(got))
				}
			}
		}
	}
}

// A key column holding the placeholder is refused, whatever the op: the
// key says which row the change is of.
func TestUnavailableKeyIsRefused(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"u", "d"} {
		_, err := d.Decode(nil, "srv.public.t", []byte(`{"k":"__debezium_unavailable_value"}`),
			[]byte(`{"before":{"k":"__debezium_unavailable_value"},"after":{"k":"__debezium_unavailable_value","v":1},"op":"`+op+`","source":{"db":"postgres","schema":"public","table":"t","lsn":7}}`))
		if !refusedAsPlaceholder(err) {
			t.Errorf("op %s: %v, want the placeholder in the key refused", op, err)
		}
	}
}

// A connector's own placeholder (cdc.unavailable_placeholder) in an
// update is read as unread too, in its text and bytes forms; the
// default's text is then a value.
func TestConfiguredUnavailableValueOfAnUpdateIsNotRead(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium, UnavailablePlaceholder: "UNSET"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		value  string
		unread bool
	}{{`"UNSET"`, true}, {`"VU5TRVQ="`, true}, {`[85,78,83,69,84]`, true}, {`"__debezium_unavailable_value"`, false}} {
		_, value := toastEvent("u", "", c.value, false)
		got, err := d.Decode(nil, "srv.public.t", []byte(`{"id":1}`), []byte(value))
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %d changes, %v", c.value, len(got), err)
		}
		if doc := column(got[0].Columns, "doc"); doc == nil || doc.Unavailable != c.unread {
			t.Errorf("%s: got %s, want unread %v", c.value, render(got), c.unread)
		}
	}
}

// column is the column of cols named name, nil for none.
func column(cols []Column, name string) *Column {
	for i := range cols {
		if cols[i].Name == name {
			return &cols[i]
		}
	}
	return nil
}

// Debezium's MySQL and MariaDB connectors never write the placeholder
// (they read every value from the binlog's row image; it is
// PostgreSQL's, for a TOAST value): in a change of theirs, a text column
// holding the placeholder's text holds that text, which a user wrote.
// Read as unread, an update's would leave the model the column's earlier
// value, and a create's would be dead-lettered.
func TestPlaceholderTextOfABinlogSourceIsAValue(t *testing.T) {
	for _, op := range []string{"c", "u", "r"} {
		d, err := NewDecoder(Options{Format: FormatDebezium})
		if err != nil {
			t.Fatal(err)
		}
		value := `{"before":null,"after":{"id":1,"v":"x","doc":"__debezium_unavailable_value"},"op":"` + op +
			`","source":{"connector":"mysql","db":"shop","table":"t","file":"mysql-bin.000003","pos":4711}}`
		got, err := d.Decode(nil, "srv.shop.t", []byte(`{"id":1}`), []byte(value))
		if err != nil || len(got) != 1 {
			t.Errorf("op %s: got %d changes, %v; want the change", op, len(got), err)
			continue
		}
		doc := column(got[0].Columns, "doc")
		if doc == nil || doc.Unavailable || string(doc.Value) != `"__debezium_unavailable_value"` {
			t.Errorf("op %s: doc is %s, want the text as its value", op, render(got))
		}
	}
}

// Only a whole value that is one of the placeholder's forms is unread:
// the placeholder's text inside a jsonb document, as one of several
// elements of an array, or a list of its bytes with one more, is a value
// a user wrote, kept as it is.
func TestPlaceholderInsideAValueIsAValue(t *testing.T) {
	numbers := `95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,101`
	for _, tc := range []struct{ name, typ, value string }{
		{"jsonb object", `{"type":"string","name":"io.debezium.data.Json"}`, `"{\"k\":\"__debezium_unavailable_value\"}"`},
		{"jsonb string", `{"type":"string","name":"io.debezium.data.Json"}`, `"\"__debezium_unavailable_value\""`},
		{"text[] of two", `{"type":"array","items":{"type":"string","optional":true}}`, `["__debezium_unavailable_value","x"]`},
		{"integer[] longer", `{"type":"array","items":{"type":"int32","optional":true}}`, `[` + numbers + `,1]`},
		{"hstore map of two", `{"type":"map","keys":{"type":"string"},"values":{"type":"string","optional":true}}`, `{"__debezium_unavailable_value":"__debezium_unavailable_value","k":"v"}`},
		{"text padded", `{"type":"string"}`, `" __debezium_unavailable_value"`},
	} {
		for _, schemas := range []bool{false, true} {
			d, err := NewDecoder(Options{Format: FormatDebezium})
			if err != nil {
				t.Fatal(err)
			}
			key, value := toastEvent("u", tc.typ, tc.value, schemas)
			got, err := d.Decode(nil, "srv.public.t", []byte(key), []byte(value))
			if err != nil || len(got) != 1 {
				t.Errorf("%s (schemas %v): got %d changes, %v; want the change", tc.name, schemas, len(got), err)
				continue
			}
			if doc := column(got[0].Columns, "doc"); doc == nil || doc.Unavailable || doc.Value == nil {
				t.Errorf("%s (schemas %v): doc is %s, want its value", tc.name, schemas, render(got))
			}
		}
	}
}
