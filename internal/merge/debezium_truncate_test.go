package merge

import (
	"fmt"
	"testing"
)

// dbzTruncate is a Debezium MySQL connector's schema change message for
// the statement ddl, a TRUNCATE of a table of db, at binlog position
// pos: BinlogDatabaseSchema.parseDdl makes a TableTruncatedEvent a
// schema change of type TRUNCATE (of the table's database, its
// statement as ddl), which SchemaChangeEvent gives no tableChanges, and
// the streaming source dispatches it to the schema change topic whether
// or not it also sends an op "t" on the table's topic.
func dbzTruncate(ddl string, pos int) string {
	return fmt.Sprintf(`{"source":{"connector":"mysql","name":"dbserver1","ts_ms":1700000000000,"snapshot":"false","db":"db","table":"orders",`+
		`"file":"mysql-bin.000001","pos":%[2]d,"row":0},"ts_ms":1700000000001,"databaseName":"db","schemaName":null,`+
		`"ddl":%[1]q,"tableChanges":[]}`, ddl, pos)
}

// Debezium's MySQL connector skips truncate events by default
// (skipped.operations defaults to "t"): a TRUNCATE TABLE then comes only
// as its statement on the schema change topic. The model holds none of
// the rows changed before it, in source order, as after Canal's
// TRUNCATE or a PostgreSQL op "t"; a row inserted after it stays, and
// no other table loses a row. Found by a hunt: the statement changed
// nothing, and the model kept every row the source had truncated.
func TestDebeziumMySQLTruncateOnTheSchemaTopicEmptiesItsModel(t *testing.T) {
	l := newChangeLoader(t)
	l.topic = "dbserver1.db.orders"
	l.change(0, "orders", "c", 100, row(1, "a"), "id")
	l.change(0, "orders", "c", 110, row(2, "b"), "id")
	l.change(0, "orders", "c", 300, row(3, "after"), "id")
	l.topic = "dbserver1.db.items"
	l.change(1, "items", "c", 120, row(1, "kept"), "id")
	l.flush()
	l.mustMerge()
	l.raw(2, "dbserver1", dbzTruncate("TRUNCATE TABLE orders", 200))
	l.flush()
	l.mustMerge()
	l.want(`SELECT id, v FROM cdc_db_orders ORDER BY id`, "3|after")
	l.want(`SELECT id, v FROM cdc_db_items ORDER BY id`, "1|kept")
	// Qualified, in backquotes, without the optional TABLE.
	l.topic = "dbserver1.db.orders"
	l.change(0, "orders", "c", 400, row(4, "d"), "id")
	l.flush()
	l.mustMerge()
	l.raw(2, "dbserver1", dbzTruncate("truncate `db`.`orders`", 500))
	l.flush()
	l.mustMerge()
	l.want(`SELECT count(*) FROM cdc_db_orders`, "0")
	l.want(`SELECT id, v FROM cdc_db_items ORDER BY id`, "1|kept")
}
