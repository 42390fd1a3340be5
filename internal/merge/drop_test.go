package merge

import (
	"fmt"
	"testing"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/pipeline"
)

// dbzDrop is a Debezium MySQL connector's schema change message for DROP
// TABLE db.<table> at binlog position pos (see cdc's debeziumDrop for
// where its shape comes from).
func dbzDrop(table string, pos int) string { return dbzDropOf("dbserver1", table, pos) }

// dbzDropOf is dbzDrop from Debezium server (source.name) server.
func dbzDropOf(server, table string, pos int) string {
	return fmt.Sprintf(`{"source":{"connector":"mysql","name":%[3]q,"ts_ms":1700000000000,"snapshot":"false","db":"db","table":%[1]q,`+
		`"file":"mysql-bin.000001","pos":%[2]d,"row":0},"ts_ms":1700000000001,"databaseName":"db","schemaName":null,`+
		`"ddl":"DROP TABLE `+"`db`.`%[1]s`"+`","tableChanges":[{"type":"DROP","id":"\"db\".\"%[1]s\"","table":null}]}`, table, pos, server)
}

// A DROP TABLE read by Debezium MySQL comes on the connector's schema
// change topic (named as the server), not on the table's: the model of
// the dropped table holds none of its rows after it, in source order —
// a row of the table created again after the drop stays, whichever topic
// and load brings it first — and no other table loses a row. The model
// kept the dropped table's rows for good.
func TestDebeziumDropTableEmptiesItsModel(t *testing.T) {
	l := newChangeLoader(t)
	l.topic = "dbserver1.db.orders"
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 110, row(2, "b"), "id")
	l.topic = "dbserver1.db.items"
	l.change(1, "items", "c", 120, row(1, "kept"), "id")
	l.flush()
	l.mustMerge()
	// The table created again, its first row loaded before the drop.
	l.topic = "dbserver1.db.orders"
	l.change(0, "orders", "c", 300, row(3, "again"), "id")
	l.flush()
	l.mustMerge()
	l.raw(2, "dbserver1", dbzDrop("orders", 200))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "3|again")
	l.want(`SELECT id, v FROM cdc_db_items ORDER BY id`, "1|kept")
	// A late change of the dropped table (below the drop) stays out.
	l.change(0, "orders", "u", 150, row(1, "late"), "id")
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "3|again")
}

