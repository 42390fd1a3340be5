package merge

import (
	"testing"
	"time"
)

// A renamed schema change topic (RegexRouter dbserver1(.*) ->
// prod.dbserver1$1) is known by its messages, a dead-lettered one too:
// its dead letter of no table, which may be the DROP TABLE of any of the
// server's tables, holds them all, as it does on the default-named topic
// (TestMarkReadyUndecodableDeadLetterOnTheSchemaTopicHoldsItsServersTables).
// Recorded only for messages that decode, the topic was no carrier of any
// table and, loaded, no longer "unread": orders was marked done for h
// while what may be its DROP TABLE waited in the dead-letter table.
func TestMarkReadyDeadLetterOnARenamedSchemaTopicHoldsItsServersTables(t *testing.T) {
	l, h := hoursAgo(t)
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":1}`, dbzOrdersAt(1, h.Add(10*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":2}`, dbzOrdersAt(2, h.Add(time.Hour+5*time.Minute)))
	// A schema change message the decoder refuses (a DROP whose id is not
	// "db"."table"): dead-lettered, its topic recorded all the same.
	l.raw(1, "prod.dbserver1", `{"source":{"connector":"mysql","name":"dbserver1","snapshot":"false"},"databaseName":"db",`+
		`"ddl":"DROP TABLE orders","tableChanges":[{"type":"DROP","id":"orders","table":null}]}`)
	l.flushDeadLettering()
	l.want(`SELECT topic FROM cdc_dlq`, "prod.dbserver1")
	l.want(`SELECT server || ' ' || topic FROM cdc_routes_schema_topics`, "dbserver1 prod.dbserver1")
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
}
