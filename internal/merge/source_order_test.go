package merge

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
)

// Maxwell writes xoffset on every row of a transaction but its last:
// RowMap.toJSON (zendesk/maxwell, src/main/java/com/zendesk/maxwell/row/RowMap.java)
// writes "xoffset" only `if (outputConfig.includesXOffset && this.xoffset != null && !this.txCommit)`
// and "commit": true on the last row instead; every row of one binlog rows
// event has that event's next position (BinlogConnectorEvent.jsonMaps). So
// in UPDATE orders SET id = id - 1 WHERE id IN (2, 3, 4) ORDER BY id (one
// rows event, autocommit), the rows are 2→1 (xoffset 0), 3→2 (xoffset 1)
// and 4→3 (the commit: no xoffset). Key 3 is given up by the second row
// (its old key's delete, at xoffset 1) and taken by the third, later in the
// log and in Kafka. The model must hold id 3.
func TestSourceOrderMaxwellCommitRowSortsLastInItsTransaction(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	msg := func(typ, pos, extra, data, old string) string {
		m := `{"database":"test","table":"orders","type":"` + typ + `","ts":1589373561,"xid":7` + extra +
			`,"position":"` + pos + `","data":` + data + `,"primary_key_columns":["id"]`
		if old != "" {
			m += `,"old":` + old
		}
		return m + `}`
	}
	l.raw(0, "maxwell", msg("insert", "mysql-bin.000003:1000", `,"commit":true`, `{"id":2,"name":"a2"}`, ""))
	l.raw(0, "maxwell", msg("insert", "mysql-bin.000003:1100", `,"commit":true`, `{"id":3,"name":"a3"}`, ""))
	l.raw(0, "maxwell", msg("insert", "mysql-bin.000003:1200", `,"commit":true`, `{"id":4,"name":"a4"}`, ""))
	// One transaction, one rows event: every row at the event's next position.
	l.raw(0, "maxwell", msg("update", "mysql-bin.000003:1500", `,"xoffset":0`, `{"id":1,"name":"a2"}`, `{"id":2}`))
	l.raw(0, "maxwell", msg("update", "mysql-bin.000003:1500", `,"xoffset":1`, `{"id":2,"name":"a3"}`, `{"id":3}`))
	l.raw(0, "maxwell", msg("update", "mysql-bin.000003:1500", `,"commit":true`, `{"id":3,"name":"a4"}`, `{"id":4}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`, "1|a2", "2|a3", "3|a4")
}

// Canal puts every entry of one batch (getWithoutAck) in flat messages
// with the batch's id, and es is the binlog event's header timestamp,
// which MySQL writes in whole seconds (so es is a multiple of 1000). Two
// statements in one second, one batch: UPDATE orders SET name = 'x' WHERE
// id IN (1, 2, 3) (one message: id 3 is its row 2), then UPDATE orders SET
// name = 'y' WHERE id = 3 (the next message, on the same partition: id 3
// is its row 0). The row's index orders the rows of one message only; the
// second statement is later in the log and in Kafka, and the model must
// hold 'y' (README: "then Kafka order for changes at one position (a Canal
// message's rows)").
func TestSourceOrderCanalMessagesOfOneBatchGoByKafkaOrder(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalMsg("INSERT", 1589373560000, 1, `[{"id":"1","name":"a"},{"id":"2","name":"b"},{"id":"3","name":"c"}]`, ""))
	l.raw(0, "example", canalMsg("UPDATE", 1589373561000, 2, `[{"id":"1","name":"x"},{"id":"2","name":"x"},{"id":"3","name":"x"}]`,
		`[{"name":"a"},{"name":"b"},{"name":"c"}]`))
	l.raw(0, "example", canalMsg("UPDATE", 1589373561000, 2, `[{"id":"3","name":"y"}]`, `[{"name":"x"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`, "1|x", "2|x", "3|y")
}

// The same ordering in a truncation: INSERT INTO orders VALUES (1), (2),
// (3) then TRUNCATE orders in one second, one Canal batch (same es and
// id), on one partition. Every row came before the truncation, and the
// model must be empty; rows 1 and 2 of the insert's message sort after
// the TRUNCATE's (es, id, 0) and stay.
func TestSourceOrderCanalTruncateRemovesRowsOfAnEarlierMessageOfItsBatch(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalMsg("INSERT", 1589373560000, 4, `[{"id":"1","name":"a"},{"id":"2","name":"b"},{"id":"3","name":"c"}]`, ""))
	l.raw(0, "example", `{"data":null,"database":"test","es":1589373560000,"id":4,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,"sql":"TRUNCATE TABLE orders","sqlType":null,"table":"orders","ts":1589373560321,"type":"TRUNCATE"}`)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`)
}

// Without output_primary_key_columns (Maxwell's default), the key columns
// come from the Kafka key Maxwell writes, whose names it lower-cases:
// RowMap.pkToJsonHash writes `"pk." + pk.toLowerCase()` (zendesk/maxwell,
// src/main/java/com/zendesk/maxwell/row/RowMap.java), while data keeps
// the column's own name. A MySQL table whose key column is OrderID must
// still be merged into its model.
func TestMaxwellKafkaKeyNamesMatchTheRowsColumnsIgnoringCase(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	add := func(key, value string) {
		l.pending[0] = append(l.pending[0], &kgo.Record{Topic: "maxwell", Partition: 0, Offset: l.next[0], Key: []byte(key), Value: []byte(value)})
		l.next[0]++
	}
	add(`{"database":"test","table":"orders","pk.orderid":1}`,
		`{"database":"test","table":"orders","type":"insert","ts":1589373560,"xid":1,"commit":true,"data":{"OrderID":1,"name":"a"}}`)
	add(`{"database":"test","table":"orders","pk.orderid":1}`,
		`{"database":"test","table":"orders","type":"update","ts":1589373561,"xid":2,"commit":true,"data":{"OrderID":1,"name":"b"},"old":{"name":"a"}}`)
	l.flush()
	l.mustMerge()
	l.want(`SELECT "OrderID", name FROM cdc_test_orders`, "1|b")
}

// With binlog_transaction_compression=ON (MySQL 8.0.20+), a transaction's
// events come inside one TRANSACTION_PAYLOAD event, and the events in it
// carry nextPosition 0 (mysql-binlog-connector-java's
// TransactionPayloadEventDataDeserializerTest shows them so). Debezium
// moves source.pos only for an event whose position is above 0
// (BinlogStreamingChangeEventSource.handleEvent:
// `if (trackableEventHeader.getPosition() > 0) offsetContext.setEventPosition(...)`),
// so every row of the transaction has the payload event's pos, and
// source.row restarts at 0 with each rows event (handleChange). In
// BEGIN; UPDATE orders SET v = 'x' WHERE id IN (1, 2, 3); UPDATE orders
// SET v = 'y' WHERE id = 3; COMMIT the second statement's row of id 3 is
// (pos P, row 0), after the first's (P, row 2) in the log and in Kafka:
// the model must hold 'y'.
func TestSourceOrderDebeziumCompressedTransactionGoesByKafkaOrder(t *testing.T) {
	l := newChangeLoader(t)
	for id := 1; id <= 3; id++ {
		l.change(0, "orders", "c", 100+id, row(id, "a"), "id")
	}
	add := func(id, rowInEvent int, v string) {
		value := fmt.Sprintf(`{"before":null,"after":{"id":%d,"v":%q},"source":{"connector":"mysql","db":"db","table":"orders","server_id":1,"file":"mysql-bin.000001","pos":500,"row":%d,"ts_ms":1700000001000},"op":"u","ts_ms":1700000001000}`,
			id, v, rowInEvent)
		l.pending[0] = append(l.pending[0], &kgo.Record{Topic: "dbserver1", Partition: 0, Offset: l.next[0], Key: []byte(fmt.Sprintf(`{"id":%d}`, id)), Value: []byte(value)})
		l.next[0]++
	}
	add(1, 0, "x")
	add(2, 1, "x")
	add(3, 2, "x")
	add(3, 0, "y") // the second UPDATE's rows event, same payload
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders`, "1|x", "2|x", "3|y")
}

