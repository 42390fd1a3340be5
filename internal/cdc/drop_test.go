package cdc

import (
	"strings"
	"testing"
)

// debeziumDrop is the message a Debezium MySQL connector writes to its
// schema change topic (named as the server, topic.prefix) for DROP TABLE
// inventory.customers: the shape of shared-mariadb-mysql.adoc, "Message
// emitted to the connector schema change topic", with what a drop puts
// in it: EventDispatcher.SchemaChangeEventReceiver.schemaChangeRecordValue
// (source, ts_ms, databaseName, schemaName, ddl, tableChanges);
// BinlogDatabaseSchema.parseDdl and DropTableParserListener make one
// event per table dropped, its statement "DROP TABLE `db`.`table`";
// SchemaChangeEvent's DROP adds TableChanges.drop(id), which
// ConnectTableChangeSerializer writes as {type: "DROP", id:
// TableId.toDoubleQuotedString()} with no table. snapshot is "false" when
// the connector reads its binlog.
func debeziumDrop(snapshot string) string {
	return `{"schema":{},"payload":{"source":{"version":"2.7.0.Final","connector":"mysql","name":"dbserver1","ts_ms":1651535750000,` +
		`"snapshot":"` + snapshot + `","db":"inventory","table":"customers","server_id":223344,"file":"mysql-bin.000003","pos":1570,"row":0},` +
		`"ts_ms":1651535750218,"databaseName":"inventory","schemaName":null,"ddl":"DROP TABLE ` + "`inventory`.`customers`" + `",` +
		`"tableChanges":[{"type":"DROP","id":"\"inventory\".\"customers\"","table":null}]}}`
}

// A DROP TABLE that Debezium MySQL reads from the binlog comes on the
// schema change topic alone: it is a truncation of the table at its
// position, as Canal's ERASE and Maxwell's table-drop are. It made no
// change, and the dropped table's rows stayed in its model for good.
func TestDebeziumDropTableIsATruncation(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Decode(nil, "dbserver1", []byte(`{"databaseName":"inventory"}`), []byte(debeziumDrop("false")))
	if err != nil {
		t.Fatal(err)
	}
	want := "truncate inventory.customers log=cdc_inventory_customers_log model=cdc_inventory_customers key= pos=3.1570 time=1651535750000000\n"
	if r := render(got); r != want {
		t.Errorf("got\n%s\nwant\n%s", r, want)
	}
	// Without the schema wrapper, and with a table whose name holds a
	// quote (doubled by TableId.quote).
	v := strings.NewReplacer(`{"schema":{},"payload":`, "", `\"customers\"`, `\"cust\"\"omers\"`).Replace(debeziumDrop("false"))
	v = v[:len(v)-1]
	if got, err = d.Decode(got[:0], "dbserver1", nil, []byte(v)); err != nil || len(got) != 1 || got[0].Op != Truncate || got[0].Table.Name != `cust"omers` {
		t.Errorf("without schemas: %s, err %v; want a truncation of inventory.cust\"omers", render(got), err)
	}
}

// A snapshot writes DROP TABLE IF EXISTS for each table before its schema
// (BinlogSnapshotChangeEventSource.readTableStructure), also in
// snapshot.mode no_data, which reads no row again (BinlogSchemaHistoryIT:
// "CREATE/DROP for each table"): no drop of the source, and no change,
// or a restarted connector's snapshot would empty every model.
func TestDebeziumSnapshotDropTableIsNoDrop(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for _, snapshot := range []string{"true", "first", "last"} {
		got, err := d.Decode(nil, "dbserver1", nil, []byte(debeziumDrop(snapshot)))
		if err != nil || len(got) != 0 {
			t.Errorf("snapshot %s: %s, err %v; want no change", snapshot, render(got), err)
		}
	}
}
