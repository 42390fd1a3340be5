package pipeline_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/config"
)

// Beats.SeeMessage takes every record of a configured heartbeat topic
// for a heartbeat message, whatever it holds, and AppendRows then makes
// no row of it: a topic of changes given as the heartbeat topic (here
// dbserver1.inv.orders, which ParseHeartbeatTopic accepts as <prefix>.
// <server>) loses every change on it without a trace: no row, no dead
// letter, the ledger counting the records as having made none, so verify
// passes. The Debezium decoder itself takes a record of a
// __debezium-heartbeat topic for a heartbeat only when it has no op; a
// change event (op, source) is no heartbeat message and should be a row
// or a dead letter.
func TestCDCChangeOnTheHeartbeatTopicIsNotLost(t *testing.T) {
	const orders = "dbserver1.inv.orders"
	c, cfg := debeziumTopics(t, []config.CDCHeartbeat{{Topic: orders}}, orders)
	h := time.Now().UTC().Truncate(time.Hour).Add(-5 * time.Hour)
	produce(t, producer(t, c), &kgo.Record{Topic: orders, Key: []byte(`{"id":1}`), Value: debeziumAt("inv", "orders", 1, h.Add(10*time.Minute))})
	s := openRouted(t, cfg)
	runWithBeats(t, cfg, s)
	wantQuery(t, s.DB(), `SELECT count(*), sum(records + dlq_records)::BIGINT FROM cdc_ledger`, "1|1")
}