// A source table dropped (DROP TABLE: Canal's ERASE) and created again
// with another schema holds none of its old rows: the model must hold the
// new table's rows alone, as the source does (reconcile --source EQUAL),
// not the rows of the dropped table beside them.
func TestCanalDropTableEmptiesItsModel(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	l.raw(0, "example", canalMsg("INSERT", 1589373560000, 1, `[{"id":"1","name":"a"},{"id":"2","name":"b"}]`, ""))
	l.flush()
	l.mustMerge()
	l.raw(0, "example", `{"data":null,"database":"test","es":1589373561000,"id":2,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,"sql":"DROP TABLE orders","sqlType":null,"table":"orders","ts":1589373561321,"type":"ERASE"}`)
	l.raw(0, "example", `{"data":null,"database":"test","es":1589373562000,"id":3,"isDdl":true,"mysqlType":null,"old":null,"pkNames":null,"sql":"CREATE TABLE orders (id bigint primary key, qty int)","sqlType":null,"table":"orders","ts":1589373562321,"type":"CREATE"}`)
	l.raw(0, "example", `{"data":[{"id":"3","qty":"7"}],"database":"test","es":1589373563000,"id":4,"isDdl":false,"mysqlType":{"id":"bigint(20)","qty":"int(11)"},"old":null,"pkNames":["id"],"sql":"","sqlType":{"id":-5,"qty":4},"table":"orders","ts":1589373563000,"type":"INSERT"}`)
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name, qty FROM cdc_test_orders`, "3|<nil>|7")
}

// canalMsgAt is canalMsg with Canal's ts: the wall time (ms) at which
// Canal made the flat message (MQMessageUtils.messageConverter:
// flatMessage.setTs(System.currentTimeMillis())).
func canalMsgAt(typ string, es, ts, batch int, data, old string) string {
	m := canalMsg(typ, es, batch, data, old)
	return strings.Replace(m, `"ts":`+strconv.Itoa(es)+`,`, `"ts":`+strconv.Itoa(ts)+`,`, 1)
}

// Canal's batch id (the flat message's id) comes from its meta manager's
// counter, which lives in memory and starts at 1 with every start of the
// instance (MemoryMetaManager.MemoryClientIdentityBatch: atomicMaxBatchId
// = new AtomicLong(1); FileMixedMetaManager, file-instance.xml's default,
// extends it and stores only the cursor; CanalServerWithEmbedded.getWithoutAck
// takes the Message's id from metaManager.addBatch). Canal restarts after
// sending batch 57, whose UPDATE set id 1 to 'b' (es second S), before its
// cursor was flushed: it sends that UPDATE again as batch 1, then the
// next statement, UPDATE id 1 to 'c' in the same second S, as batch 2.
// Everything is on one partition, in log order. The model must hold 'c';
// ordered by (es, batch id), the resent and the new change sort below the
// first 'b' and the model kept 'b' for good. Found by a review.
func TestSourceOrderCanalChangeAfterACanalRestartInTheSameSecondWins(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	const s = 1589373561000
	l.raw(0, "example", canalMsgAt("INSERT", 1589373560000, 1589373560100, 56, `[{"id":"1","name":"a"}]`, ""))
	l.raw(0, "example", canalMsgAt("UPDATE", s, s+100, 57, `[{"id":"1","name":"b"}]`, `[{"name":"a"}]`))
	// Canal restarted: batch ids from 1 again.
	l.raw(0, "example", canalMsgAt("UPDATE", s, s+9000, 1, `[{"id":"1","name":"b"}]`, `[{"name":"a"}]`))
	l.raw(0, "example", canalMsgAt("UPDATE", s, s+9001, 2, `[{"id":"1","name":"c"}]`, `[{"name":"b"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`, "1|c")
}

// The same across merges: the model holds 'b' from before the restart when
// the change after it comes.
func TestSourceOrderCanalChangeAfterACanalRestartWinsOverTheMergedRow(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatCanal)
	const s = 1589373561000
	l.raw(0, "example", canalMsgAt("INSERT", s, s+100, 57, `[{"id":"1","name":"b"}]`, ""))
	l.flush()
	l.mustMerge()
	l.raw(0, "example", canalMsgAt("UPDATE", s, s+9001, 1, `[{"id":"1","name":"c"}]`, `[{"name":"b"}]`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`, "1|c")
}

// Rows merged before Canal's position became (es, ts, id) hold (es, id),
// or before 2026-12-05 (es, id, row), as text. A change loaded after the
// upgrade comes after them in Kafka and, in the same second, must still
// win over them whatever its batch id; a change of an earlier second (a
// resend) must not.
func TestSourceOrderCanalChangeAfterThePositionUpgradeWinsOverStoredPositions(t *testing.T) {
	const s = 1589373561000
	for name, old := range map[string]string{
		"es.id":     fmt.Sprintf("%020d.%020d", s, 57),
		"es.id.row": fmt.Sprintf("%020d.%020d.%020d", s, 57, 0),
	} {
		t.Run(name, func(t *testing.T) {
			l := newFormatLoader(t, cdc.FormatCanal)
			l.raw(0, "example", canalMsgAt("INSERT", s, s+100, 57, `[{"id":"1","name":"b"},{"id":"2","name":"b"}]`, ""))
			l.flush()
			l.mustMerge()
			// As a release before the upgrade stored them.
			for _, table := range []string{"cdc_test_orders", "cdc_test_orders_log"} {
				if _, err := l.s.DB().Exec(`UPDATE ` + table + ` SET cdc_position = '` + old + `'`); err != nil {
					t.Fatal(err)
				}
			}
			l.raw(0, "example", canalMsgAt("UPDATE", s, s+9001, 1, `[{"id":"1","name":"c"}]`, `[{"name":"b"}]`))
			l.raw(0, "example", canalMsgAt("UPDATE", s-1000, s+9002, 2, `[{"id":"2","name":"a"}]`, `[{"name":"b"}]`))
			l.flush()
			l.mustMerge()
			l.want(`SELECT id, name FROM cdc_test_orders ORDER BY id`, "1|c", "2|b")
		})
	}
}

// Maxwell with output_ddl sends a DROP TABLE as a table-drop message
// (ResolvedTableDrop, named "table-drop" by ResolvedSchemaChange's
// JsonSubTypes; DDLMap.toJSON writes its database, table, ts, sql and,
// with output_binlog_position, position). As with Canal's ERASE, the
// table created again under the name holds none of the dropped table's
// rows, and neither must the model.
func TestMaxwellDropTableEmptiesItsModel(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	msg := func(typ, pos, data string) string {
		return `{"database":"test","table":"orders","type":"` + typ + `","ts":1589373561,"xid":7,"commit":true,"position":"mysql-bin.000003:` + pos +
			`","data":` + data + `,"primary_key_columns":["id"]}`
	}
	l.raw(0, "maxwell", msg("insert", "1000", `{"id":1,"name":"a"}`))
	l.raw(0, "maxwell", msg("insert", "1100", `{"id":2,"name":"b"}`))
	l.flush()
	l.mustMerge()
	l.raw(0, "maxwell", `{"type":"table-drop","database":"test","table":"orders","ts":1589373562000,"sql":"DROP TABLE orders","position":"mysql-bin.000003:1200"}`)
	l.raw(0, "maxwell", `{"type":"table-create","database":"test","table":"orders","def":{"database":"test","charset":"utf8mb4","table":"orders","columns":[{"type":"bigint","name":"id","signed":true},{"type":"int","name":"qty","signed":true}],"primary-key":["id"]},"ts":1589373563000,"sql":"CREATE TABLE orders (id bigint primary key, qty int)","position":"mysql-bin.000003:1300"}`)
	l.raw(0, "maxwell", msg("insert", "1400", `{"id":3,"qty":7}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name, qty FROM cdc_test_orders`, "3|<nil>|7")
}
