package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkPeakRSS measures the peak resident memory of a `tracelake run`
// process ingesting a backlog of 1 GiB in ~1 MB messages with
// max_inflight_bytes 256MiB (Kafka runs in this, the parent, process).
func BenchmarkPeakRSS(b *testing.B) {
	for i := 0; i < b.N; i++ {
		bin := buildBinary(b)
		cluster, _ := startKafka(b, 4)
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ProducerBatchMaxBytes(1<<20))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		filler := bytes.Repeat([]byte("x"), 1_000_000-64) // ~1 MB: under the broker's default message limit
		for j := range 1100 {                             // ~1.02 GiB
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: testTopic,
				Value: []byte(fmt.Sprintf(`{"i":%d,"pad":"%s"}`, j, filler))}).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		cfgPath := writeConfig(b, cluster, "group: rss", "max_inflight_bytes: 256MiB")
		cmd := exec.Command(bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
		b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
	}
}
