package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --brokers given empty (--brokers=, a script's unset variable) over a
// file naming its brokers is refused, as --group= is: it emptied
// kafka.brokers, and the default for a config with topics then filled
// in 127.0.0.1:9092, so the command went to a Kafka nobody named.
func TestEmptyBrokersFlagIsRefusedNotTheDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("kafka: {brokers: [\"k:9092\"], topics: [t]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := newFlagSet("run")
	var cf configFlags
	cf.register(fs)
	if err := fs.Parse([]string{"--config", path, "--brokers="}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cf.loadFor(true)
	const want = "kafka.brokers: at least one host:port is required"
	if err == nil || !strings.Contains(err.Error(), want) {
		var brokers []string
		if cfg != nil {
			brokers = cfg.Kafka.Brokers
		}
		t.Errorf("--brokers= over a file with brokers [k:9092]: got %v (brokers %q), want a usage error naming %q", err, brokers, want)
	}
}
