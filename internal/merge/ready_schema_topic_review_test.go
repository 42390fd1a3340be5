package merge

import (
	"testing"
	"time"
)

// FAILING (1a301bd). A renamed schema change topic (RegexRouter
// dbserver1(.*) -> prod.dbserver1$1) becomes known only when one of its
// messages DECODES (pipeline AppendRows -> SchemaChangeServer), but a
// message of it that is dead-lettered records no (server, topic) pair.
// Its dead letter of no table then holds nothing: the topic is no
// carrier of any table, and, loaded (it has a ledger row), it is no
// longer "unread" either. The same dead letter on the default-named
// topic holds the server's tables (TestMarkReadyUndecodableDeadLetter-
// OnTheSchemaTopicHoldsItsServersTables), so the renamed connector still
// gets orders marked done for h while what may be its DROP TABLE waits
// in the dead-letter table — the case 1a301bd set out to close.
func TestReviewMarkReadyDeadLetterOnUnrecordedRenamedSchemaTopicHolds(t *testing.T) {
	l, h := hoursAgo(t)
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":1}`, dbzOrdersAt(1, h.Add(10*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":2}`, dbzOrdersAt(2, h.Add(time.Hour+5*time.Minute)))
	// A schema change message the decoder refuses (a DROP whose id is not
	// "db"."table"): dead-lettered, so its topic is never recorded.
	l.raw(1, "prod.dbserver1", `{"source":{"connector":"mysql","name":"dbserver1","snapshot":"false"},"databaseName":"db",`+
		`"ddl":"DROP TABLE orders","tableChanges":[{"type":"DROP","id":"orders","table":null}]}`)
	l.flushDeadLettering()
	l.want(`SELECT topic FROM cdc_dlq`, "prod.dbserver1")
	l.want(`SELECT count(*) FROM cdc_routes_schema_topics`, "0")
	l.mustMerge()
	l.wantMarks(Marking{Now: time.Now()}, "cdc_db_orders")
}
