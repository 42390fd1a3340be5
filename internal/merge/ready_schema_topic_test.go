package merge

import (
	"fmt"
	"testing"
	"time"
)

// dbzOrdersAt is a Debezium MySQL insert of server dbserver1 (its
// source.name) into db.orders of row id at source time at.
func dbzOrdersAt(id int, at time.Time) string {
	return fmt.Sprintf(`{"op":"c","ts_ms":%[2]d,"before":null,"after":{"id":%[1]d,"v":"a"},`+
		`"source":{"connector":"mysql","name":"dbserver1","db":"db","table":"orders","file":"mysql-bin.000001","pos":%[3]d,"row":0,"ts_ms":%[2]d}}`,
		id, at.UnixMilli(), 100+id)
}

// A dead letter that decodes to no table holds back every table of its
// topic (README "Done marks"): it may be any of their changes. On a
// Debezium server's schema change topic (named as the server), which
// carries the DROP TABLE of every table of the server, it may be the drop
// of any of them; but it held back only the tables a drop had already
// come from that topic for, and orders, never dropped before, was marked
// done for h while the message that may be its drop waited in the
// dead-letter table.
func TestMarkReadyUndecodableDeadLetterOnTheSchemaTopicHoldsItsServersTables(t *testing.T) {
	l, h := hoursAgo(t)
	l.rawKey(0, "dbserver1.db.orders", `{"id":1}`, dbzOrdersAt(1, h.Add(10*time.Minute)))
	l.rawKey(0, "dbserver1.db.orders", `{"id":2}`, dbzOrdersAt(2, h.Add(time.Hour+5*time.Minute)))
	l.raw(1, "dbserver1", `{"databaseName":"db","statement":"DROP TABLE orders"}`) // no change event: dead-lettered
	l.flushDeadLettering()
	l.want(`SELECT topic FROM cdc_dlq`, "dbserver1")
	l.want(`SELECT source_server FROM cdc_routes`, "dbserver1")
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
}
