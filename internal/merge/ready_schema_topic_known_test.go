package merge

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracelake/tracelake/internal/cdc"
	"github.com/tracelake/tracelake/internal/sink"
	"github.com/tracelake/tracelake/internal/sink/duckdb"
)

// dbzSchemaOf is a message of server's schema change topic: a
// tableChanges entry of type typ for db.orders at source time at.
func dbzSchemaOf(server, typ, ddl string, pos int, at time.Time) string {
	return fmt.Sprintf(`{"source":{"connector":"mysql","name":%[5]q,"ts_ms":%[1]d,"snapshot":"false","db":"db","table":"orders",`+
		`"file":"mysql-bin.000001","pos":%[4]d,"row":0},"ts_ms":%[1]d,"databaseName":"db","schemaName":null,"ddl":%[3]q,`+
		`"tableChanges":[{"type":%[2]q,"id":"\"db\".\"orders\"","table":null}]}`, at.UnixMilli(), typ, ddl, pos, server)
}

// A schema change topic is known by what it carries, durably: the load
// of its first schema change message records its server and topic
// (cdc_routes_schema_topics), and a restart, which decodes nothing of
// that topic yet, still holds the server's tables back while it has
// records to load (the DROP at offset 1 of prod.dbserver1).
func TestMarkReadyRenamedSchemaTopicHoldsAfterARestart(t *testing.T) {
	dir := t.TempDir()
	opt := duckdb.Options{Path: filepath.Join(dir, "c.duckdb"), StageDir: filepath.Join(dir, "stage"),
		Table: "cdc", Routed: true, Log: slog.New(slog.DiscardHandler)}
	l := newChangeLoader(t, func(o *duckdb.Options) { *o = opt })
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	l.raw(1, "prod.dbserver1", dbzSchemaOf("dbserver1", "CREATE", "CREATE TABLE orders (id INT PRIMARY KEY)", 50, h.Add(5*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":1}`, dbzOrdersAt(1, h.Add(10*time.Minute)))
	l.flush()
	l.want(`SELECT server, topic FROM cdc_routes_schema_topics`, "dbserver1|prod.dbserver1")

	l.reopen(opt, cdc.Options{Format: cdc.FormatDebezium})
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":2}`, dbzOrdersAt(2, h.Add(3*time.Hour+5*time.Minute)))
	l.flush()
	l.mustMerge()
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "prod.dbserver1.db.orders", Partition: 0}: {End: 2},
			{Topic: "prod.dbserver1", Partition: 1}:           {End: 2}, // the DROP, not loaded
		}, nil
	}
	l.wantMarks(Marking{Now: time.Now(), Ends: ends}, "cdc_db_orders")
	// Loaded again (the same message, a later load): recorded once.
	l.raw(1, "prod.dbserver1", dbzSchemaOf("dbserver1", "CREATE", "CREATE TABLE users (id INT PRIMARY KEY)", 60, h.Add(6*time.Minute)))
	l.flush()
	l.want(`SELECT server, topic FROM cdc_routes_schema_topics`, "dbserver1|prod.dbserver1")
}

// A schema change topic holds back its own server's tables alone: one
// of another server (prod.dbserver2, renamed too) with records to load
// holds nothing of dbserver1's orders, which is marked as far as its own
// partition reached.
func TestMarkReadyAnotherServersSchemaTopicHoldsNothing(t *testing.T) {
	l, h := hoursAgo(t)
	l.raw(1, "prod.dbserver2", dbzSchemaOf("dbserver2", "CREATE", "CREATE TABLE orders (id INT PRIMARY KEY)", 50, h.Add(5*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":1}`, dbzOrdersAt(1, h.Add(10*time.Minute)))
	l.rawKey(0, "prod.dbserver1.db.orders", `{"id":2}`, dbzOrdersAt(2, h.Add(3*time.Hour+5*time.Minute)))
	l.flush()
	l.want(`SELECT server, topic FROM cdc_routes_schema_topics`, "dbserver2|prod.dbserver2")
	l.mustMerge()
	ends := func(context.Context, []string) (map[sink.TopicPartition]Offsets, error) {
		return map[sink.TopicPartition]Offsets{
			{Topic: "prod.dbserver1.db.orders", Partition: 0}: {End: 2},
			{Topic: "prod.dbserver2", Partition: 1}:           {End: 2}, // dbserver2's DROP, not loaded
		}, nil
	}
	at := func(n int) string {
		return "cdc_db_orders|" + h.Add(time.Duration(n)*time.Hour).Format("2006-01-02 15")
	}
	l.wantMarks(Marking{Now: time.Now(), Ends: ends}, "cdc_db_orders", at(0), at(1), at(2))
}
