package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// dbzServerChange is a Debezium MySQL insert of server dbserver1 (its
// source.name) into db.table of row id at source time at.
func dbzServerChange(db, table string, id int, at time.Time) []byte {
	return fmt.Appendf(nil, `{"before":null,"after":{"id":%d},"source":{"connector":"mysql","name":"dbserver1","db":%q,"table":%q,"file":"mysql-bin.000003","pos":%d,"row":0,"ts_ms":%d},"op":"c","ts_ms":%d}`,
		id, db, table, 1000+id, at.UnixMilli(), at.UnixMilli())
}

// dbzSchemaChange is a message of dbserver1's schema change topic: a
// tableChanges entry of type typ (CREATE, DROP) for db.table at source
// time at.
func dbzSchemaChange(typ, ddl, db, table string, pos int, at time.Time) []byte {
	return fmt.Appendf(nil, `{"source":{"connector":"mysql","name":"dbserver1","ts_ms":%[5]d,"snapshot":"false","db":%[2]q,"table":%[3]q,`+
		`"file":"mysql-bin.000003","pos":%[4]d,"row":0},"ts_ms":%[5]d,"databaseName":%[2]q,"schemaName":null,"ddl":%[6]q,`+
		`"tableChanges":[{"type":%[1]q,"id":"\"%[2]s\".\"%[3]s\"","table":null}]}`, typ, db, table, pos, at.UnixMilli(), ddl)
}

