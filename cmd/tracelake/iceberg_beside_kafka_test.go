package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/tracelake/tracelake/internal/directload"
	"github.com/tracelake/tracelake/internal/tracegen"
	"github.com/tracelake/tracelake/internal/verify"
)

// A load-mode run that also consumes a Kafka topic of OTLP traces into the
// same Iceberg tables (the receivers' loads, a commit each, and the Kafka
// loads of commit_interval share the sink and its group commits), killed
// with SIGKILL at random moments while both arrive: every Kafka span once,
// every request answered 200 stored and none stored more often than it was
// sent, verify OK. (Short session timeouts: kfake holds the group for the
// killed members' sessions, and the last run would wait that long to
// read.)
func TestLongLoadModeBesideKafkaIntoIcebergKill9(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("kills and restarts the binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	cluster, prod := startKafka(t, 3)
	dir := t.TempDir()
	addr := freeAddr(t)
	cfgPath := filepath.Join(dir, "tracelake.yaml")
	cfg := fmt.Sprintf(`kafka: {brokers: [%q], topics: [%s], format: otlp_proto, group: beside, session_timeout: 6s, rebalance_timeout: 6s}
otlp: {mode: load, http: %q}
batch: {max_records: 20, max_interval: 100ms}
sink: {type: iceberg, iceberg: {catalog: %q, warehouse: %q, commit_interval: 300ms}}
metrics: {listen: "127.0.0.1:0"}
`, cluster.ListenAddrs()[0], testTopic, addr, filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	produced := make(chan error, 1)
	var kafkaSpans int
	go func() {
		var err error
		kafkaSpans, err = tracegen.ProduceOTLP(context.Background(), prod, testTopic, "otlp_proto", 600, 5)
		produced <- err
	}()
	var mu sync.Mutex
	sends, acked := map[string]int{}, map[string]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	posted := make(chan error, 1)
	go func() {
		g := tracegen.New(77)
		for range 150 {
			td := g.OTLPTrace()
			var keys []string
			for _, rs := range td.ResourceSpans().All() {
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						keys = append(keys, "team-a/"+s.TraceID().String()+s.SpanID().String())
					}
				}
			}
			body, _ := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
			for {
				mu.Lock()
				for _, k := range keys {
					sends[k]++
				}
				mu.Unlock()
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/traces", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/x-protobuf")
				req.Header.Set("X-Scope-OrgID", "team-a")
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						mu.Lock()
						for _, k := range keys {
							acked[k] = true
						}
						mu.Unlock()
						break
					}
				}
				if time.Now().After(deadline) {
					posted <- fmt.Errorf("a request not stored by the deadline: %v", err)
					return
				}
				time.Sleep(20 * time.Millisecond) // the client's backoff while the process is down
			}
		}
		posted <- nil
	}()
	const listening = "OTLP receiver listening"
	killAtRandomMomentsAfter(t, bin, cfgPath, 4, listening)
	run := startRunUntil(t, bin, cfgPath, "run last", listening)
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	// The Kafka loads catch up: the topic's rows all in.
	rep := verifyAnyExit(t, bin, cfgPath)
	for end := time.Now().Add(time.Minute); ; {
		rows := int64(0)
		for _, p := range rep.Partitions {
			if p.Topic == testTopic {
				rows += p.Rows
			}
		}
		if rows >= int64(kafkaSpans) || time.Now().After(end) {
			break
		}
		time.Sleep(500 * time.Millisecond) // polling verify for the consumer to catch up
		rep = verifyAnyExit(t, bin, cfgPath)
	}
	run.stop(t)
	rep = verifyJSON(t, bin, cfgPath, 0)
	var kafkaRows int64
	for _, p := range rep.Partitions {
		if p.Topic == testTopic {
			kafkaRows += p.Rows
		}
	}
	if !rep.OK || kafkaRows != int64(kafkaSpans) {
		t.Errorf("verify ok=%v problems=%q, %d Kafka spans stored, want %d", rep.OK, rep.Problems, kafkaRows, kafkaSpans)
	}
	stored := sqlCounts(t, bin, cfgPath, `SELECT tenant_id || '/' || trace_id || span_id AS k, count(*) AS n FROM otel_spans WHERE ktopic = '`+directload.Topic("traces")+`' GROUP BY ALL`)
	mu.Lock()
	defer mu.Unlock()
	for k, n := range sends {
		switch s := stored[k]; {
		case acked[k] && s == 0:
			t.Errorf("span %s answered 200, not stored", k)
		case s > n:
			t.Errorf("span %s stored %d times, sent %d times", k, s, n)
		}
	}
	t.Logf("%d request spans sent, %d stored; %d Kafka spans", len(sends), len(stored), kafkaSpans)
}

// verifyAnyExit is verify's report whatever its exit.
func verifyAnyExit(t *testing.T, bin, cfgPath string) verify.Report {
	t.Helper()
	out, _ := exec.Command(bin, "verify", "--config", cfgPath, "--json").Output()
	var rep verify.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify output: %v\n%s", err, out)
	}
	return rep
}
