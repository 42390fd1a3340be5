package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// A load-mode run taking traces and logs (otlp.signals) and consuming a
// topic of traces beside its receivers: the topic's records load into the
// traces table alone (kafka.signal's), never into otel_logs. Verify's
// report of otel_logs took the topic's partitions for its own: nothing of
// them loaded there, it said "nothing loaded yet; loading starts at offset
// 4" (the group's committed offset, the traces table's) and a lag of 6,
// for records that table will never hold.
func TestVerifyOtherSignalClaimsNoKafkaPartition(t *testing.T) {
	path := committedStartConfig(t, ", format: otlp_proto",
		"otlp: {mode: load, http: \"127.0.0.1:0\", signals: [traces, logs]}\ntenancy: {kafka_header: \"\"}")
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdout: &out, stderr: &errOut}
	if err := cmdVerify(context.Background(), env, []string{"--config", path, "--json"}); err != nil {
		t.Fatalf("verify: %v (want it to pass)\n%s%s", err, out.String(), errOut.String())
	}
	var rep struct { // verify.Report's JSON
		Signals []struct {
			Table      string `json:"table"`
			Partitions []struct {
				Topic string `json:"topic"`
				Lag   int64  `json:"lag"`
				Start *int64 `json:"committed_start"`
			} `json:"partitions"`
		} `json:"signals"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Signals) != 1 {
		t.Fatalf("signal reports %+v, want otel_logs's", rep.Signals)
	}
	for _, p := range rep.Signals[0].Partitions {
		if p.Topic == testTopic {
			start := "none"
			if p.Start != nil {
				start = fmt.Sprint(*p.Start)
			}
			t.Errorf("%s's report has %s's partition (lag %d, committed start %s); the topic loads into the traces table alone",
				rep.Signals[0].Table, p.Topic, p.Lag, start)
		}
	}
}