// One run may read several Debezium servers, and a server's schema change
// topic carries the drops of its databases captured or not: a DROP TABLE
// from dbserver2 of a table named as one whose changes came from
// dbserver1 leaves that table's model alone — after a restart too. The
// registry of changelog tables records the server each was created for,
// and the next run's decoder takes its changes as that server's; a table
// known only from the registry had no server, and dbserver2's drop
// emptied its model. Its own server's drop still does.
func TestDebeziumDropOfAnotherServerAfterRestartKeepsTable(t *testing.T) {
	l := newChangeLoader(t)
	l.raw(0, "dbserver1.db.orders", `{"op":"c","ts_ms":1700000000000,"before":null,"after":{"id":1,"v":"a"},`+
		`"source":{"connector":"mysql","name":"dbserver1","db":"db","table":"orders","file":"mysql-bin.000001","pos":100,"row":0,"ts_ms":1700000000000}}`)
	l.pending[0][0].Key = []byte(`{"id":1}`)
	l.flush()
	l.mustMerge()
	restart := func() {
		dec, err := pipeline.NewChangelogDecoder(cdc.Options{Format: cdc.FormatDebezium}, l.s)
		if err != nil {
			t.Fatal(err)
		}
		l.dec = dec
	}
	restart()
	l.raw(1, "dbserver2", dbzDropOf("dbserver2", "orders", 200))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a")
	restart()
	l.raw(1, "dbserver1", dbzDropOf("dbserver1", "orders", 300))
	l.flush()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_db_orders`, "0")
}

// A Maxwell database-drop empties the models of the database's tables at
// its position, those of tables an earlier run saw too (the registry's),
// keeps the rows of a table created again after it, and leaves other
// databases' tables alone. The models kept every row of the dropped
// database.
func TestMaxwellDatabaseDropEmptiesItsTablesModels(t *testing.T) {
	l := newFormatLoader(t, cdc.FormatMaxwell)
	msg := func(db, table, pos, data string) string {
		return `{"database":"` + db + `","table":"` + table + `","type":"insert","ts":1589373561,"xid":7,"commit":true,"position":"mysql-bin.000003:` + pos +
			`","data":` + data + `,"primary_key_columns":["id"]}`
	}
	l.raw(0, "maxwell", msg("test", "orders", "1000", `{"id":1,"name":"a"}`))
	l.raw(0, "maxwell", msg("test", "items", "1100", `{"id":1,"name":"i"}`))
	l.raw(0, "maxwell", msg("other", "orders", "1150", `{"id":1,"name":"o"}`))
	l.flush()
	l.mustMerge()
	// A restart: the new run's decoder knows the tables from the registry.
	dec, err := pipeline.NewChangelogDecoder(cdc.Options{Format: cdc.FormatMaxwell}, l.s)
	if err != nil {
		t.Fatal(err)
	}
	l.dec = dec
	l.raw(0, "maxwell", `{"type":"database-drop","database":"test","ts":1589373562000,"sql":"DROP DATABASE test","position":"mysql-bin.000003:1200"}`)
	l.raw(0, "maxwell", `{"type":"database-create","database":"test","ts":1589373563000,"sql":"CREATE DATABASE test","position":"mysql-bin.000003:1250"}`)
	l.raw(0, "maxwell", msg("test", "orders", "1300", `{"id":2,"name":"b"}`))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, name FROM cdc_test_orders`, "2|b")
	l.want(`SELECT count(*) FROM cdc_test_items`, "0")
	l.want(`SELECT id, name FROM cdc_other_orders`, "1|o")
}

// A table whose changes came from two Debezium servers (one run reading
// both, same-named databases and tables into one changelog table) is
// dropped by the DROP TABLE of either: the changes of the dropping server
// are among its rows. Before a restart the decoder knew both servers and
// truncated; after one it seeded the table's servers with the one the
// registry recorded, the first, and the second server's drop left the
// model as it was, its rows that the source dropped in it.
// Both servers' changes in the first batch (the table created for both),
// and the second server's in a later load (the registry's row grown).
func TestDebeziumDropOfSecondServerAfterRestartEmptiesModel(t *testing.T) {
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprintf("later=%v", later), func(t *testing.T) { dropOfSecondServerAfterRestart(t, later) })
	}
}

func dropOfSecondServerAfterRestart(t *testing.T, later bool) {
	l := newChangeLoader(t)
	for i, server := range []string{"dbserver1", "dbserver2"} {
		l.raw(0, server+".db.orders", fmt.Sprintf(`{"op":"c","ts_ms":1700000000000,"before":null,"after":{"id":%[1]d,"v":"a"},`+
			`"source":{"connector":"mysql","name":%[2]q,"db":"db","table":"orders","file":"mysql-bin.000001","pos":%[3]d,"row":0,"ts_ms":1700000000000}}`, i+1, server, 100+i))
		l.pending[0][len(l.pending[0])-1].Key = []byte(fmt.Sprintf(`{"id":%d}`, i+1))
		if later {
			l.flush()
		}
	}
	l.flush()
	l.mustMerge()
	l.want(`SELECT coalesce(source_server, 'null') FROM cdc_routes`, "dbserver1,dbserver2")
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "1|a", "2|a")
	dec, err := pipeline.NewChangelogDecoder(cdc.Options{Format: cdc.FormatDebezium}, l.s)
	if err != nil {
		t.Fatal(err)
	}
	l.dec = dec
	l.raw(1, "dbserver2", dbzDropOf("dbserver2", "orders", 300))
	l.flush()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_db_orders`, "0")
}
