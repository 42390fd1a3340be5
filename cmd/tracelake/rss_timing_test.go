package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tracelake/tracelake/internal/tracegen"
)

// BenchmarkPeakRSSSpans measures the peak resident memory of a
// `tracelake run` process ingesting 600,000 ~1 KB agent-trace spans with
// the default settings (Kafka runs in this, the parent, process).
func BenchmarkPeakRSSSpans(b *testing.B) {
	bin := buildBinary(b)
	cluster, cl := startKafka(b, 4)
	const n = 600_000
	if err := tracegen.Produce(context.Background(), cl, testTopic, n, 1, nil); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		cfgPath := writeConfig(b, cluster, fmt.Sprintf("group: rss-%d", i), "")
		cmd := exec.Command(bin, "run", "--config", cfgPath, "--exit-when-idle", "1s")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		b.ReportMetric(float64(n)/(time.Since(start)-time.Second).Seconds(), "records/s")
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
		b.ReportMetric(float64(rss)/1024, "peak-RSS-MiB")
	}
}

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
