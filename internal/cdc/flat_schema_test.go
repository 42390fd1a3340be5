package cdc

import "testing"

// A PostgreSQL row ExtractNewRecordState flattened with add.fields=op,db,table
// (as the SMT's documentation has it, no schema named) has a __db, the
// database, and a __table, and its topic, <server>.<schema>.<table>, names
// its schema: the same table as that of its connector's unflattened
// changes (source db, schema and table). Routed without the schema, two
// tables of one name in two schemas of the database (public.customers and
// sales.customers) were one table, each key's row of one overwriting the
// other's, and a connector's first flattened change of a table it sent
// unflattened before was dead-lettered, its table "already held" by the
// same table with its schema.
func TestDebeziumFlattenedPostgresRowKeepsItsSchema(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	const envelope = `{"before":null,"after":{"id":1,"v":"a"},"op":"c","source":{"connector":"postgresql","name":"srv","db":"app","schema":"public","table":"customers","lsn":100}}`
	got, err := d.Decode(nil, "srv.public.customers", []byte(`{"id":1}`), []byte(envelope))
	if err != nil || len(got) != 1 {
		t.Fatalf("the unflattened change: %s (err %v)", render(got), err)
	}
	flat := func(d *Decoder, schemaName string) ([]Change, error) {
		return d.Decode(nil, "srv."+schemaName+".customers", []byte(`{"id":1}`),
			[]byte(`{"id":1,"v":"b","__op":"u","__db":"app","__table":"customers","__lsn":200}`))
	}
	before := got[0].Table
	got, err = flat(d, "public")
	if err != nil || len(got) != 1 || got[0].Table != before {
		t.Errorf("the flattened change of public.customers: %s (err %v), want a change of %s", render(got), err, before.Log)
	}
	// A fresh decoder: public.customers, then sales.customers, which
	// the default template names alike and is refused as another table
	// of that name (as its unflattened changes are), not merged into it.
	d, err = NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	if got, err = flat(d, "public"); err != nil || len(got) != 1 || got[0].Table.Schema != "public" {
		t.Errorf("the flattened change of public.customers: %s (err %v), want one of app.public.customers", render(got), err)
	}
	if got, err = flat(d, "sales"); err == nil {
		t.Errorf("the flattened change of sales.customers went to %s with public.customers", got[0].Table.Log)
	}
	// A MySQL row's topic, <server>.<database>.<table>, names no schema.
	got, err = d.Decode(nil, "my.shop.orders", []byte(`{"id":1}`), []byte(`{"id":1,"__op":"c","__db":"shop","__table":"orders"}`))
	if err != nil || len(got) != 1 || got[0].Table.Schema != "" || got[0].Table.Database != "shop" {
		t.Errorf("a MySQL flattened row: %s (err %v), want shop.orders", render(got), err)
	}
}
