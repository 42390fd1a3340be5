package merge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/sink"
)

// FAILING (364f9ff). The schema change topic is known by its name alone,
// the server's (source.name): a topic routed to another name (a
// RegexRouter SMT over every topic of the connector, dbserver1(.*) →
// prod.dbserver1$1, or a topic.naming.strategy of one's own) holds
// nothing back, and the wrong mark 364f9ff fixed stays for it. Here
// prod.dbserver1, the schema topic, has loaded orders' CREATE TABLE
// (offset 0) and holds orders' DROP TABLE of h+30m not loaded (offset 1,
// end 2); orders' own partition has loaded its changes of h+10m and
// h+3h05m. The DROP removes the rows of h from the model, yet orders is
// marked done for h, h+1 and h+2 with them in it.
func TestMarkReadyRenamedSchemaTopicWithADropToLoadHoldsItsTables(t *testing.T) {
	l, h := hoursAgo(t)
	schema := func(typ, ddl string, pos int, at time.Time) string {
		return fmt.Sprintf(`{"source":{"connector":"mysql","name":"dbserver1","ts_ms":%[1]d,"snapshot":"false","db":"db","table":"orders",`+
			`"file":"mysql-bin.000001","pos":%[4]d,"row":0},"ts_ms":%[1]d,"databaseName":"db","schemaName":null,"ddl":%[3]q,`+
			`"tableChanges":[{"type":%[2]q,"id":"\"db\".\"orders\"","table":null}]}`, at.UnixMilli(), typ, ddl, pos)
	}
	l.raw(1, "prod.dbserver1", schema("CREATE", "CREATE TABLE orders (id INT PRIMARY KEY)", 50, h.Add(5*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":1}`, dbzOrdersAt(1, h.Add(10*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":2}`, dbzOrdersAt(2, h.Add(3*time.Hour+5*time.Minute)))
	l.flush()
	l.want(`SELECT source_server FROM cdc_routes`, "dbserver1")
	l.mustMerge()
	// The DROP at offset 1 of prod.dbserver1, in Kafka, not loaded yet.
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "prod.dbserver1.db.orders", Partition: 0}: {End: 2},
			{Topic: "prod.dbserver1", Partition: 1}:           {End: 2},
		}, nil
	}
	l.wantMarks(Marking{Now: time.Now(), Ends: ends}, "cdc_db_orders")
}
