package cdc

import (
	"strings"
	"testing"
)

// Messages of a Debezium connector's other topics hold no row: its schema
// change topic (named as the server: a `topics: [dbserver1]` or a pattern
// such as ^dbserver1 reads it) and its transaction metadata topic. They
// decode to no change, where they were dead-lettered as "op is missing".
// Shapes from Debezium's documentation (shared-mariadb-mysql.adoc: "Message
// emitted to the connector schema change topic", "Transaction metadata").
func TestDebeziumSchemaChangeAndTransactionMessagesHoldNoRow(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"schema change": `{"schema":{},"payload":{"source":{"version":"2.7.0.Final","connector":"mysql","name":"dbserver1","ts_ms":1651535750218,"snapshot":"false","db":"inventory","table":"customers","server_id":223344,"file":"mysql-bin.000003","pos":570,"row":0},` +
			`"databaseName":"inventory","schemaName":null,"ddl":"ALTER TABLE customers ADD middle_name varchar(255) AFTER first_name",` +
			`"tableChanges":[{"type":"ALTER","id":"\"inventory\".\"customers\"","table":{"primaryKeyColumnNames":["id"],"columns":[{"name":"id","jdbcType":4,"typeName":"INT","position":1,"optional":false}]}}]}}`,
		"schema change, no schema": `{"source":{"db":"inventory","file":"mysql-bin.000003","pos":570},"databaseName":"inventory","ddl":"CREATE DATABASE inventory","tableChanges":[]}`,
		"transaction begin":        `{"status":"BEGIN","id":"0e4d5dcd-a33b-11ea-80f1-02010a22a99e:10","ts_ms":1486500577125,"event_count":null,"data_collections":null}`,
		"transaction end": `{"status":"END","id":"0e4d5dcd-a33b-11ea-80f1-02010a22a99e:10","ts_ms":1486500577691,"event_count":2,` +
			`"data_collections":[{"data_collection":"s1.a","event_count":1},{"data_collection":"s1.b","event_count":1}]}`,
	} {
		got, err := d.Decode(nil, "dbserver1", nil, []byte(value))
		if err != nil || len(got) != 0 {
			t.Errorf("%s: %d changes, err %v; want none and no error", name, len(got), err)
		}
	}
	// Without those members a message without op is still not a change.
	if _, err := d.Decode(nil, "dbserver1", nil, []byte(`{"status":"DONE","after":{"id":1}}`)); err == nil {
		t.Error("a message with no op and an unknown status was taken")
	}
	// A row of a table with a status column, flattened by
	// ExtractNewRecordState (not read: no op), was skipped as transaction
	// metadata when its status was BEGIN or END, and the rest
	// dead-lettered: a row lost with no trace. Transaction metadata has
	// those five members and no other.
	for _, row := range []string{`{"id":7,"status":"BEGIN","customer":"a"}`, `{"status":"END","order_id":"9"}`} {
		if _, err := d.Decode(nil, "dbserver1.inventory.orders", nil, []byte(row)); err == nil {
			t.Errorf("a flattened row %s was skipped as transaction metadata, not dead-lettered", row)
		}
	}
}

// A Debezium heartbeat message goes to <topic.heartbeat.prefix>.<topic.prefix>,
// whatever prefix the connector sets: it is recognised by its shape, the
// value schema io.debezium.connector.common.Heartbeat (SchemaFactory.
// heartbeatValueSchema) or, without schemas, a value of ts_ms alone, and
// makes no change and no dead letter.
func TestDebeziumHeartbeatOfAnyTopicHoldsNoRow(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatDebezium})
	if err != nil {
		t.Fatal(err)
	}
	key := `{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"serverName"}],"optional":false,"name":"io.debezium.connector.common.ServerNameKey","version":1},"payload":{"serverName":"dbserver1"}}`
	for name, value := range map[string]string{
		"schemas on":  `{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.Heartbeat","version":1},"payload":{"ts_ms":1714000000000}}`,
		"schemas off": `{"ts_ms":1714000000000}`,
	} {
		for _, topic := range []string{"__debezium-heartbeat.dbserver1", "hb.dbserver1", "ops-heartbeats"} {
			got, err := d.Decode(nil, topic, []byte(key), []byte(value))
			if err != nil || len(got) != 0 {
				t.Errorf("%s on %s: %d changes, err %v; want none and no error", name, topic, len(got), err)
			}
		}
	}
	// A message of ts_ms and more, without op, is no heartbeat.
	if _, err := d.Decode(nil, "hb.dbserver1", nil, []byte(`{"ts_ms":1714000000000,"after":{"id":1}}`)); err == nil {
		t.Error("a message with ts_ms, an after image and no op was taken")
	}
}