// A Debezium MySQL table's DROP TABLE comes on its server's schema change
// topic (named as the server), not on the table's own (README "Database
// change capture": "so read that topic too"): that topic may carry a
// truncation of every table of the server. MarkReady waited only for the
// partitions of the topics the table's changes had come from, and for a
// topic of no table only while nothing had loaded from it: once the
// schema topic had loaded a statement that makes no row (the CREATE
// TABLE of h+5m), a DROP TABLE of orders at h+30m still to load on it
// held nothing back, and a heartbeat of h+3h05m (less 30m) marked
// cdc_inv_orders done for h and h+1 while the model still held the rows
// the drop removes. Here the schema topic is behind (not read by the
// second run, as a consumer behind on that partition), and orders' own
// partition and the heartbeat's are loaded to their end.
func TestCDCDropStillToLoadOnTheSchemaTopicHoldsItsTable(t *testing.T) {
	const orders, server, beat = "dbserver1.inv.orders", "dbserver1", "__debezium-heartbeat.dbserver1"
	c, cfg := debeziumTopics(t, []config.CDCHeartbeat{{Topic: beat, Lag: config.Duration(30 * time.Minute)}}, orders, server, beat)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	cl := producer(t, c)
	produce(t, cl, &kgo.Record{Topic: server, Value: dbzSchemaChange("CREATE", "CREATE TABLE orders (id INT PRIMARY KEY)", "inv", "orders", 100, h.Add(5*time.Minute))})
	produce(t, cl, &kgo.Record{Topic: orders, Key: []byte(`{"id":1}`), Value: dbzServerChange("inv", "orders", 1, h.Add(10*time.Minute))})
	s := openRouted(t, cfg)
	markWithBeats(t, cfg, s, runWithBeats(t, cfg, s))
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_orders`, "1")
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_ledger WHERE topic = 'dbserver1'`, "1") // the CREATE: no row

	produce(t, cl, &kgo.Record{Topic: server, Value: dbzSchemaChange("DROP", "DROP TABLE `inv`.`orders`", "inv", "orders", 2000, h.Add(30*time.Minute))})
	heartbeat := func(at time.Time) {
		produce(t, cl, &kgo.Record{Topic: beat, Key: []byte(`{"serverName":"dbserver1"}`),
			Value: fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}]},"payload":{"ts_ms":%d}}`, at.UnixMilli())})
	}
	heartbeat(h.Add(3*time.Hour + 5*time.Minute))
	behind := *cfg
	behind.Kafka.Topics = []string{orders, beat} // the schema topic's partition not read yet
	beats := runWithBeats(t, &behind, s)
	markWithBeats(t, cfg, s, beats)
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_orders`, "1") // the drop is not loaded
	wantQuery(t, s.DB(), `SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`)

	// Loaded, the drop empties the model, which is then done for h and
	// h+1 by the next heartbeat (h+3h10m less 30m).
	heartbeat(h.Add(3*time.Hour + 10*time.Minute))
	markWithBeats(t, cfg, s, runWithBeats(t, cfg, s))
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_inv_orders`, "0")
	at := func(n int) string {
		return "cdc_inv_orders|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	wantQuery(t, s.DB(), `SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`, at(0), at(1))
}

// The same with the connector's topics renamed (a RegexRouter over every
// topic of the connector, dbserver1(.*) → prod.dbserver1$1): the schema
// change topic, prod.dbserver1, is known by what it carries. Its CREATE
// TABLE, loaded by the first run, records it as dbserver1's; its DROP,
// not loaded by the second, holds orders back as the topic named as the
// server does.
func TestCDCDropStillToLoadOnARenamedSchemaTopicHoldsItsTable(t *testing.T) {
	const orders, schemaTopic, beat = "prod.dbserver1.inv.orders", "prod.dbserver1", "__debezium-heartbeat.dbserver1"
	c, cfg := debeziumTopics(t, []config.CDCHeartbeat{{Topic: beat, Lag: config.Duration(30 * time.Minute), Topics: `^prod\.dbserver1(\.|$)`}},
		orders, schemaTopic, beat)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	cl := producer(t, c)
	produce(t, cl, &kgo.Record{Topic: schemaTopic, Value: dbzSchemaChange("CREATE", "CREATE TABLE orders (id INT PRIMARY KEY)", "inv", "orders", 100, h.Add(5*time.Minute))})
	produce(t, cl, &kgo.Record{Topic: orders, Key: []byte(`{"id":1}`), Value: dbzServerChange("inv", "orders", 1, h.Add(10*time.Minute))})
	s := openRouted(t, cfg)
	markWithBeats(t, cfg, s, runWithBeats(t, cfg, s))
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_orders`, "1")
	wantQuery(t, s.DB(), `SELECT server, topic FROM cdc_routes_schema_topics`, "dbserver1|prod.dbserver1")

	produce(t, cl, &kgo.Record{Topic: schemaTopic, Value: dbzSchemaChange("DROP", "DROP TABLE `inv`.`orders`", "inv", "orders", 2000, h.Add(30*time.Minute))})
	heartbeat := func(at time.Time) {
		produce(t, cl, &kgo.Record{Topic: beat, Key: []byte(`{"serverName":"dbserver1"}`),
			Value: fmt.Appendf(nil, `{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts_ms"}]},"payload":{"ts_ms":%d}}`, at.UnixMilli())})
	}
	heartbeat(h.Add(3*time.Hour + 5*time.Minute))
	behind := *cfg
	behind.Kafka.Topics = []string{orders, beat} // the schema topic's partition not read yet
	markWithBeats(t, cfg, s, runWithBeats(t, &behind, s))
	wantQuery(t, s.DB(), `SELECT id FROM cdc_inv_orders`, "1") // the drop is not loaded
	wantQuery(t, s.DB(), `SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`)

	heartbeat(h.Add(3*time.Hour + 10*time.Minute))
	markWithBeats(t, cfg, s, runWithBeats(t, cfg, s))
	wantQuery(t, s.DB(), `SELECT count(*) FROM cdc_inv_orders`, "0")
	at := func(n int) string {
		return "cdc_inv_orders|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	wantQuery(t, s.DB(), `SELECT "table", strftime(hour, '%Y-%m-%d %H') FROM tracelake_ready ORDER BY ALL`, at(0), at(1))
}
