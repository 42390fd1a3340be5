package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Forward mode into Iceberg: an OTLP/gRPC exporter sends spans while
// `tracelake run` (receivers forwarding to the topic it consumes, its
// loads Iceberg commits) is killed with SIGKILL at random moments and
// restarted on the same port. Requests in flight at a kill, forwarded or
// not, are retried by the client; nothing is lost, copies come only from
// answers lost to a kill, and verify is OK (each Kafka offset once, no
// gap) across the kills.
func TestLongOTLPForwardIntoIcebergKill9(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary")
	}
	t.Parallel() // mostly waiting on kills, restarts and commits
	bin := buildBinary(t)
	cluster, _ := startKafka(t, 2)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [%s], format: otlp_proto, group: kill9, session_timeout: 6s, rebalance_timeout: 6s}
otlp: {grpc: %q, forward: {traces_topic: %s}}
batch: {max_interval: 100ms}
sink: {type: iceberg, iceberg: {catalog: %q, warehouse: %q, commit_interval: 300ms}}
metrics: {listen: "127.0.0.1:0"}
`, cluster.ListenAddrs()[0], testTopic, addr, testTopic, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const spans = 2000
	rep := forwardAcrossKills(t, bin, cfgPath, addr, spans)
	t.Logf("%d spans stored for %d sent: %d copies from retries across the kills", rep.Copies.Rows, spans, rep.Copies.Rows-spans)
}
