package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// A SASL login that fails (wrong password) is reported in the log and on
// the status page, and the password appears in neither, nor in /metrics.
// (kfake drops a failed login without an error code, as some brokers do,
// so the report comes from tracelake's own broker check.)
func TestSecretsNeverShown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const secret = "Wr0ng-s3cret-VALUE"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic),
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "ingest", "the-right-one"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cfg := writeConfig(t, cluster, `group: g, sasl: {mechanism: PLAIN, user: ingest, password: `+secret+`}`, "")
	bin := buildBinary(t)
	run := &child{cmd: exec.Command(bin, "run", "--config", cfg), log: &childLog{t: t, prefix: "run: ", assigned: make(chan struct{}, 1)}}
	run.cmd.Stderr = run.log
	if err := run.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = run.cmd.Process.Signal(syscall.SIGKILL)
		_ = run.cmd.Wait()
	}()

	var page string
	deadline := time.Now().Add(60 * time.Second)
	for {
		page = run.get("/")
		if strings.Contains(page, "not joined to the consumer group yet") && strings.Contains(page, "kafka.sasl") {
			break // the failed login is on the page
		}
		if time.Now().After(deadline) {
			t.Fatalf("no SASL error on the status page within 60s:\n%s\n%s", page, run.log)
		}
		time.Sleep(100 * time.Millisecond) // polling the page for a condition
	}
	metrics := run.get("/metrics")
	if !strings.Contains(metrics, "go_goroutines") {
		t.Fatalf("/metrics not served:\n%.300s", metrics)
	}
	for what, text := range map[string]string{"log": run.log.String(), "status page": page, "metrics": metrics} {
		if strings.Contains(text, secret) {
			t.Errorf("the SASL password appears in the %s", what)
		}
	}
}