// Canal sends a DML statement's text as a message of its own, type QUERY
// and isDdl false, beside the row messages of that statement: for MySQL's
// rows-query events (binlog_rows_query_log_events) and MariaDB's annotate
// rows events (binlog_annotate_row_events, on by default since 10.2.4,
// and asked for by Canal's dump command), unless the instance sets
// canal.instance.filter.query.dml (default false). Its header names no
// table (LogEventConvert.parseAnnotateRowsEvent and parseRowsQueryEvent
// → buildQueryEntry; MQMessageUtils.messageConverter makes the flat
// message). An XA COMMIT comes as type XACOMMIT with no row
// (parseQueryEvent): the rows came with its XA PREPARE. Neither holds a
// row. Dead-lettered, each was a dead letter of no table, which holds
// back the done marks of every table of its topic until it is deleted: on
// MariaDB, after the first statement, no hour was ever marked.
func TestCanalStatementTextMakesNoChange(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	for name, value := range map[string]string{
		"annotate rows": `{"data":null,"database":"","es":1700000000000,"gtid":"","id":3,"isDdl":false,"mysqlType":null,"old":null,"pkNames":null,` +
			`"sql":"INSERT INTO orders VALUES (1, 'a')","sqlType":null,"table":"","ts":1700000000100,"type":"QUERY"}`,
		"rows query, table parsed": `{"data":null,"database":"","es":1700000000000,"id":3,"isDdl":false,"mysqlType":null,"old":null,"pkNames":null,` +
			`"sql":"update orders set qty = 2 where id = 1","sqlType":null,"table":"orders","ts":1700000000100,"type":"QUERY"}`,
		"xa commit": `{"data":null,"database":"","es":1700000000000,"id":4,"isDdl":false,"mysqlType":null,"old":null,"pkNames":null,` +
			`"sql":"XA COMMIT X'31',X'',1","sqlType":null,"table":"","ts":1700000000100,"type":"XACOMMIT"}`,
	} {
		got, err := d.Decode(nil, "canal", nil, []byte(value))
		if err != nil || len(got) != 0 {
			t.Errorf("%s: %d changes, err %v; want none and no error", name, len(got), err)
		}
	}
	// A statement-based DML (binlog_format STATEMENT or MIXED: a query
	// event Canal types INSERT, UPDATE or DELETE, isDdl false, without
	// rows) is a change that cannot be applied: still a dead letter.
	if _, err := d.Decode(nil, "canal", nil, []byte(`{"data":null,"database":"shop","es":1700000000000,"id":5,"isDdl":false,`+
		`"sql":"UPDATE orders SET qty = qty + 1","table":"orders","type":"UPDATE"}`)); err == nil {
		t.Error("a statement-based UPDATE without rows was taken")
	}
}

// An XA ROLLBACK after its XA PREPARE (whose rows Canal sent, and the
// models took) comes as type XAROLLBACK: a dead letter, as the models hold
// rows the source rolled back, with a reason that says so and what to do
// (it was "type not one of INSERT, UPDATE, DELETE or a DDL type").
func TestCanalXARollbackSaysWhatItMeans(t *testing.T) {
	d, err := NewDecoder(Options{Format: FormatCanal})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Decode(nil, "canal", nil, []byte(`{"data":null,"database":"","es":1700000000000,"id":4,"isDdl":false,"mysqlType":null,"old":null,"pkNames":null,`+
		`"sql":"XA ROLLBACK X'31',X'',1","sqlType":null,"table":"","ts":1700000000100,"type":"XAROLLBACK"}`))
	if err == nil || !strings.Contains(err.Error(), "rolled back") || !strings.Contains(err.Error(), "reconcile") {
		t.Errorf("XAROLLBACK: %v; want a dead letter saying the prepared rows were rolled back at the source, and to reconcile", err)
	}
}
