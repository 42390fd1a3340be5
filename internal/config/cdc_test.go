package config

import (
	"os"
	"path/filepath"
	"testing"
)

// A heartbeat topic must be among kafka.topics (docs/OPERATIONS.md, and
// README "Done marks": "read from that topic, which kafka.topics must
// include"): one that is not read brings no heartbeat, and the tables it
// was meant to move are never marked, without a word. Validation
// accepted it, and a topic_regex that does not match it; now it refuses
// both.
func TestHeartbeatTopicNotReadIsRefused(t *testing.T) {
	for topics, ok := range map[string]bool{
		`topics: [dbserver1.inv.orders]`:                                 false,
		`topic_regex: '^dbserver1\.'`:                                    false,
		`topics: [dbserver1.inv.orders, __debezium-heartbeat.dbserver1]`: true,
		`topic_regex: 'dbserver1'`:                                       true,
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		yaml := "kafka: {brokers: [127.0.0.1:9092], format: debezium, " + topics + "}\n" +
			"cdc: {heartbeats: [{topic: __debezium-heartbeat.dbserver1, lag: 5m}]}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := FromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); (err == nil) != ok {
			t.Errorf("kafka %s with heartbeat topic __debezium-heartbeat.dbserver1: %v, want accepted %v", topics, err, ok)
		}
	}
}
