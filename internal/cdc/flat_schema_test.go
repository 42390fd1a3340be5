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

// Where a flattened row's topic does not say its schema, the row says
// what its connector is: a MySQL row's binlog position (__file, __pos)
// says it has no schema, whatever a RegexRouter renamed its topic to
// (shop.orders sent as mysql.cdc.orders, the part before the table no
// database), and so does its value schema's name, which RegexRouter
// leaves as the connector made it (<server>.<database>.<table>.Value); a
// PostgreSQL row's position (__lsn) says the part before the table is
// its schema even when the database is called alike (database app,
// schema app). A table's name may hold a dot (v1.orders): the schema is
// the part before the whole name. A value schema's name that does not
// end in the table's (schema.name.adjustment.mode=avro writes my-orders
// as my_orders) says nothing, and the topic does. Each was routed as another table than its connector's
// unflattened changes: the first flattened change dead-lettered (its
// name taken by the same table), or, on a fresh decoder, a changelog
// table apart from the one that holds the table's earlier changes.
func TestDebeziumFlattenedRowSchemaFromWhatTheRowSays(t *testing.T) {
	for _, c := range []struct {
		name, envelope, topic, flat string
	}{
		{"a MySQL row with its binlog position on a renamed topic",
			`{"before":null,"after":{"id":1},"op":"c","source":{"connector":"mysql","name":"srv","db":"shop","table":"orders","file":"mysql-bin.000003","pos":100}}`,
			"mysql.cdc.orders", `{"id":1,"__op":"u","__db":"shop","__table":"orders","__file":"mysql-bin.000003","__pos":200}`},
		{"a MySQL row with its value schema on a renamed topic",
			`{"before":null,"after":{"id":1},"op":"c","source":{"connector":"mysql","name":"srv","db":"shop","table":"orders","file":"mysql-bin.000003","pos":100}}`,
			"mysql.cdc.orders", `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` +
				`{"type":"string","optional":true,"field":"__db"},{"type":"string","optional":true,"field":"__table"}],` +
				`"optional":false,"name":"srv.shop.orders.Value"},"payload":{"id":1,"__db":"shop","__table":"orders"}}`},
		{"a PostgreSQL row of schema app in database app",
			`{"before":null,"after":{"id":1},"op":"c","source":{"connector":"postgresql","name":"srv","db":"app","schema":"app","table":"orders","lsn":100}}`,
			"srv.app.orders", `{"id":1,"__op":"u","__db":"app","__table":"orders","__lsn":200}`},
		{"a PostgreSQL row of a table with a dot in its name",
			`{"before":null,"after":{"id":1},"op":"c","source":{"connector":"postgresql","name":"srv","db":"app","schema":"public","table":"v1.orders","lsn":100}}`,
			"srv.public.v1.orders", `{"id":1,"__op":"u","__db":"app","__table":"v1.orders"}`},
		{"a PostgreSQL row whose value schema's name the connector adjusted",
			`{"before":null,"after":{"id":1},"op":"c","source":{"connector":"postgresql","name":"srv","db":"app","schema":"public","table":"my-orders","lsn":100}}`,
			"srv.public.my-orders", `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},` +
				`{"type":"string","optional":true,"field":"__db"},{"type":"string","optional":true,"field":"__table"}],` +
				`"optional":false,"name":"srv.public.my_orders.Value"},"payload":{"id":1,"__db":"app","__table":"my-orders"}}`},
	} {
		d, err := NewDecoder(Options{Format: FormatDebezium})
		if err != nil {
			t.Fatal(err)
		}
		unflat, err := d.Decode(nil, "srv.x.orders", []byte(`{"id":1}`), []byte(c.envelope))
		if err != nil || len(unflat) != 1 {
			t.Fatalf("%s: the unflattened change: %s (err %v)", c.name, render(unflat), err)
		}
		got, err := d.Decode(nil, c.topic, []byte(`{"id":1}`), []byte(c.flat))
		if err != nil || len(got) != 1 || got[0].Table != unflat[0].Table {
			t.Errorf("%s: %s (err %v), want a change of %s.%s.%s (%s)", c.name, render(got), err,
				unflat[0].Table.Database, unflat[0].Table.Schema, unflat[0].Table.Name, unflat[0].Table.Log)
		}
		// Flattened first, on a decoder of its own.
		d, err = NewDecoder(Options{Format: FormatDebezium})
		if err != nil {
			t.Fatal(err)
		}
		got, err = d.Decode(nil, c.topic, []byte(`{"id":1}`), []byte(c.flat))
		want := unflat[0].Table
		if err != nil || len(got) != 1 || got[0].Table.Database != want.Database || got[0].Table.Schema != want.Schema || got[0].Table.Name != want.Name {
			t.Errorf("%s, flattened first: %s (err %v), want a change of %s.%s.%s", c.name, render(got), err, want.Database, want.Schema, want.Name)
		}
	}
}
