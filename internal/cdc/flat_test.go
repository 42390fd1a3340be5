package cdc

import (
	"strings"
	"testing"
)

// Debezium's ExtractNewRecordState SMT (event flattening: "unwrap") sends a
// change as its row alone: the after image (the before image for a delete
// with delete.tombstone.handling.mode rewrite), with the envelope and source
// fields add.fields names added as __<field> (op, ts_ms: the envelope's;
// table, lsn, file, pos…: source's; source.ts_ms as __source_ts_ms) and
// __deleted, "true" or "false", in rewrite mode; its schema is the row's,
// named <server>.<database>.<table>.Value (debezium-connect-plugins'
// AbstractExtractNewRecordState.FieldReference and DefaultDeleteHandlingStrategy;
// the documentation's "New Record State Extraction" page, whose example
// this follows). Such a record has no op: it was dead-lettered as "op is
// missing", a row of a table with a ddl column was taken for DDL (a
// TRUNCATE in it truncated the table it named) and a row of columns id and
// status, BEGIN or END, for transaction metadata, and skipped.
func TestDebeziumFlattenedRowsAreChanges(t *testing.T) {
	const topic = "dbserver1.public.customers"
	const key = `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"dbserver1.public.customers.Key"},"payload":{"id":1}}`
	flat := func(row string) string {
		return `{"schema":{"type":"struct","fields":[` +
			`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"email"},` +
			`{"type":"string","optional":true,"field":"__op"},{"type":"string","optional":true,"field":"__table"},` +
			`{"type":"int64","optional":true,"field":"__lsn"},{"type":"int64","optional":true,"field":"__source_ts_ms"},` +
			`{"type":"string","optional":true,"field":"__deleted"}],` +
			`"optional":false,"name":"dbserver1.public.customers.Value"},"payload":` + row + `}`
	}
	const head = " public.customers log=cdc_public_customers_log model=cdc_public_customers key=id pos=24023128 time=1559033904863000\n"
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, row, want string }{
		{"an insert", `{"id":1,"email":"annek@noanswer.org","__op":"c","__table":"customers","__lsn":24023128,"__source_ts_ms":1559033904863,"__deleted":"false"}`,
			"insert" + head + "  id Int32 int32 = 1\n  email String string = \"annek@noanswer.org\"\n"},
		{"a delete rewritten", `{"id":1,"email":"annek@noanswer.org","__op":"d","__table":"customers","__lsn":24023128,"__source_ts_ms":1559033904863,"__deleted":"true"}`,
			"delete" + head + "  id Int32 int32 = 1\n  email String string = \"annek@noanswer.org\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := d.Decode(nil, topic, []byte(key), []byte(flat(tc.row)))
			if r := render(got); err != nil || r != tc.want {
				t.Errorf("got\n%s (err %v)\nwant\n%s", r, err, tc.want)
			}
		})
	}
	// delete.tombstone.handling.mode tombstone (the default): the delete is
	// the row's schema and a null payload, a delete of the key.
	got, err := d.Decode(nil, topic, []byte(key), []byte(flat("null")))
	if err != nil || len(got) != 1 || got[0].Op != Delete {
		t.Errorf("the flattened delete's tombstone: %s (err %v), want a delete of id 1", render(got), err)
	}

	// Without schemas, add.fields=op,file,pos (a MySQL connector): the
	// position is the binlog's.
	const mysql = "update inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key=id pos=3.154 time=0\n" +
		"  id Int64 - = 1004\n  first_name String - = \"Anne\"\n"
	got, err = d.Decode(nil, "mysql-server-1.inventory.customers", []byte(`{"id":1004}`),
		[]byte(`{"id":1004,"first_name":"Anne","__op":"u","__file":"mysql-bin.000003","__pos":154,"__deleted":"false"}`))
	if r := render(got); err != nil || r != mysql {
		t.Errorf("got\n%s (err %v)\nwant\n%s", r, err, mysql)
	}
}

// A flattened row with the SMT's defaults (no field added) is known by its
// schema's name, <server>.<database>.<table>.Value: whatever its columns
// are called, it is a row of its table, neither DDL nor transaction
// metadata. Without schemas nothing tells it from another record without
// op: it is dead-lettered, with a reason that names the SMT.
func TestDebeziumFlattenedRowOfAnyColumnsIsARow(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	value := func(table, cols, row string) string {
		return `{"schema":{"type":"struct","fields":[` + cols + `],"optional":false,"name":"srv.shop.` + table + `.Value"},"payload":` + row + `}`
	}
	const audit = "update shop.audit log=cdc_shop_audit_log model=cdc_shop_audit key=id pos= time=0\n" +
		"  id Int32 int32 = 5\n  ddl String string = \"TRUNCATE TABLE shop.orders\"\n"
	got, err := d.Decode(nil, "srv.shop.audit", []byte(`{"id":5}`), []byte(value("audit",
		`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"ddl"}`,
		`{"id":5,"ddl":"TRUNCATE TABLE shop.orders"}`)))
	if r := render(got); err != nil || r != audit {
		t.Errorf("a row with a ddl column: got\n%s (err %v)\nwant\n%s", r, err, audit)
	}
	const jobs = "update shop.jobs log=cdc_shop_jobs_log model=cdc_shop_jobs key=id pos= time=0\n" +
		"  id Int32 int32 = 7\n  status String string = \"END\"\n"
	got, err = d.Decode(nil, "srv.shop.jobs", []byte(`{"id":7}`), []byte(value("jobs",
		`{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"status"}`,
		`{"id":7,"status":"END"}`)))
	if r := render(got); err != nil || r != jobs {
		t.Errorf("a row of columns id and status: got\n%s (err %v)\nwant\n%s", r, err, jobs)
	}
	_, err = d.Decode(nil, "srv.shop.jobs", []byte(`{"id":7}`), []byte(`{"id":7,"status":"running"}`))
	if err == nil || !strings.Contains(err.Error(), "ExtractNewRecordState") {
		t.Errorf("a flattened row without schemas or added fields: %v, want a reason naming ExtractNewRecordState", err)
	}
}
