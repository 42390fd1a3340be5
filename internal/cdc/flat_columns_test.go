package cdc

import "testing"

// A flattened row (ExtractNewRecordState, schemas on) is known by its
// schema's name, <server>.<database>.<table>.Value, whatever its columns
// are called: an audit table's row of columns op, before and after (the
// old and new values it records) is a row of that table too, not a change
// event whose images are those columns' strings.
func TestDebeziumFlattenedRowWithBeforeAndAfterColumnsIsARow(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := `{"schema":{"type":"struct","fields":[` +
		`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"op"},` +
		`{"type":"string","optional":true,"field":"before"},{"type":"string","optional":true,"field":"after"}],` +
		`"optional":false,"name":"srv.shop.audit.Value"},` +
		`"payload":{"id":3,"op":"u","before":"pending","after":"paid"}}`
	const want = "update shop.audit log=cdc_shop_audit_log model=cdc_shop_audit key=id pos= time=0\n" +
		"  id Int32 int32 = 3\n  op String string = \"u\"\n  before String string = \"pending\"\n  after String string = \"paid\"\n"
	got, err := d.Decode(nil, "srv.shop.audit", []byte(`{"id":3}`), []byte(value))
	if r := render(got); err != nil || r != want {
		t.Errorf("a flattened row of columns id, op, before and after: got\n%s (err %v)\nwant\n%s", r, err, want)
	}
	// Without the op column: it was dead-lettered as "op is missing".
	value = `{"schema":{"type":"struct","fields":[` +
		`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"before"},` +
		`{"type":"string","optional":true,"field":"after"}],"optional":false,"name":"srv.shop.audit2.Value"},` +
		`"payload":{"id":4,"before":null,"after":"paid"}}`
	const want2 = "update shop.audit2 log=cdc_shop_audit2_log model=cdc_shop_audit2 key=id pos= time=0\n" +
		"  id Int32 int32 = 4\n  before String string = null\n  after String string = \"paid\"\n"
	got, err = d.Decode(nil, "srv.shop.audit2", []byte(`{"id":4}`), []byte(value))
	if r := render(got); err != nil || r != want2 {
		t.Errorf("a flattened row of columns id, before and after: got\n%s (err %v)\nwant\n%s", r, err, want2)
	}
}
