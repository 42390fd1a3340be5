package config

import (
	"strings"
	"testing"
)

// kafka.brokers given empty (TRACELAKE_KAFKA_BROKERS= from an unset
// variable, or brokers: [] in the file) is refused where topics are
// consumed: it was read as no key given, and 127.0.0.1:9092 filled in,
// a Kafka nobody named. Only brokers left out default to it.
func TestEmptyBrokersAreRefusedNotTheDefault(t *testing.T) {
	const want = "kafka.brokers: at least one host:port is required"
	_, err := loadChecked(t, "kafka: {brokers: [], topics: [t]}")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("brokers: []: error %v, want %q", err, want)
	}
	t.Setenv("TRACELAKE_KAFKA_BROKERS", "")
	cfg, err := loadChecked(t, "kafka: {brokers: [\"k:9092\"], topics: [t]}")
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("empty TRACELAKE_KAFKA_BROKERS: error %v (brokers %q), want %q", err, cfg.Kafka.Brokers, want)
	}
	// Left out, the default stands.
	t.Setenv("TRACELAKE_KAFKA_BROKERS", "k:9092")
	if cfg, err := loadChecked(t, "kafka: {topics: [t]}"); err != nil || strings.Join(cfg.Kafka.Brokers, ",") != "k:9092" {
		t.Errorf("brokers from the environment: %v, %q", err, cfg.Kafka.Brokers)
	}
}
